"""Baselines that read the text without a Transformer, for chapter 07's tasks.

A fine-tuned model is only as impressive as the simplest thing it beats. For a label, the
simple thing is the most frequent one. For tagging the words that Wikipedia's editors
linked, it is a dictionary: each word gets the tag it had most often in training. For
finding the mention of an article whose title is the question, it is string matching: the
title often appears in the paragraph verbatim. All read the same features the models read
(chapter 07's `classification_features`, `tagging_features` and `span_qa_features`) and
are scored the way `bertlib.finetuning.run` scores a model.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable

from bertlib.batch import IGNORE_INDEX
from bertlib.finetuning.run import mention_f1

__all__ = ["dictionary_tagger", "majority_rate", "string_match_rate", "string_match_span",
           "tagging_baseline", "word_keys"]


def majority_rate(test: list[dict]) -> float:
    """Accuracy of always answering the most frequent label of `test`: the share a
    classifier must beat to have learned anything from the text."""
    return Counter(feature["labels"] for feature in test).most_common(1)[0][1] / len(test)


def word_keys(feature: dict) -> list[tuple[int, ...]]:
    """A tagging feature's words, each as the tuple of its pieces (a labelled piece starts
    a word; pieces labelled -100 continue it; [CLS] and [SEP] are left out)."""
    words: list[tuple[int, ...]] = []
    for piece, label in zip(feature["input_ids"][1:-1], feature["labels"][1:-1]):
        if label != IGNORE_INDEX:
            words.append((piece,))
        elif words:
            words[-1] += (piece,)
    return words


def dictionary_tagger(train: list[dict]) -> Callable[[dict], list[int]]:
    """A tagger that gives each word its most frequent training tag, and O (0) to a word
    it never saw."""
    counts: dict[tuple[int, ...], Counter] = defaultdict(Counter)
    for feature in train:
        tags = [tag for tag in feature["labels"] if tag != IGNORE_INDEX]
        for word, tag in zip(word_keys(feature), tags):
            counts[word][tag] += 1
    return lambda feature: [counts[word].most_common(1)[0][0] if word in counts else 0
                            for word in word_keys(feature)]


def tagging_baseline(train: list[dict], test: list[dict]) -> float:
    """Mention F1 of the dictionary tagger on `test`, counted as evaluate_tagging counts a
    model's."""
    tagger = dictionary_tagger(train)
    return mention_f1([tagger(feature) for feature in test],
                      [[tag for tag in feature["labels"] if tag != IGNORE_INDEX]
                       for feature in test])


def string_match_span(feature: dict) -> tuple[int, int]:
    """The longest run of the question's pieces that occurs in the paragraph, as (start,
    end) positions in the feature; the paragraph's first piece when none matches."""
    ids, offset = feature["input_ids"], feature["token_type_ids"].index(1)
    question, paragraph = ids[1:offset - 1], ids[offset:-1]
    longest, start = 0, 0
    for i in range(len(paragraph)):
        for j in range(len(question)):
            n = 0
            while (i + n < len(paragraph) and j + n < len(question)
                   and paragraph[i + n] == question[j + n]):
                n += 1
            if n > longest:
                longest, start = n, i
    return offset + start, offset + start + max(longest, 1) - 1


def string_match_rate(test: list[dict]) -> float:
    """Exact match of string_match_span: the share of questions whose longest match is one
    of the gold answers, counted as evaluate_span_qa counts a model's."""
    return sum(string_match_span(feature) in feature["answers"] for feature in test) / len(test)
