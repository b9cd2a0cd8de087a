"""bertlib's heads against transformers' own: the same random weights, the same batch.

Chapters 06 and 07 claim their heads are transformers' heads, parameter for parameter. The
proof builds transformers' class with random weights, saves it, loads the folder into
bertlib's class of the same name, and compares scores and loss on one batch.
"""

import tempfile

import torch

from bertlib.finetuning import models as task_models
from bertlib.pretraining.models import BertForPreTraining
from bertlib.runtime import seed_everything

__all__ = ["heads_against_transformers", "pretraining_heads_against_transformers"]

TINY = dict(vocab_size=500, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
            intermediate_size=128, max_position_embeddings=64, attn_implementation="eager")


def heads_against_transformers() -> list[tuple[str, float, float, float]]:
    """(class name, largest logit difference, our loss, transformers' loss) per head."""
    import transformers
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()
    transformers_logging.set_verbosity_error()
    ids = torch.randint(5, 500, (4, 20))
    inputs = dict(input_ids=ids, attention_mask=torch.ones_like(ids), token_type_ids=ids % 2)
    heads = {"BertForSequenceClassification": (3, dict(labels=torch.tensor([0, 2, 1, 2]))),
             "BertForTokenClassification": (3, dict(labels=ids % 3)),
             "BertForQuestionAnswering": (2, dict(start_positions=torch.tensor([1, 2, 3, 4]),
                                                  end_positions=torch.tensor([5, 6, 7, 8])))}
    rows = []
    for name, (num_labels, targets) in heads.items():  # class name: (labels, targets)
        seed_everything(0)
        reference = getattr(transformers, name)(
            transformers.BertConfig(**TINY, num_labels=num_labels)).eval()
        with tempfile.TemporaryDirectory() as folder:
            reference.save_pretrained(folder)
            ours = getattr(task_models, name).from_pretrained(folder)
        with torch.no_grad():
            mine, theirs = ours(**inputs, **targets), reference(**inputs, **targets)
        their_logits = (theirs.logits if hasattr(theirs, "logits")
                        else torch.stack([theirs.start_logits, theirs.end_logits], -1))
        gap = (mine.logits - their_logits).abs().max().item()
        rows.append((name, gap, float(mine.loss), float(theirs.loss)))
    return rows


def pretraining_heads_against_transformers() -> tuple[float, float, float, list[str]]:
    """Chapter 06's BertForPreTraining against transformers': (our loss, transformers'
    loss, the largest difference of the scores at the masked positions, the weights our
    model had to start fresh)."""
    from transformers import BertConfig as ReferenceConfig
    from transformers import BertForPreTraining as ReferenceForPreTraining
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()
    seed_everything(0)
    reference = ReferenceForPreTraining(ReferenceConfig(**TINY)).eval()
    with tempfile.TemporaryDirectory() as folder:
        reference.save_pretrained(folder)
        ours = BertForPreTraining.from_pretrained(folder)
    ids = torch.randint(5, 500, (4, 20))
    labels = torch.full_like(ids, -100)
    labels[:, 3:6] = ids[:, 3:6]
    inputs = dict(input_ids=ids, attention_mask=torch.ones_like(ids), token_type_ids=ids % 2,
                  labels=labels, next_sentence_label=torch.tensor([0, 1, 1, 0]))
    with torch.no_grad():
        mine, theirs = ours(**inputs), reference(**inputs)
    gap = (mine.mlm_logits - theirs.prediction_logits[labels != -100]).abs().max().item()
    return float(mine.loss), float(theirs.loss), gap, ours.new_weights
