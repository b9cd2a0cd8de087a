"""Fine-tuning's road: the recipe (every knob in one place), the loop that trains encoder
and head together, prediction, scoring a task's features (accuracy, F1 for two classes as
GLUE scores MRPC, mention F1 as CoNLL's scorer counts, SQuAD's exact match and overlap F1),
and the one call that turns labelled texts into a classifier.

How this file is made: written by hand (chapter 07 tells the recipe and the loop in prose).
"""

import contextlib
import math
import sys
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from bertlib.batch import IGNORE_INDEX, MODEL_INPUTS, PaddingCollator
from bertlib.core.encoder import FRESH_WEIGHTS
from bertlib.errors import ConfigError, InputError
from bertlib.finetuning.examples import TextExample
from bertlib.finetuning.metrics import best_span, f1_score
from bertlib.finetuning.models import BertForSequenceClassification, classification_features
from bertlib.runtime import autocast, best_device, resolve_precision, seed_everything
from bertlib.training.trainer import StepSettings, Trainer, TrainingConfig

__all__ = [
    "FineTuningRecipe",
    "fine_tune",
    "predict",
    "mention_f1",
    "evaluate_classification",
    "evaluate_tagging",
    "evaluate_span_qa",
    "fine_tune_classifier",
    "classify",
]


