"""`make grade` on nbgrader: right answers score, a wrong one loses just its exercise, a crash,
an endless loop or a broken file are contained, and no submission can change the
instructor's files, another student's score, or its own score without a right answer.

One grading run of chapter 00 at smoke size, with a submission for each case, serves all
the tests (each submission costs a kernel run of the chapter)."""

import hashlib
import shutil

import nbformat
import pytest

from tools.chapters import ROOT
from tools.grading import grade, sandbox
from tools.grading.exercises import grade_id_of
from tools.grading.grade_selftest import answered_copy, reference_answers
from tools.grading.student import write_student_copies

PREFACE = ROOT / "chapters" / "00_preface.py"
CANARY = ROOT / "grading-canary.txt"  # a file in the repository root a student tries to delete
LEAK = ROOT / "_build" / "leaked-hidden-tests.txt"

pytestmark = [pytest.mark.slow,  # nbgrader in a sandbox, a kernel per submission
              pytest.mark.skipif(not sandbox.available(),
                                 reason="this machine allows no user namespaces")]


def _submit(folder, student: str, released, answers: dict[str, str] | None = None,
            drop: str = "") -> None:
    """`student`'s copy of the preface with the reference answers, or with `answers` (by
    grade id) in their place; the cell with grade id `drop` deleted."""
    notebook = answered_copy(released, {**reference_answers(PREFACE), **(answers or {})})
    notebook.cells = [cell for cell in notebook.cells if not drop or grade_id_of(cell) != drop]
    target = folder / student / "00_preface.ipynb"
    target.parent.mkdir(parents=True)
    nbformat.write(notebook, target)


WRONG_SIZE_FOR = "def size_for(has_cuda, requested):\n    return 'cpu'\n"
CRASH = "import os\nos._exit(1)\n"
ENDLESS = "def top_words(documents, n):\n    while True:\n        pass\n"
# Every attack the issue reports, each tried and its failure swallowed, so that all run.
VANDAL = f'''import os, pathlib
root = pathlib.Path({str(ROOT)!r})
attempts = [
    lambda: pathlib.Path({str(LEAK)!r}).write_text((root / "chapters/00_preface.py").read_text()),
    lambda: (root / "chapters/00_preface.py").write_text("assert True"),
    lambda: os.remove({str(CANARY)!r}),
    lambda: (root / "chapters/tqdm.py").write_text("raise SystemExit"),
    lambda: pathlib.Path("tqdm.py").write_text("raise SystemExit"),
    lambda: (pathlib.Path.home() / ".ipython/profile_default/startup").mkdir(parents=True),
]
for attempt in attempts:
    try:
        attempt()
    except OSError:
        pass
'''
# A subclass whose == always says yes, and a check replaced by one that always passes.
CHEAT_TOP_WORDS = '''class AlwaysEqual(list):
    def __eq__(self, other):
        return True
def top_words(documents, n):
    return AlwaysEqual()
'''
CHEAT_SIZE_FOR = '''import bertbook.checks
try:
    bertbook.checks.check_size_rule = lambda size_for: None
except AttributeError:
    pass
def size_for(has_cuda, requested):
    return "cpu"
'''


@pytest.fixture(scope="module")
def released(tmp_path_factory):
    return write_student_copies(tmp_path_factory.mktemp("student"), [PREFACE])[0]


@pytest.fixture(scope="module")
def protected():
    """Fingerprints of the files the vandal goes after, taken before grading."""
    CANARY.write_text("delete me if you can")
    before = hashlib.sha256(PREFACE.read_bytes()).hexdigest()
    yield before
    CANARY.unlink(missing_ok=True)
    LEAK.unlink(missing_ok=True)
    (ROOT / "chapters" / "tqdm.py").unlink(missing_ok=True)


