"""`make grade`: right answers score, a wrong one loses just its exercise, and a crash,
an endless loop or a broken file are contained without stopping the batch."""

import csv

import nbformat
import pytest

from tools import grade, student
from tools.chapters import ROOT, read_chapter
from tools.exercises import exercise_cells

PREFACE = ROOT / "chapters" / "00_preface.py"


def _answers_from_instructor() -> dict[str, str]:
    notebook = read_chapter(PREFACE)
    return {item.exercise: notebook.cells[item.index].source
            for item in exercise_cells(notebook) if item.role == "answer"}


def _submission(folder, name: str, replace: dict[str, str] | None = None, raw: str = ""):
    """A student folder with the preface's student copy, answered (or a broken file)."""
    target = folder / name / "00_preface.ipynb"
    target.parent.mkdir(parents=True)
    if raw:
        target.write_text(raw)
        return
    notebook = student.student_notebook(PREFACE)
    answers = {**_answers_from_instructor(), **(replace or {})}
    for cell in notebook.cells:
        tag = cell.metadata.get("bertbook", {})
        if tag.get("role") == "answer":
            cell.source = answers[tag["exercise"]]
    nbformat.write(notebook, target)


WRONG_TOP_WORDS = '''from collections import Counter
def top_words(documents, n):
    return Counter(w for d in documents for w in d.split()).most_common(n)
'''
NO_EMPTY_INPUT = """import re
from collections import Counter
def top_words(documents, n):
    if not documents:
        raise ValueError("no documents")
    return Counter(re.findall(r"[a-z0-9']+", " ".join(documents).lower())).most_common(n)
"""
CRASHING_SIZE_FOR = "import os\ndef size_for(has_cuda, requested):\n    os._exit(1)\n"
ENDLESS_TOP_WORDS = "def top_words(documents, n):\n    while True:\n        pass\n"


@pytest.fixture(scope="module")
def grades(tmp_path_factory):
    folder = tmp_path_factory.mktemp("submissions")
    _submission(folder, "ada")
    _submission(folder, "bob", {"0.1": WRONG_TOP_WORDS})
    _submission(folder, "cyd", {"0.2": CRASHING_SIZE_FOR})
    _submission(folder, "dee", {"0.1": ENDLESS_TOP_WORDS})
    _submission(folder, "eve", raw="{ this is not json")
    _submission(folder, "fay", {"0.1": NO_EMPTY_INPUT})
    out = tmp_path_factory.mktemp("out") / "grades.csv"
    assert grade.main([str(folder), "--out", str(out), "--cell-timeout", "10"]) == 0
    with open(out) as handle:
        rows = list(csv.DictReader(handle))
    (ROOT / "_build").mkdir(exist_ok=True)
    (ROOT / "_build" / "grades-fixture.csv").write_text(out.read_text())
    return {(r["student"], r["exercise"]): r for r in rows}


def _points(grades, who):
    return {ex: grades[(who, ex)]["points"] for ex in ("0.1", "0.2")}


def test_correct_answers_score_full_marks(grades):
    assert _points(grades, "ada") == {"0.1": "1", "0.2": "1"}
    assert grades[("ada", "0.3")]["reason"] == "written: graded by hand"


def test_a_wrong_answer_loses_exactly_that_exercise(grades):
    assert _points(grades, "bob") == {"0.1": "0", "0.2": "1"}
    assert "CheckFailed" in grades[("bob", "0.1")]["reason"]


def test_a_crash_is_contained(grades):
    assert _points(grades, "cyd") == {"0.1": "1", "0.2": "0"}
    assert "kernel died" in grades[("cyd", "0.2")]["reason"]


def test_an_endless_loop_is_contained(grades):
    assert _points(grades, "dee") == {"0.1": "0", "0.2": "1"}
    assert "Timeout" in grades[("dee", "0.1")]["reason"]


def test_a_broken_file_scores_zero_with_the_reason(grades):
    assert _points(grades, "eve") == {"0.1": "0", "0.2": "0"}
    assert "not a valid notebook" in grades[("eve", "0.1")]["reason"]


def test_hidden_checks_run_when_graded(grades):
    """An answer that passes the visible check but not the hidden one scores zero."""
    assert _points(grades, "fay") == {"0.1": "0", "0.2": "1"}
    assert grades[("fay", "0.1")]["reason"].startswith("hidden cell:")
