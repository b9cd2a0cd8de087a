"""`make student` (nbgrader generate_assignment): stubs replace solutions, hidden tests vanish,
nothing leaks, and the metadata nbgrader needs is in the chapters' sources."""

import subprocess
import sys

import jupytext
import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

from tools.chapters import ROOT, chapter_sources, read_chapter
from tools.grading import course, exercises
from tools.grading.exercises import exercise_cells

pytestmark = pytest.mark.slow  # nbgrader's generate_assignment and autograde


@pytest.fixture(scope="module")
def student_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("student")
    subprocess.run([sys.executable, "tools/grading/student.py", str(out)], cwd=ROOT, check=True)
    return out


def _marked_lines(source: str, markers: tuple[str, str]) -> list[str]:
    lines, inside = [], False
    for line in source.split("\n"):
        if line.strip() in markers:
            inside = line.strip() == markers[0]
        elif inside:
            lines.append(line.strip())
    return lines


@pytest.mark.parametrize("chapter", chapter_sources(ROOT), ids=lambda c: c.stem)
def test_no_solution_or_hidden_check_leaks(chapter, student_dir):
    copy = nbformat.read(student_dir / chapter.with_suffix(".ipynb").name, as_version=4)
    copy_text = "\n".join(cell.source for cell in copy.cells)
    secret = []
    for cell in read_chapter(chapter).cells:
        secret += _marked_lines(cell.source, exercises.SOLUTION)
        secret += _marked_lines(cell.source, exercises.HIDDEN)
    distinctive = [line for line in secret if len(line) >= 15]
    assert distinctive, "a chapter with exercises has solution lines to hide"
    leaked = [line for line in distinctive if line in copy_text]
    assert not leaked, f"solution text in the student copy: {leaked}"
    assert "BEGIN SOLUTION" not in copy_text and "HIDDEN TESTS" not in copy_text
    assert all(not cell.get("outputs") for cell in copy.cells if cell.cell_type == "code")


@pytest.mark.parametrize("chapter", chapter_sources(ROOT), ids=lambda c: c.stem)
def test_every_exercise_cell_carries_nbgrader_metadata_in_the_source(chapter):
    """The metadata lives in the .py a maintainer edits (so `make sync` keeps it)."""
    notebook = jupytext.read(chapter)
    items = exercise_cells(notebook)
    grade_ids = [notebook.cells[i.index].metadata["nbgrader"]["grade_id"] for i in items]
    assert len(grade_ids) == len(set(grade_ids)), "grade ids are unique in a notebook"
    for item in items:
        metadata = notebook.cells[item.index].metadata["nbgrader"]
        assert metadata["schema_version"] == 3
        if item.role == "tests":
            assert metadata["grade"] and metadata["locked"] and metadata["points"] > 0
            assert exercises.HIDDEN[0] in notebook.cells[item.index].source, \
                f"exercise {item.exercise}: its tests cell has hidden tests"
        if item.role == "answer":
            assert metadata["solution"] and not metadata["grade"] and not metadata["locked"]
    assert {i.role for i in items} >= {"statement", "answer", "tests", "written"}


def test_released_copies_keep_the_metadata_autograde_needs(student_dir):
    copy = nbformat.read(student_dir / "00_preface.ipynb", as_version=4)
    grade_ids = [cell.metadata.get("nbgrader", {}).get("grade_id") for cell in copy.cells]
    assert {"ex0_1_answer", "ex0_1_tests", "ex0_2_answer", "ex0_3_written"} <= set(grade_ids)


def test_nbgrader_refuses_a_solution_outside_a_solution_cell(tmp_path):
    """nbgrader's own check runs in `make student`, and its message reaches the user."""
    chapter = tmp_path / "99_broken.py"
    chapter.write_text("# %%\nx = 1\n### BEGIN SOLUTION\ny = 2\n### END SOLUTION\n")
    with pytest.raises(RuntimeError, match="Solution region detected in a non-solution cell"):
        course.generate([chapter], tmp_path / "course", tmp_path / "gradebook.db")


def test_student_copy_runs_until_the_first_exercise(student_dir):
    """The preface's student copy runs; the first exercise check reports the stub."""
    notebook = nbformat.read(student_dir / "00_preface.ipynb", as_version=4)
    client = NotebookClient(notebook, timeout=120, kernel_name="python3",
                            resources={"metadata": {"path": str(ROOT / "chapters")}})
    with pytest.raises(CellExecutionError) as error:
        client.execute()
    assert "CheckFailed" in str(error.value)
    assert "run_minutes is still the stub" in str(error.value)
