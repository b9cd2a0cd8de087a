"""Labelled examples in the shapes fine-tuning reads, whatever their source: a text (or a
pair of texts) with a label, words with a tag each, and questions with answer spans."""

from dataclasses import dataclass

__all__ = ["TextExample", "TaggedWords", "SpanQuestion", "tag_names", "words_in"]


@dataclass(frozen=True)
class TextExample:
    """A text and its label (None: not known, to predict); `pair` is the second segment
    of a sentence-pair task."""

    text: str
    label: int | None
    pair: str | None = None


@dataclass(frozen=True)
class TaggedWords:
    """Words and one tag per word, an index into the task's tag names (see tag_names)."""

    words: tuple[str, ...]
    tags: tuple[int, ...]


@dataclass(frozen=True)
class SpanQuestion:
    """A question, the paragraph that answers it, and each answer as a (start, end)
    character span of the paragraph (SQuAD keeps several answers for one question)."""

    question: str
    context: str
    answers: tuple[tuple[int, int], ...]


def tag_names(kinds: list[str]) -> tuple[str, ...]:
    """O, then B-kind and I-kind for each kind of mention: B tags odd, I tags even."""
    return ("O", *[f"{prefix}-{kind}" for kind in kinds for prefix in "BI"])


def words_in(spans: list[tuple[int, int]], start: int, end: int) -> list[int]:
    """The indices of the words that overlap the characters start..end."""
    return [i for i, (s, e) in enumerate(spans) if s < end and e > start]