@dataclass(kw_only=True)
class FineTuningRecipe(StepSettings):
    """How to fine-tune, every knob in one place: the update's settings (`StepSettings`,
    shared with pretraining's `TrainingConfig`) and a length in epochs. The defaults are the
    paper's (§4.1, Appendix A.3: batch 32, 2-4 epochs, a rate from {5, 4, 3, 2}e-5, warm-up
    over the first 10%, AdamW with weight decay 0.01); small models want larger rates (1e-3
    for bert-tiny).

    epochs may be fractional; min_steps lifts a tiny training set to enough updates.
    precision: "auto" (bf16 on GPUs of compute capability 8.0 and up, fp16 with a loss
    scaler below, fp32 on a CPU), or "fp32", "bf16", "fp16". seed fixes the batch order,
    and, in fine_tune_classifier, the new head's initialisation. progress shows a bar."""

    learning_rate: float = 5e-5  # the paper's largest fine-tuning rate, not pretraining's
    epochs: float = 3.0
    min_steps: int = 0
    warmup_share: float = 0.1

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.epochs > 0:
            raise ConfigError(f"epochs must be positive, not {self.epochs!r}")
        if not 0 <= self.warmup_share < 1:
            raise ConfigError(f"warmup_share must lie in [0, 1), the share of the steps spent "
                              f"warming up, not {self.warmup_share!r}")

    def training_config(self, examples: int, evaluate_each_epoch: bool) -> TrainingConfig:
        """The trainer's settings for this recipe on `examples` examples: epochs become
        steps (at least min_steps), the warm-up share becomes steps, a batch is never
        larger than the data."""
        batch_size = min(self.batch_size, examples)
        steps = max(self.min_steps, math.ceil(self.epochs * examples / batch_size))
        per_epoch = max(1, examples // batch_size)
        return TrainingConfig(**{**self.step_settings(), "batch_size": batch_size},
                              steps=steps, warmup_steps=int(self.warmup_share * steps),
                              eval_every=per_epoch if evaluate_each_epoch else 0)


@contextlib.contextmanager
def new_head_expected() -> Iterator[None]:
    """Loading an encoder's folder into a model with a head warns that the head starts from
    random values. Where the head is about to be fine-tuned that is the point, so the
    warning is left out (and every other kept). Not in __all__: the library's and the
    book's fine-tuning code use it, a user reading the warning needs no switch for it."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=f".*start {FRESH_WEIGHTS}")
        yield


def _check_labels(model: nn.Module, features: list[dict]) -> None:
    """Labels must name one of the model's labels: checked once here, where the data
    enters, instead of inside every step (where reading them would stall a GPU)."""
    limit = model.config.num_labels
    labels = [f["labels"] for f in features if "labels" in f]
    flat = [x for item in labels for x in (item if isinstance(item, list) else [item])]
    wrong = sorted({x for x in flat if x != IGNORE_INDEX and not 0 <= x < limit})
    if wrong:
        raise InputError(f"labels must lie in 0..{limit - 1} (or be {IGNORE_INDEX} to skip a "
                         f"position); found {wrong[:5]}. Does the model's num_labels match "
                         "the task?")


def fine_tune(model: nn.Module, features: list[dict], recipe: FineTuningRecipe,
              collator: PaddingCollator, device: torch.device,
              evaluate=None, output_dir: str | Path | None = None,
              resume: bool = False) -> dict:
    """Train model and head together on the features (the whole model, not only the head),
    and return the model to eval mode. evaluate(model) -> {metric: value}, when given, runs
    after each epoch (a dev set); returns {"state": TrainingState, "dev": [per epoch]}.
    With output_dir, Ctrl-C (or SIGTERM) saves the step in hand there, and resume=True
    goes on from it to the same weights as a run never stopped."""
    if not features:
        raise InputError("no training features: the task's training split is empty")
    _check_labels(model, features)
    config = recipe.training_config(len(features), evaluate is not None)
    state = Trainer(model, features, collator, config, device, output_dir=output_dir,
                    evaluate=evaluate).train(resume=resume)
    model.eval()
    return {"state": state, "dev": state.evaluations}


@torch.no_grad()
def predict(model: nn.Module, features: list[dict], collator: PaddingCollator,
            device: torch.device, batch_size: int = 128,
            precision: str = "auto") -> list[torch.Tensor]:
    """Each feature's logits on the CPU in float32, padding cut off."""
    model.eval().to(device)
    precision = resolve_precision(precision, device)
    results = []
    for first in range(0, len(features), batch_size):
        chunk = features[first:first + batch_size]
        batch = {k: v.to(device) for k, v in collator(chunk).items() if k in MODEL_INPUTS}
        with autocast(device, precision):
            logits = model(**batch).logits.float().cpu()
        results += [row if row.dim() == 1 else row[:len(f["input_ids"])]
                    for row, f in zip(logits, chunk)]
    return results


def mentions(tags: list[int]) -> set[tuple[int, int, int]]:
    """(first word, last word, kind) of each mention in B/I/O tags numbered as tag_names
    makes them (B of kind k is 2k + 1, its I is 2k + 2). An I that does not continue a
    mention of its kind opens one, as CoNLL's scorer does."""
    found, start, kind = set(), None, None
    for i, tag in enumerate([*tags, 0]):
        continues = start is not None and tag > 0 and tag % 2 == 0 and (tag - 1) // 2 == kind
        if start is not None and not continues:
            found.add((start, i - 1, kind))
            start = None
        if tag > 0 and not continues:
            start, kind = i, (tag - 1) // 2
    return found


def mention_f1(predicted_rows: list[list[int]], gold_rows: list[list[int]]) -> float:
    """Mention F1 over rows of word tags: a mention counts only when its words and its
    kind match exactly. Counted over all rows at once, not averaged per row."""
    hits = predicted = gold = 0
    for tags, gold_tags in zip(predicted_rows, gold_rows, strict=True):
        found, expected = mentions(tags), mentions(gold_tags)
        hits += len(found & expected)
        predicted += len(found)
        gold += len(expected)
    return f1_score(hits, predicted, gold)


def evaluate_classification(model, features, collator, device) -> dict[str, float]:
    """Accuracy, and F1 of the second class when there are two (as GLUE scores MRPC)."""
    predicted = torch.stack(predict(model, features, collator, device)).argmax(-1)
    gold = torch.tensor([f["labels"] for f in features])
    result = {"accuracy": float((predicted == gold).float().mean())}
    if model.num_labels == 2:
        true_positives = int(((predicted == 1) & (gold == 1)).sum())
        result["f1"] = f1_score(true_positives, int((predicted == 1).sum()),
                                int((gold == 1).sum()))
    return result


def evaluate_tagging(model, features, collator, device) -> dict[str, float]:
    """Mention F1 and word accuracy, over the words (the first pieces)."""
    predicted_rows, gold_rows = [], []
    for logits, feature in zip(predict(model, features, collator, device), features):
        first_pieces = torch.tensor(feature["labels"]) != IGNORE_INDEX
        predicted_rows.append(logits[first_pieces].argmax(-1).tolist())
        gold_rows.append([t for t in feature["labels"] if t != IGNORE_INDEX])
    right_words = sum(p == g for predicted, gold in zip(predicted_rows, gold_rows)
                      for p, g in zip(predicted, gold))
    return {"mention_f1": mention_f1(predicted_rows, gold_rows),
            "word_accuracy": right_words / sum(map(len, gold_rows))}


def evaluate_span_qa(model, features, collator, device,
                     max_answer_length: int = 30) -> dict[str, float]:
    """SQuAD's exact match and overlap F1 (best over the gold answers), in pieces."""
    exact = overlap = 0.0
    for logits, feature in zip(predict(model, features, collator, device), features):
        allowed = torch.tensor(feature["token_type_ids"]) == 1
        allowed[-1] = False  # the final [SEP]
        start, end = best_span(logits[:, 0], logits[:, 1], allowed, max_answer_length)
        exact += (start, end) in feature["answers"]
        overlap += max(f1_score(max(0, min(end, e) - max(start, s) + 1), end - start + 1,
                                e - s + 1) for s, e in feature["answers"])
    return {"exact_match": exact / len(features), "f1": overlap / len(features)}


def fine_tune_classifier(checkpoint: str | Path, tokenizer, texts: list[str],
                         labels: list, recipe: FineTuningRecipe | None = None,
                         max_length: int = 128, dev: tuple[list[str], list] | None = None,
                         device: str | torch.device | None = None,
                         output_dir: str | Path | None = None, resume: bool = False):
    """Texts and their labels in, a fine-tuned BertForSequenceClassification out (eval
    mode). Labels may be strings, numbers or booleans; the config keeps their names as
    text in id2label (transformers' way) and the labels themselves, with their types, in
    label_values, so that `classify` gives back 1 for a label 1, not "1", after a save too.
    dev=(texts, labels) prints and records dev accuracy after each epoch.

    With output_dir, Ctrl-C (or SIGTERM) saves the step in hand there, resume=True goes
    on from it, and the finished model is saved, with its tokenizer, in output_dir/model."""
    recipe = recipe or FineTuningRecipe()
    texts, labels = _paired(texts, labels, "texts and labels")
    names = _label_names(labels)
    index = {name: i for i, name in enumerate(names)}
    seed_everything(recipe.seed)  # the new head's initial weights
    with new_head_expected():  # the head starts fresh on purpose: it is trained next
        model = BertForSequenceClassification.from_pretrained(
            checkpoint, id2label={i: str(name) for i, name in enumerate(names)},
            label_values=names)
    # Texts are cut where the model's position table ends, and so is the saved tokenizer.
    tokenizer = tokenizer.with_max_length(min(max_length, model.config.max_position_embeddings))
    features = classification_features(tokenizer, [TextExample(t, index[y])
                                                   for t, y in zip(texts, labels)])
    device = best_device(device)
    collator = PaddingCollator(tokenizer.pad_id)
    evaluate = None
    if dev is not None:
        dev_texts, dev_labels = _paired(*dev, "dev texts and dev labels")
        unseen = sorted({str(y) for y in dev_labels if y not in index})
        if unseen:
            raise InputError(f"dev labels {unseen[:5]} never occur in training, so the model "
                             "cannot predict them; drop those dev texts or add training ones")
        dev_features = classification_features(
            tokenizer, [TextExample(t, index[y]) for t, y in zip(dev_texts, dev_labels)])

        def evaluate(trained):  # the accuracy alone: bertlib.finetuning.run imports this module
            logits = predict(trained, dev_features, collator, device)
            right = sum(int(row.argmax()) == f["labels"] for row, f in zip(logits, dev_features))
            print(f"dev accuracy {right / len(dev_features):.3f}", file=sys.stderr)
            return {"dev_accuracy": right / len(dev_features)}

    fine_tune(model, features, recipe, collator, device, evaluate, output_dir, resume)
    if output_dir is not None:
        model.save_pretrained(Path(output_dir) / "model")
        tokenizer.save_pretrained(Path(output_dir) / "model")
    return model


def _paired(texts, labels, what: str) -> tuple[list[str], list]:
    """Texts and labels as two lists of one length: a generator is read once, one string
    is one text (not a list of characters), and a tensor or array of labels is read as
    the numbers it holds."""
    texts = _checked_texts(texts, what.rsplit(" and ", 1)[0].removesuffix("s"))
    labels = labels.tolist() if hasattr(labels, "tolist") else list(labels)
    labels = [label.tolist() if hasattr(label, "tolist") else label for label in labels]
    if len(texts) != len(labels):
        raise InputError(f"{what} differ in number ({len(texts)} and {len(labels)}); give "
                         "one label per text")
    if not texts:
        raise InputError(f"no {what}: give at least one labelled text")
    return texts, labels


def _checked_texts(texts, what: str) -> list[str]:
    """Texts as a list, each a string with something in it: a bad one is named by its
    position before any work starts, instead of stopping a batch half-way."""
    texts = [texts] if isinstance(texts, str) else list(texts)
    for position, text in enumerate(texts):
        if isinstance(text, bytes):
            raise InputError(f"{what} {position} is bytes, not a string: decode it first "
                             "(text.decode('utf-8'))")
        if not isinstance(text, str):
            raise InputError(f"{what} {position} is {text!r} (a {type(text).__name__}), not "
                             "a string")
        if not text.strip():
            raise InputError(f"{what} {position} is empty: there is nothing to read in it; "
                             "drop it or give it its text")
    return texts


def _label_names(labels: list) -> list:
    """The distinct labels, in a stable order, as the classes to learn. Refused when
    they cannot name classes: unhashable, one class, or two labels Python counts as one
    (True and 1) or that config.json would save under one name (1 and "1")."""
    for position, label in enumerate(labels):
        if label is None:
            raise InputError(f"label {position} is None: give every text its label (leave "
                             "unlabelled texts out of training)")
        if not isinstance(label, (str, int, float, bool)):
            raise InputError(f"label {position} is {label!r}, a {type(label).__name__}: "
                             "labels must be strings, numbers or booleans")
    distinct = set(labels)
    typed = {(type(label), label) for label in labels}
    by_name: dict[str, set] = {}
    for kind, label in typed:
        by_name.setdefault(str(label), set()).add(f"{label!r} ({kind.__name__})")
    clash = next((sorted(group) for group in by_name.values() if len(group) > 1), None)
    if clash is None and len(typed) > len(distinct):
        clash = sorted(f"{label!r} ({kind.__name__})" for kind, label in typed)
    if clash:
        raise InputError(f"labels {', '.join(clash)} would become one class; spell each "
                         "label one way")
    if len(distinct) < 2:
        raise InputError(f"a classifier needs at least two labels; every text is labelled "
                         f"{labels[0]!r}")
    return sorted(distinct, key=str)


def classify(model: nn.Module, tokenizer, texts: list[str] | str,
             device: str | torch.device | None = None) -> list:
    """The label that the model gives each text: as it was given to fine_tune_classifier
    (its type kept, also after save_pretrained and from_pretrained), else the config's
    id2label name. One string is one text."""
    features = classification_features(tokenizer, _checked_texts(texts, "text"))
    device = next(model.parameters()).device if device is None else best_device(device)
    logits = predict(model, features, PaddingCollator(tokenizer.pad_id), device)
    labels = model.config.label_values or [model.config.id2label[i]
                                           for i in range(model.config.num_labels)]
    return [labels[int(row.argmax())] for row in logits]
