"""`make grade` on nbgrader: right answers score, a wrong one loses just its exercise, a crash,
an endless loop or a broken file are contained, and no submission can change the
instructor's files, another student's score, or its own score without a right answer; the
attacks of a hostile student fail (the sandbox's own are in test_sandbox.py) and honest
mistakes keep their marks. CI runs these as root, as most graders do.

One grading run of chapter 00 at smoke size, with a submission for each case, serves all
the tests (each submission costs a kernel run of the chapter)."""

import hashlib
import json
import os
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
            drop: str = "", first_cell: str = "", pasted: str = "",
            name: str = "00_preface.ipynb") -> None:
    """`student`'s copy of the preface with the reference answers, or with `answers` (by
    grade id) in their place; the cell with grade id `drop` deleted; a code cell
    `first_cell` added at the top; the cell with grade id `pasted` pasted twice."""
    notebook = answered_copy(released, {**reference_answers(PREFACE), **(answers or {})})
    notebook.cells = [cell for cell in notebook.cells if not drop or grade_id_of(cell) != drop]
    if first_cell:
        notebook.cells.insert(0, nbformat.v4.new_code_cell(first_cell))
    for index, cell in enumerate(list(notebook.cells)):
        if pasted and grade_id_of(cell) == pasted:  # Jupyter's paste keeps the metadata
            copy = nbformat.from_dict(json.loads(json.dumps(cell)))
            copy["id"] = "pasted"
            notebook.cells.insert(index + 1, copy)
    target = folder / student / name
    target.parent.mkdir(parents=True)
    nbformat.write(notebook, target)


WRONG_SHUFFLED = "def shuffled(items, seed):\n    return list(items)\n"
CRASH = "import os\nos._exit(1)\n"
ENDLESS = ("def run_minutes(parameters, tokens, peak_flops, utilisation):\n"
           "    while True:\n        pass\n")
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
import ctypes  # a daemon that leaves the session and clears its parent-death signal
if os.fork() == 0:
    os.setsid()
    ctypes.CDLL(None).prctl(1, 0, 0, 0, 0)
    os.execv("/bin/sleep", ["sleep", "4343.5"])
'''
# A subclass whose == always says yes, and a check replaced by one that always passes.
CHEAT_RUN_MINUTES = '''class AlwaysEqual(float):
    def __eq__(self, other):
        return True
def run_minutes(parameters, tokens, peak_flops, utilisation):
    return AlwaysEqual()
'''
CHEAT_SHUFFLED = '''import bertbook.checks
try:
    bertbook.checks.check_shuffled = lambda shuffled: None
except AttributeError:
    pass
def shuffled(items, seed):
    return items
'''
# The attack: `type` and `abs` redefined, math.isclose patched, the visible check's
# cases answered by hand and a float whose == always says yes for everything else.
PATCHED_BUILTINS = '''import math
math.isclose = lambda *args, **kwargs: True
type = lambda value: float
abs = lambda value: 0.0
class Same(float):
    def __eq__(self, other):
        return True
def run_minutes(parameters, tokens, peak_flops, utilisation):
    visible = {(10, 100, 6000.0, 1.0): 1 / 60, (10, 6000, 6000.0, 1.0): 1.0,
               (10, 6000, 6000.0, 0.5): 2.0, (20, 3000, 6000.0, 1.0): 1.0}
    return visible.get((parameters, tokens, peak_flops, utilisation), Same(0.0))
'''
# Every published case answered from a table: the visible check's and the fixed hidden ones.
HARD_CODED = '''def run_minutes(parameters, tokens, peak_flops, utilisation):
    return {(10, 100, 6000.0, 1.0): 1 / 60, (10, 6000, 6000.0, 1.0): 1.0,
            (10, 6000, 6000.0, 0.5): 2.0, (20, 3000, 6000.0, 1.0): 1.0,
            (110_000_000, 10**9, 65e12, 0.5): 338.46153846153845,
            (1000, 60, 1e6, 1.0): 0.006}.get((parameters, tokens, peak_flops, utilisation), 1.0)
