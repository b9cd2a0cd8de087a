"""The batch around the grading: every layout an instructor has is read or refused with a
message, one broken notebook is that student's row and the batch goes on, the grader's own
words stay apart from anything a submission writes, and a run that grades no one never
replaces the last grades.csv. Fast: no kernel runs here (test_grade.py runs them)."""

import json
import subprocess
import sys

import nbformat
import pytest

from tools.chapters import ROOT
from tools.grading import grade, intake


def _notebook(folder, name="00_preface.ipynb"):
    folder.mkdir(parents=True, exist_ok=True)
    nbformat.write(nbformat.v4.new_notebook(), folder / name)


def test_a_folder_per_student_and_nbgraders_submitted_layout_are_both_read(tmp_path):
    _notebook(tmp_path / "plain" / "ada")
    _notebook(tmp_path / "nbgrader" / "submitted" / "bob" / "ps1")
    _notebook(tmp_path / "nbgrader" / "submitted" / "cyd" / "ps1")
    assert [(s, f.name) for s, f in intake.submission_folders(tmp_path / "plain")] == [
        ("ada", "ada")]
    assert [(s, f.name) for s, f in intake.submission_folders(tmp_path / "nbgrader")] == [
        ("bob", "ps1"), ("cyd", "ps1")]
    found, _ = intake.chapter_files(tmp_path / "nbgrader" / "submitted" / "bob" / "ps1",
                                    {"00_preface"}, "bob")
    assert [item.student for item in found] == ["bob"]


def test_notebooks_loose_in_the_folder_are_refused_with_the_layout_expected(tmp_path):
    _notebook(tmp_path, "alice_00_preface.ipynb")
    with pytest.raises(intake.LayoutError):
        intake.submission_folders(tmp_path)
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "grading" / "grade.py"),
                           str(tmp_path), "--no-isolation", "--out", str(tmp_path / "g.csv")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "<student>/05_masking.ipynb" in done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "g.csv").exists()


def test_a_run_that_grades_no_one_leaves_the_last_csv_as_it_was(tmp_path):
    out = tmp_path / "grades.csv"
    out.write_text("the last batch's grades\n")
    (tmp_path / "empty").mkdir()
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "grading" / "grade.py"),
                           str(tmp_path / "empty"), "--no-isolation", "--out", str(out)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and "left as it was" in done.stderr
    assert out.read_text() == "the last batch's grades\n"


def test_grading_metadata_that_is_not_a_table_does_not_stop_the_notebook():
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")])
    notebook.cells[0].metadata["nbgrader"] = "x"
    parsed = intake.parse_notebook(json.dumps(notebook).encode())
    assert not isinstance(parsed, str) and "nbgrader" not in parsed.cells[0].metadata


def _bare_grader(code=("0.1", "0.2"), written=("0.3",)):
    grader = grade.Grader.__new__(grade.Grader)  # no nbgrader course: nothing runs here
    grader.chapter, grader.code, grader.written = ROOT / "chapters" / "00_preface.py", list(
        code), list(written)
    grader.settings = grade.Settings()
    return grader


def test_a_notebook_the_grader_chokes_on_is_that_students_row(monkeypatch, tmp_path):
    grader = _bare_grader()

    def choke(found):
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(grader, "_graded_rows", choke)
    rows = grader.rows(intake.Found("eve", "00_preface", tmp_path / "x.ipynb", ""))
    assert [(r.exercise, r.points, r.review) for r in rows] == [
        ("0.1", 0.0, "yes"), ("0.2", 0.0, "yes"), ("total", 0.0, "yes")]
    assert "RecursionError" in rows[0].reason


def test_each_student_has_a_total_beside_the_written_answers_still_to_grade():
    rows = [grade.Row("ada", "00_preface", "0.1", 1.0, 1.0, "ok"),
            grade.Row("ada", "00_preface", "0.2", 0.0, 1.0, "tests cell: CheckFailed"),
            grade.Row("ada", "00_preface", "0.3", "", 1.0, "written: graded by hand")]
    total = _bare_grader()._total("ada", rows)
    assert (total.points, total.max_points) == (1.0, 2.0)
    assert total.reason == "plus 1 written, graded by hand" and total.review == ""


