"""Write the student copy of every chapter: solutions replaced, hidden checks removed.

The markers are nbgrader's, so a course on nbgrader can use the chapters as its source:

* in code, the lines between ``### BEGIN SOLUTION`` and ``### END SOLUTION`` become
  ``raise NotImplementedError`` (at the marker's indentation);
* in markdown, the same markers' contents become "YOUR ANSWER HERE";
* the lines between ``### BEGIN HIDDEN TESTS`` and ``### END HIDDEN TESTS`` are removed
  (the instructor's copy, the chapter itself, keeps them for grading).

    python tools/student.py [OUT_DIR]     # default: _build/student
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tools.chapters import ROOT, chapter_sources, read_chapter
from tools.exercises import HIDDEN, SOLUTION, tag_cells

CODE_STUB = "# YOUR CODE HERE\nraise NotImplementedError()"
MARKDOWN_STUB = "YOUR ANSWER HERE"


class MarkerError(ValueError):
    """A BEGIN marker without its END (or the reverse): the copy would leak or break."""


def _replace_blocks(source: str, markers: tuple[str, str], stub: str | None) -> str:
    """Replace each marked block (markers included) by stub, indented like its marker."""
    begin, end = markers
    lines, out, inside, indent = source.split("\n"), [], False, ""
    for line in lines:
        stripped = line.strip()
        if stripped == begin:
            if inside:
                raise MarkerError(f"{begin!r} inside another block")
            inside, indent = True, line[: len(line) - len(line.lstrip())]
        elif stripped == end:
            if not inside:
                raise MarkerError(f"{end!r} without {begin!r}")
            inside = False
            if stub is not None:
                out.extend(indent + stub_line for stub_line in stub.split("\n"))
        elif not inside:
            out.append(line)
    if inside:
        raise MarkerError(f"{begin!r} is never closed by {end!r}")
    return "\n".join(out)


def student_cell_source(cell_type: str, source: str) -> str:
    if cell_type == "markdown":
        return _replace_blocks(source, SOLUTION, MARKDOWN_STUB)
    without_hidden = _replace_blocks(source, HIDDEN, None)
    if without_hidden.strip() == "" and source.strip():
        without_hidden = "# (hidden checks run when your work is graded)"
    return _replace_blocks(without_hidden, SOLUTION, CODE_STUB)


def student_notebook(chapter: Path) -> nbformat.NotebookNode:
    """The chapter as a student notebook, with no outputs (they would show solutions).

    Exercise cells are tagged in their metadata (tools/exercises.py), so the grader finds
    each answer even when a student adds or moves cells.
    """
    notebook = tag_cells(read_chapter(chapter))
    for cell in notebook.cells:
        cell.source = student_cell_source(cell.cell_type, cell.source)
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    return notebook


def write_student_copies(out_dir: Path) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for chapter in chapter_sources(ROOT):
        target = out_dir / chapter.with_suffix(".ipynb").name
        nbformat.write(student_notebook(chapter), target)
        written.append(target)
    return written


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    out_dir = Path(argv[0]) if argv else ROOT / "_build" / "student"
    for path in write_student_copies(out_dir):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
