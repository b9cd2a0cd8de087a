"""Which cells of a chapter belong to which exercise, and in what role.

A chapter's exercise N.M starts at the markdown cell beginning "**Exercise N.M". After it:
an *answer* cell (code or markdown holding the nbgrader markers ### BEGIN/END SOLUTION),
the *check* cell that follows a code answer (the student runs it), and any *hidden* cell
(### BEGIN/END HIDDEN TESTS), which only the instructor's copy keeps.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import nbformat

SOLUTION = ("### BEGIN SOLUTION", "### END SOLUTION")  # nbgrader's markers
HIDDEN = ("### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS")
EXERCISE_HEADING = re.compile(r"^\*\*Exercise (\d+\.\d+)\b", re.M)
METADATA_KEY = "bertbook"


@dataclass(frozen=True)
class ExerciseCell:
    index: int
    exercise: str
    role: str  # "answer", "written", "check" or "hidden"


def exercise_cells(notebook: nbformat.NotebookNode) -> list[ExerciseCell]:
    """Every cell that takes part in an exercise, in notebook order."""
    found, current, previous_role = [], None, None
    for index, cell in enumerate(notebook.cells):
        headings = EXERCISE_HEADING.findall(cell.source) if cell.cell_type == "markdown" else []
        if headings:
            current, previous_role = headings[-1], None
            continue
        if current is None:
            continue
        role = None
        if SOLUTION[0] in cell.source:
            role = "answer" if cell.cell_type == "code" else "written"
        elif cell.cell_type == "code" and HIDDEN[0] in cell.source:
            role = "hidden"
        elif cell.cell_type == "code" and previous_role == "answer":
            role = "check"
        if role:
            found.append(ExerciseCell(index, current, role))
        previous_role = role
    return found


def tag_cells(notebook: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Record each exercise cell's exercise and role in its metadata (kept by Jupyter)."""
    for item in exercise_cells(notebook):
        notebook.cells[item.index].metadata[METADATA_KEY] = {"exercise": item.exercise,
                                                             "role": item.role}
    return notebook