@pytest.mark.parametrize("note, grader_words", [
    ("wall-clock limit: 1800 s", "the sandbox stopped it at its wall-clock limit: 1800 s"),
    ("the sandbox stopped it at its memory limit ... regrade by hand",
     "the kernel stopped and left a note the sandbox never writes: review by hand")])
def test_a_limit_note_counts_only_in_the_sandboxs_own_words(tmp_path, note, grader_words):
    runtime = tmp_path / "course" / "runtime"
    runtime.mkdir(parents=True)
    (runtime / grade.sandbox.LIMIT_FILE).write_text(note + "\n")
    stopped = _bare_grader()._what_stopped(tmp_path, "", None)
    assert stopped.why[0] == grader_words
    assert stopped.why[1] in ("", note)  # the note itself only ever in student_text


def test_the_memory_limit_is_read_from_the_control_group_not_from_a_note(tmp_path):
    class KilledOnce:
        def memory_kills(self) -> int:
            return 1

    (tmp_path / "course" / "runtime").mkdir(parents=True)
    stopped = _bare_grader()._what_stopped(tmp_path, "", KilledOnce())
    assert stopped.why[0].startswith("the sandbox stopped it at its memory limit")
    assert "all its processes together" in stopped.why[0]


def test_an_errors_message_is_kept_apart_from_the_graders_words():
    cell = nbformat.v4.new_code_cell("raise ValueError()")
    cell.outputs = [nbformat.v4.new_output("error", ename="ValueError",
                                           evalue="ok; full marks, regrade by hand",
                                           traceback=[])]
    words, text = grade._first_error(cell, 60)
    assert words == "ValueError" and "regrade" in text


def _run_tests_cell(cell_globals: dict, tests: str) -> None:
    from tools.grading.hooks import WITH_BUILTINS
    exec(WITH_BUILTINS.format(source=tests), cell_globals)


def test_tests_run_with_the_builtins_whatever_the_student_named_their_variables():
    student = {"all": ["an honest list"], "abs": lambda x: 0, "type": lambda x: int}
    _run_tests_cell(student, "assert all([True]) and abs(-2) == 2 and type('a') is str")
    assert student["all"] == ["an honest list"] and student["abs"](-5) == 0  # put back


def test_a_failing_test_still_fails_and_the_students_names_come_back():
    student = {"all": ["kept"]}
    with pytest.raises(AssertionError, match="wrong"):
        _run_tests_cell(student, "assert all([False]), 'wrong'")
    assert student["all"] == ["kept"]


def test_a_notebook_has_one_wall_clock_budget_across_its_reruns(monkeypatch):
    """A kernel that dies makes the grader stub that answer and run the notebook again; the
    reruns share the notebook's budget instead of each starting the clock afresh."""
    grader = _bare_grader()
    grader.settings = grade.Settings(notebook_timeout=100)
    clock, given = [0.0], []

    def run_once(submission, stubbed, seconds):
        given.append(seconds)
        clock[0] += 70  # each run takes 70 s and kills the kernel in the next exercise
        return grade.Stopped(f"0.{len(given)}", ("the kernel died", ""))

    monkeypatch.setattr(grade.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(grader, "_autograde_once", run_once)
    scores, reasons = grader._autograde(grade.Submission("ada", None))
    assert given == [100, 30] and scores == {}
    assert reasons["0.2"][0].startswith("wall-clock limit")


def test_a_run_that_prints_a_flood_leaves_the_grader_only_its_tail(tmp_path):
    """A kernel inherits the grading run's output: 50 MB printed must not be held whole."""
    from tools.grading.course import run_keeping_tail

    flood = "import sys\nfor _ in range(50): sys.stdout.write('x' * 1_000_000)\nprint('end')"
    done = run_keeping_tail([sys.executable, "-c", flood], cwd=tmp_path, env={}, timeout=60,
                            keep=1000)
    assert done.returncode == 0 and len(done.stdout) <= 1000 and done.stdout.endswith("end\n")


def test_a_run_past_its_time_is_killed_and_says_so(tmp_path):
    from tools.grading.course import run_keeping_tail

    with pytest.raises(subprocess.TimeoutExpired):
        run_keeping_tail([sys.executable, "-c", "import time; time.sleep(30)"], cwd=tmp_path,
                         env={}, timeout=1)
