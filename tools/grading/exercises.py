"""Which cells of a chapter belong to which exercise, and nbgrader's metadata for each.

A chapter's exercise N.M starts at the markdown cell beginning "**Exercise N.M" (its
*statement*). After it come an *answer* cell (code or markdown holding nbgrader's
### BEGIN/END SOLUTION markers) and, after a code answer, its *tests* cell: the check the
student runs, then hidden tests (### BEGIN/END HIDDEN TESTS) that only the instructor's
copy keeps. A markdown answer is a *written* exercise, graded by hand.

`nbgrader_metadata` turns these roles into the cell metadata nbgrader reads (solution,
grade, locked, grade_id, points, schema_version); `make sync` writes it into the chapters'
.py sources, so it travels with them into the .ipynb twins and into nbgrader.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import nbformat

SOLUTION = ("### BEGIN SOLUTION", "### END SOLUTION")  # nbgrader's markers
HIDDEN = ("### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS")
EXERCISE_HEADING = re.compile(r"^\*\*Exercise (\d+\.\d+)\b", re.M)
NBGRADER_SCHEMA = 3  # the cell-metadata schema of nbgrader 0.9
POINTS = 1  # every exercise, code or written, is worth one point


@dataclass(frozen=True)
class ExerciseCell:
    index: int
    exercise: str
    role: str  # "statement", "answer", "tests" or "written"

    @property
    def grade_id(self) -> str:
        """nbgrader's name for the cell: unique in the notebook, stable across edits."""
        return f"ex{self.exercise.replace('.', '_')}_{self.role}"


GRADE_ID = re.compile(r"ex(\d+)_(\d+)_(statement|answer|tests|written)")


def grade_id_of(cell: nbformat.NotebookNode) -> str:
    """The nbgrader grade id a cell carries ("" for a cell that is no exercise's)."""
    fields = cell.get("metadata", {}).get("nbgrader", {})
    grade_id = fields.get("grade_id", "") if isinstance(fields, dict) else ""
    return grade_id if isinstance(grade_id, str) else ""


def parse_grade_id(grade_id: str) -> tuple[str, str] | None:
    """(exercise, role) from a grade id made by ExerciseCell.grade_id, e.g. "ex0_1_answer"
    -> ("0.1", "answer"); None for any other name."""
    match = GRADE_ID.fullmatch(grade_id)
    return (f"{match[1]}.{match[2]}", match[3]) if match else None


def without_markers(source: str, markers: tuple[str, str], keep_inside: bool) -> str:
    """The source without the marker lines, and without what they enclose unless kept
    (SOLUTION kept: the reference answer as plain code; HIDDEN dropped: the reader's view)."""
    kept, inside = [], False
    for line in source.split("\n"):
        if line.strip() in markers:
            inside = line.strip() == markers[0]
        elif keep_inside or not inside:
            kept.append(line)
    return "\n".join(kept)


def _role(cell: nbformat.NotebookNode, previous_role: str | None) -> str | None:
    if SOLUTION[0] in cell.source:
        return "answer" if cell.cell_type == "code" else "written"
    if cell.cell_type == "code" and previous_role == "answer":
        return "tests"
    return None


def exercise_cells(notebook: nbformat.NotebookNode) -> list[ExerciseCell]:
    """Every cell that takes part in an exercise, in notebook order."""
    found, current, previous_role = [], None, None
    for index, cell in enumerate(notebook.cells):
        headings = EXERCISE_HEADING.findall(cell.source) if cell.cell_type == "markdown" else []
        if headings:
            current, previous_role = headings[-1], "statement"
            found.append(ExerciseCell(index, current, "statement"))
            continue
        if current is None:
            continue
        role = _role(cell, previous_role)
        if role:
            found.append(ExerciseCell(index, current, role))
        previous_role = role
    return found


def exercise_numbers(notebook: nbformat.NotebookNode) -> list[str]:
    """The chapter's exercises ("0.1", "0.2", ...) in order."""
    return [item.exercise for item in exercise_cells(notebook) if item.role == "statement"]


def nbgrader_cell_metadata(item: ExerciseCell) -> dict[str, Any]:
    """nbgrader's metadata for one exercise cell.

    statement: locked (read-only); answer: a solution cell; tests: an autograded, locked
    test cell worth POINTS; written: a solution cell graded by hand, worth POINTS.
    """
    metadata: dict[str, Any] = {
        "grade": item.role in ("tests", "written"),
        "grade_id": item.grade_id,
        "locked": item.role in ("statement", "tests"),
        "schema_version": NBGRADER_SCHEMA,
        "solution": item.role in ("answer", "written"),
    }
    if metadata["grade"]:
        metadata["points"] = POINTS
    return metadata


def nbgrader_metadata(notebook: nbformat.NotebookNode) -> dict[int, dict[str, Any]]:
    """Cell index -> the nbgrader metadata that cell must carry (none for other cells)."""
    return {item.index: nbgrader_cell_metadata(item) for item in exercise_cells(notebook)}


def hidden_tests_misplaced(notebook: nbformat.NotebookNode) -> list[int]:
    """Indices of cells with hidden tests that are not a tests cell (nbgrader refuses them)."""
    tests = {item.index for item in exercise_cells(notebook) if item.role == "tests"}
    return [index for index, cell in enumerate(notebook.cells)
            if HIDDEN[0] in cell.source and index not in tests]
