"""`make student`: stubs replace solutions, hidden checks vanish, nothing leaks."""

import subprocess
import sys

import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

from tools import student
from tools.chapters import ROOT, chapter_sources, read_chapter


@pytest.fixture(scope="module")
def student_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("student")
    subprocess.run([sys.executable, "tools/student.py", str(out)], cwd=ROOT, check=True)
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
        secret += _marked_lines(cell.source, student.SOLUTION)
        secret += _marked_lines(cell.source, student.HIDDEN)
    distinctive = [line for line in secret if len(line) >= 15]
    assert distinctive, "a chapter with exercises has solution lines to hide"
    leaked = [line for line in distinctive if line in copy_text]
    assert not leaked, f"solution text in the student copy: {leaked}"
    assert "BEGIN SOLUTION" not in copy_text and "HIDDEN TESTS" not in copy_text
    assert all(not cell.get("outputs") for cell in copy.cells if cell.cell_type == "code")


def test_stub_keeps_the_function_and_its_indentation():
    source = "def f(x):\n    ### BEGIN SOLUTION\n    return x\n    ### END SOLUTION\n"
    assert student.student_cell_source("code", source) == (
        "def f(x):\n    # YOUR CODE HERE\n    raise NotImplementedError()\n")


def test_unclosed_marker_is_an_error_not_a_leak():
    with pytest.raises(student.MarkerError, match="never closed"):
        student.student_cell_source("code", "### BEGIN SOLUTION\nanswer = 42\n")


def test_student_copy_runs_until_the_first_exercise(student_dir):
    """The preface's student copy runs; the first exercise check reports the stub."""
    notebook = nbformat.read(student_dir / "00_preface.ipynb", as_version=4)
    client = NotebookClient(notebook, timeout=120, kernel_name="python3",
                            resources={"metadata": {"path": str(ROOT / "chapters")}})
    with pytest.raises(CellExecutionError) as error:
        client.execute()
    assert "CheckFailed" in str(error.value)
    assert "top_words is still the stub" in str(error.value)