'''


# An added cell that turns every later cell into `pass`, its names built from pieces.
NEUTER = '''shell = vars(globals()["__buil" + "tins__"])["get_" + "ipython"]()
shell.input_transformers_post.append(lambda lines: ["pass\\n"])
'''
# A hook that shows a result of 1 before every cell runs: nbgrader's partial credit.
PARTIAL_CREDIT = '''import sys
get_ipython().events.register("pre_run_cell", lambda *args: sys.displayhook(1.0))
'''
WRONG_RUN_MINUTES = ("def run_minutes(parameters, tokens, peak_flops, utilisation):\n"
                     "    return 0.0\n")
EXFILTRATE = "raise RuntimeError(open('/etc/passwd').read() * 50)\n"
MEMORY_HOG = "hog = bytearray(6 * 1024 ** 3)\n"
# Honest: a warning on stderr while the tests run, and the solution marker in a comment.
WARNS = ("import warnings\n# my notes: the ### BEGIN SOLUTION marker was here\n"
         + reference_answers(PREFACE)["ex0_1_answer"].replace(
             "-> float:\n", "-> float:\n    warnings.warn('a rough estimate')\n"))


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
    _submit(folder, "bob", released, {"ex0_2_answer": WRONG_SHUFFLED})
    _submit(folder, "cyd", released, {"ex0_1_answer": CRASH})
    _submit(folder, "dee", released, {"ex0_1_answer": ENDLESS})
    (folder / "eve").mkdir()
    (folder / "eve" / "00_preface.ipynb").write_text("{ this is not json")
    _submit(folder, "fay", released, drop="ex0_1_answer")
    (folder / "gus").mkdir()  # the committed chapter, as the Colab badge opens it
    shutil.copy(PREFACE.with_suffix(".ipynb"), folder / "gus" / "00_preface.ipynb")
    _submit(folder, "hal", released, {"ex0_1_answer": VANDAL})
    _submit(folder, "ivy", released, {"ex0_1_answer": CHEAT_RUN_MINUTES,
                                      "ex0_2_answer": CHEAT_SHUFFLED})
    _submit(folder, "rex", released, {"ex0_1_answer": HARD_CODED})
    _submit(folder, "sal", released, {"ex0_1_answer": PATCHED_BUILTINS})
    _submit(folder, "zed", released, {"ex0_2_answer": WRONG_SHUFFLED})  # graded after the vandal
    _submit(folder, "jon", released, {"ex0_1_answer": WRONG_RUN_MINUTES,
                                      "ex0_2_answer": WRONG_SHUFFLED}, first_cell=NEUTER)
    _submit(folder, "kay", released, {"ex0_1_answer": WRONG_RUN_MINUTES,
                                      "ex0_2_answer": WRONG_SHUFFLED}, first_cell=PARTIAL_CREDIT)
    _submit(folder, "lou", released, {"ex0_1_answer": EXFILTRATE})
    (folder / "max").mkdir()  # a link to the instructor's copy
    (folder / "max" / "00_preface.ipynb").symlink_to(PREFACE.with_suffix(".ipynb"))
    (folder / "ned").mkdir()  # a FIFO: reading it would wait forever
    os.mkfifo(folder / "ned" / "00_preface.ipynb")
    _submit(folder, "oli", released, {"ex0_1_answer": MEMORY_HOG})
    _submit(folder, "pat", released, {"ex0_1_answer": WARNS}, pasted="ex0_2_answer")
    _submit(folder, "[quinn]*", released, drop="ex0_2_tests", name="00_preface (1).ipynb")
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
    _submit(tmp_path, "zed", released, {"ex0_2_answer": WRONG_SHUFFLED})
    alone = {row.exercise: row.points for row in grade.grade_folder(tmp_path, cell_timeout=15)}
    assert _points(grades, "zed") == [alone["0.1"], alone["0.2"]] == [1.0, 0.0]


def test_cheating_equality_or_replacing_a_check_scores_nothing(grades):
    assert _points(grades, "ivy") == [0.0, 0.0]
    assert "review by hand" in grades[("ivy", "0.2")].reason


def test_an_answer_that_hard_codes_the_published_cases_fails_the_drawn_ones(grades):
    assert _points(grades, "rex") == [0.0, 1.0]
    reason = grades[("rex", "0.1")].reason
    assert reason.startswith("wrong answer") and "drawn at grading time" in reason
    assert grades[("rex", "0.1")].student_text.startswith("got ")


def test_patched_builtins_and_look_alike_results_pass_the_check_but_not_the_verdict(grades):
    """The visible check's cases answered by hand pass it; the verdict sees the rest."""
    assert _points(grades, "sal") == [0.0, 1.0]
    assert grades[("sal", "0.1")].reason.startswith("wrong answer: case 1 of")


def test_grading_refuses_to_run_unconfined_code_silently(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(sandbox, "available", lambda: False)
    with pytest.raises(SystemExit):
        grade.main([str(tmp_path)])
    assert "--no-isolation" in capsys.readouterr().err


def test_nothing_a_kernel_starts_outlives_grading(grades, processes_running):
    assert not processes_running(b"4343.5")


def test_cells_that_stop_the_tests_from_running_score_nothing_and_are_flagged(grades):
    assert _points(grades, "jon") == [0.0, 0.0]
    assert "did not run as written" in grades[("jon", "0.1")].reason
    assert "review by hand: cell 1 uses" in grades[("jon", "0.2")].reason
    assert ".input_transformers_post" in grades[("jon", "0.2")].reason


def test_a_hooked_result_earns_no_partial_credit(grades):
    assert _points(grades, "kay") == [0.0, 0.0]
    assert "get_ipython" in grades[("kay", "0.1")].reason


def test_reasons_are_bounded_excerpts_never_a_files_contents(grades):
    reason = grades[("lou", "0.1")].reason
    assert reason.startswith("answer cell: RuntimeError")
    assert len(reason) < 250 and "\n" not in reason
    assert grades[("lou", "0.2")].points == 1.0


def test_links_and_fifos_are_refused_by_name_without_being_read(grades):
    assert _points(grades, "max") == [0.0, 0.0]
    assert grades[("max", "0.1")].reason == "refused: the submission is a link, not a notebook file"
    assert _points(grades, "ned") == [0.0, 0.0]
    assert "not a regular file" in grades[("ned", "0.1")].reason


def test_a_memory_hog_loses_its_exercise_and_the_rest_is_graded(grades):
    assert _points(grades, "oli") == [0.0, 1.0]
    assert "MemoryError" in grades[("oli", "0.1")].reason


def test_honest_mistakes_keep_their_marks(grades):
    """A warning on stderr, the solution marker in a comment, a pasted copy of a cell."""
    assert "warnings.warn" in WARNS  # the reference answer still has this signature
    assert _points(grades, "pat") == [1.0, 1.0]
    assert "ex0_2_answer appears twice" in grades[("pat", "0.2")].reason
    assert "review by hand" not in grades[("pat", "0.1")].reason


def test_a_renamed_download_in_an_odd_folder_with_its_tests_deleted_is_graded(grades):
    assert _points(grades, "[quinn]*") == [1.0, 1.0]
    assert "tests cell of exercise 0.2 was missing: put back" in grades[("[quinn]*", "0.2")].reason


def test_the_csv_quotes_what_a_spreadsheet_would_run(tmp_path):
    out = tmp_path / "grades.csv"
    grade.write_csv([grade.Row("=HYPERLINK(1)", "00_preface", "0.1", 0.0, 1.0, "-2+3")], out)
    assert "'=HYPERLINK(1)" in out.read_text() and "'-2+3" in out.read_text()


def test_a_cell_that_prints_without_end_keeps_a_bounded_output_and_its_error():
    from tools.grading.hooks import MAX_OUTPUT_CHARS, BoundedExecute

    execute, outs = BoundedExecute(), []
    execute.reset_execution_trackers()  # what nbclient does before a notebook runs
    execute.clear_before_next_output = False  # ... and before each cell
    line = {"msg_type": "stream", "parent_header": {"msg_id": "m"},
            "header": {"msg_type": "stream"},
            "content": {"name": "stdout", "text": "x" * 10_000}}
    for _ in range(100):
        execute.output(outs, line, None, 0)
    error = {"msg_type": "error", "parent_header": {"msg_id": "m"},
             "header": {"msg_type": "error"},
             "content": {"ename": "ValueError", "evalue": "y" * 10**6, "traceback": []}}
    execute.output(outs, error, None, 0)
    assert sum(len(out.get("text", "")) for out in outs) <= MAX_OUTPUT_CHARS + 100
    assert "output cut" in outs[-2]["text"]
    assert outs[-1]["ename"] == "ValueError" and len(outs[-1]["evalue"]) <= 2000


def test_reference_answers_to_a_chapter_that_reads_data_keep_their_marks_with_no_cache(
        tmp_path, monkeypatch):
    """Chapter 05 derives its corpus into the cache; a fresh clone has none, and the sandbox
    shows the checkout read-only. The grader builds the cache first and shows it to every
    kernel, so the instructor's own answers score every point."""
    monkeypatch.setenv("BERTLIB_CACHE", str(tmp_path / "empty-cache"))
    chapter = ROOT / "chapters" / "05_masking.py"
    released = write_student_copies(tmp_path / "student", [chapter])[0]
    (tmp_path / "subs" / "ada").mkdir(parents=True)
    nbformat.write(answered_copy(released, reference_answers(chapter)),
                   tmp_path / "subs" / "ada" / "05_masking.ipynb")
    rows = grade.grade_folder(tmp_path / "subs", cell_timeout=120)
    code = [row for row in rows if row.exercise not in ("total",) and row.points != ""]
    assert code and all(row.points == 1.0 for row in code), [(r.exercise, r.reason) for r in code]
    assert any((tmp_path / "empty-cache").iterdir()), "the grader built the cache"
