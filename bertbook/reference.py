"""bertlib's task heads against transformers' own: the same random weights, the same batch.

Chapter 07 claims its three heads are transformers' heads, parameter for parameter. The
proof builds each of transformers' classes with random weights, saves it, loads the folder
into bertlib's class of the same name, and compares logits and loss on one batch.
"""

import tempfile

import torch

from bertlib import finetuning
from bertlib.runtime import seed_everything

__all__ = ["HEAD_CHECKS", "heads_against_transformers"]

TINY = dict(vocab_size=500, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
            intermediate_size=128, max_position_embeddings=64, attn_implementation="eager")
HEAD_CHECKS = ["BertForSequenceClassification", "BertForTokenClassification",
               "BertForQuestionAnswering"]


def heads_against_transformers() -> list[tuple[str, float, float, float]]:
    """(class name, largest logit difference, our loss, transformers' loss) per head."""
    import transformers
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()
    transformers_logging.set_verbosity_error()
    ids = torch.randint(5, 500, (4, 20))
    inputs = dict(input_ids=ids, attention_mask=torch.ones_like(ids), token_type_ids=ids % 2)
    labels = {"BertForSequenceClassification": (3, dict(labels=torch.tensor([0, 2, 1, 2]))),
              "BertForTokenClassification": (3, dict(labels=ids % 3)),
              "BertForQuestionAnswering": (2, dict(start_positions=torch.tensor([1, 2, 3, 4]),
                                                   end_positions=torch.tensor([5, 6, 7, 8])))}
    rows = []
    for name in HEAD_CHECKS:
        num_labels, targets = labels[name]
        seed_everything(0)
        reference = getattr(transformers, name)(
            transformers.BertConfig(**TINY, num_labels=num_labels)).eval()
        with tempfile.TemporaryDirectory() as folder:
            reference.save_pretrained(folder)
            ours = getattr(finetuning, name).from_pretrained(folder)
        with torch.no_grad():
            mine, theirs = ours(**inputs, **targets), reference(**inputs, **targets)
        their_logits = (theirs.logits if hasattr(theirs, "logits")
                        else torch.stack([theirs.start_logits, theirs.end_logits], -1))
        gap = (mine.logits - their_logits).abs().max().item()
        rows.append((name, gap, float(mine.loss), float(theirs.loss)))
    return rows
