"""Scoring a fine-tuned model on a task's features: accuracy (and F1 for two classes, as
GLUE scores MRPC), mention F1 and word accuracy for tags (as CoNLL's scorer counts
mentions), SQuAD's exact match and overlap F1 for answer spans.

Chapter 07 defines the metrics and the span decoder (`bertlib.metrics`); running a model
over features and counting is plumbing, so it is written here by hand.
"""

import torch

from bertlib.batch import IGNORE_INDEX
from bertlib.metrics import best_span, f1_score
from bertlib.tuning import predict

__all__ = ["mention_f1", "evaluate_classification", "evaluate_tagging", "evaluate_span_qa"]


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
