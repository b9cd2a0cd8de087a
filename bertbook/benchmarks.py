"""The paper's benchmarks, read from the Hugging Face hub (online only, e.g. on Colab).

GLUE's sentence and pair tasks as `TextExample`s, CoNLL-2003's named entities as
`TaggedWords` and SQuAD v1.1 as `SpanQuestion`s: the shapes of chapter 07's own tasks, so
the same features, heads and recipe run on them. Each reader turns the hub's rows into
those shapes in a small function of its own, which the tests check on rows written by hand.
"""

from __future__ import annotations

from bertbook.datasets import CONLL_TAGS
from bertlib.errors import DataUnavailable
from bertlib.finetuning.examples import SpanQuestion, TaggedWords, TextExample
from bertlib.finetuning.models import (
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertForTokenClassification,
    classification_features,
    span_qa_features,
    tagging_features,
)
from bertlib.finetuning.run import evaluate_classification, evaluate_span_qa, evaluate_tagging

__all__ = ["CONLL2003_HUB", "GLUE_HUB", "SQUAD_HUB", "PAPER_RESULTS", "conll2003", "conll_words",
           "glue_examples", "glue_task", "hub_dataset", "paper_benchmark_tasks", "squad",
           "squad_questions"]

GLUE_TEXT_FIELDS = {"sst2": ("sentence", None), "mrpc": ("sentence1", "sentence2"),
                    "qnli": ("question", "sentence"), "rte": ("sentence1", "sentence2")}
# Each dataset read at a fixed revision, so that a reader's numbers do not move under the
# book; `make gpu-check` asks the hub whether each is still there. GLUE has no revision
# recorded yet: gpu-check prints the one it finds, to pin here.
CONLL2003_HUB = ("eriktks/conll2003", "refs/convert/parquet")  # the script's parquet export
SQUAD_HUB = ("rajpurkar/squad", "7b6d24c440a36b6815f21b70d25016731768db1f")
GLUE_HUB = ("nyu-mll/glue", None)

PAPER_RESULTS = [  # (benchmark, metric, BERT-base, BERT-large, where in Devlin et al., 2018)
    ("GLUE average, 8 tasks", "score", 79.6, 82.1, "Table 1 (test, WNLI left out)"),
    ("MNLI-m", "accuracy", 84.6, 86.7, "Table 1 (test)"),
    ("SST-2", "accuracy", 93.5, 94.9, "Table 1 (test)"),
    ("MRPC", "F1", 88.9, 89.3, "Table 1 (test)"),
    ("SQuAD v1.1", "F1", 88.5, 90.9, "Table 2 (dev, one model)"),
    ("SQuAD v1.1", "F1", None, 93.2, "Table 2 (test, ensemble + TriviaQA)"),
    ("SQuAD v2.0", "F1", None, 83.1, "Table 3 (test, one model)"),
    ("CoNLL-2003 NER", "F1", 92.4, 92.8, "Table 7 (test)"),
]


def hub_dataset(name: str, config: str | None = None, revision: str | None = None):
    """A dataset from the Hugging Face hub (online only, e.g. on Colab)."""
    try:
        from datasets import load_dataset
    except ImportError as error:
        raise DataUnavailable("the paper's benchmarks are read with the `datasets` library. "
                              "Install it with:  pip install datasets   (and be online)"
                              ) from error
    try:
        return load_dataset(name, config, revision=revision)
    except Exception as error:  # offline, renamed, or moved: say which dataset and why
        raise DataUnavailable(f"could not load {name!r} from the Hugging Face hub ({error}). "
                              "This needs internet; offline, use the book's own tasks."
                              ) from error


def glue_examples(rows, task: str) -> list[TextExample]:
    """GLUE rows (dicts with the task's text fields and 'label') as TextExamples."""
    text, pair = GLUE_TEXT_FIELDS[task]
    return [TextExample(row[text], int(row["label"]), row[pair] if pair else None)
            for row in rows]


def glue_task(task: str) -> dict[str, list[TextExample]]:
    """A GLUE task: its train split, and its validation split as 'test'."""
    if task not in GLUE_TEXT_FIELDS:
        raise ValueError(f"unknown GLUE task {task!r}; choose one of {sorted(GLUE_TEXT_FIELDS)}")
    name, revision = GLUE_HUB
    data = hub_dataset(name, task, revision=revision)
    return {"train": glue_examples(data["train"], task),
            "test": glue_examples(data["validation"], task)}


def conll_words(rows) -> list[TaggedWords]:
    """CoNLL-2003 rows ('tokens', and 'ner_tags' numbered as CONLL_TAGS) as TaggedWords.
    The tokens become the words: they hold no spaces. The -DOCSTART- rows that mark where
    a document begins are not sentences, and are left out."""
    return [TaggedWords(tuple(row["tokens"]), tuple(int(t) for t in row["ner_tags"]))
            for row in rows if row["tokens"] and row["tokens"][0] != "-DOCSTART-"]


def conll2003() -> dict[str, list[TaggedWords]]:
    """CoNLL-2003's English named entities (Tjong Kim Sang & De Meulder, 2003)."""
    name, revision = CONLL2003_HUB
    data = hub_dataset(name, revision=revision)
    return {split: conll_words(data[hub_split])
            for split, hub_split in [("train", "train"), ("dev", "validation"), ("test", "test")]}


def squad_questions(rows) -> list[SpanQuestion]:
    """SQuAD rows (question, context, answers with 'text' and 'answer_start') as
    SpanQuestions; a validation question has up to three answers from different people."""
    return [SpanQuestion(row["question"], row["context"],
                         tuple((start, start + len(text)) for start, text in
                               zip(row["answers"]["answer_start"], row["answers"]["text"])))
            for row in rows]


def squad() -> dict[str, list[SpanQuestion]]:
    """SQuAD v1.1 (Rajpurkar et al., 2016): train, and its dev set as 'test'."""
    name, revision = SQUAD_HUB
    data = hub_dataset(name, revision=revision)
    return {"train": squad_questions(data["train"]), "test": squad_questions(data["validation"])}


def paper_benchmark_tasks(max_length: int) -> dict[str, tuple]:
    """SST-2, MRPC, CoNLL-2003 and SQuAD v1.1 as chapter 07's tasks: (splits, features, head,
    head options, evaluation, length in pieces). A SQuAD paragraph gets three times the
    length of a sentence, as it is the longest input. Online only: each reads the hub."""
    sentence = (classification_features, BertForSequenceClassification, {},
                evaluate_classification, max_length)
    return {
        "SST-2": (glue_task("sst2"), *sentence),
        "MRPC": (glue_task("mrpc"), *sentence),
        "CoNLL-2003": (conll2003(), tagging_features, BertForTokenClassification,
                       {"num_labels": len(CONLL_TAGS)}, evaluate_tagging, max_length),
        "SQuAD v1.1": (squad(), span_qa_features, BertForQuestionAnswering, {},
                       evaluate_span_qa, 3 * max_length),
    }