@pytest.fixture(scope="module")
def grades(tmp_path_factory, released, protected):
    folder = tmp_path_factory.mktemp("submissions")
    _submit(folder, "ada", released)
    _submit(folder, "bob", released, {"ex0_2_answer": WRONG_SIZE_FOR})
    _submit(folder, "cyd", released, {"ex0_1_answer": CRASH})
    _submit(folder, "dee", released, {"ex0_1_answer": ENDLESS})
    (folder / "eve").mkdir()
    (folder / "eve" / "00_preface.ipynb").write_text("{ this is not json")
    _submit(folder, "fay", released, drop="ex0_1_answer")
    (folder / "gus").mkdir()  # the committed chapter, as the Colab badge opens it
    shutil.copy(PREFACE.with_suffix(".ipynb"), folder / "gus" / "00_preface.ipynb")
    _submit(folder, "hal", released, {"ex0_1_answer": VANDAL})
    _submit(folder, "ivy", released, {"ex0_1_answer": CHEAT_TOP_WORDS,
                                      "ex0_2_answer": CHEAT_SIZE_FOR})
    _submit(folder, "zed", released, {"ex0_2_answer": WRONG_SIZE_FOR})  # graded after the vandal
    rows = grade.grade_folder(folder, cell_timeout=15)
    return {(row.student, row.exercise): row for row in rows}


def _points(grades, student):
    return [grades[(student, e)].points for e in ("0.1", "0.2")]


def test_right_answers_score_full_marks(grades):
    assert _points(grades, "ada") == [1.0, 1.0]
    assert grades[("ada", "0.1")].reason == "ok"


def test_a_wrong_answer_loses_exactly_that_exercise(grades):
    assert _points(grades, "bob") == [1.0, 0.0]
    assert "CheckFailed" in grades[("bob", "0.2")].reason


def test_a_crash_scores_zero_for_what_crashed_and_the_rest_is_graded(grades):
    assert _points(grades, "cyd") == [0.0, 1.0]
    assert "kernel died" in grades[("cyd", "0.1")].reason


def test_an_endless_loop_is_interrupted(grades):
    assert _points(grades, "dee") == [0.0, 1.0]
    assert "Timeout" in grades[("dee", "0.1")].reason


def test_a_file_that_is_not_a_notebook_scores_zero(grades):
    assert _points(grades, "eve") == [0.0, 0.0]
    assert "not a valid notebook" in grades[("eve", "0.1")].reason


def test_a_deleted_answer_cell_is_named(grades):
    assert grades[("fay", "0.1")].points == 0.0
    assert grades[("fay", "0.1")].reason == grade.NOT_FOUND
    assert grades[("fay", "0.2")].points == 1.0


def test_the_instructor_copy_is_recognised(grades):
    assert _points(grades, "gus") == [0.0, 0.0]
    assert "instructor's copy" in grades[("gus", "0.1")].reason


def test_written_exercises_are_left_for_a_human(grades):
    assert grades[("ada", "0.3")].reason.startswith("written")


def test_grading_cannot_read_leak_edit_or_delete_the_instructors_files(grades, protected):
    assert not LEAK.exists(), "the hidden tests were copied out"
    assert hashlib.sha256(PREFACE.read_bytes()).hexdigest() == protected
    assert CANARY.exists(), "a file in the repository root was deleted"
    assert not (ROOT / "chapters" / "tqdm.py").exists()


def test_one_submission_cannot_change_anothers_score(grades, released, tmp_path):
    """zed, graded after the vandal, scores as zed graded alone."""
    _submit(tmp_path, "zed", released, {"ex0_2_answer": WRONG_SIZE_FOR})
    alone = {row.exercise: row.points for row in grade.grade_folder(tmp_path, cell_timeout=15)}
    assert _points(grades, "zed") == [alone["0.1"], alone["0.2"]] == [1.0, 0.0]


def test_cheating_equality_or_replacing_a_check_scores_nothing(grades):
    assert _points(grades, "ivy") == [0.0, 0.0]
    assert "review by hand" in grades[("ivy", "0.2")].reason


def test_grading_refuses_to_run_unconfined_code_silently(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(sandbox, "available", lambda: False)
    with pytest.raises(SystemExit):
        grade.main([str(tmp_path)])
    assert "--no-isolation" in capsys.readouterr().err
