"""The reading path of every committed chapter stays inside DESIGN.md's budgets."""

from __future__ import annotations

import nbformat
import pytest

from tools.authoring.reading_path import (
    COLLAPSED_TAG,
    ReadingPath,
    chapter_reading_path,
    is_collapsed,
    over_budget,
    reading_path,
)
from tools.chapters import ROOT, chapter_sources

CHAPTERS = chapter_sources(ROOT)


def code(source: str, outputs: int = 0, collapsed: bool = False) -> nbformat.NotebookNode:
    cell = nbformat.v4.new_code_cell(source)
    cell.outputs = [nbformat.v4.new_output("stream", text="x\n")] * outputs
    if collapsed:
        cell.metadata["tags"] = [COLLAPSED_TAG]
    return cell


def test_collapsed_cells_are_not_counted_and_the_first_result_is_a_visible_one():
    notebook = nbformat.v4.new_notebook(cells=[
        code("import os\nimport sys", outputs=1, collapsed=True),
        nbformat.v4.new_markdown_cell("prose\nmore prose"),
        code("a = 1\nb = 2\nc = 3"),
        code("print(a)", outputs=1),
        code("\n".join(["x = 0"] * 60), collapsed=True),
    ])
    assert reading_path(notebook, source_lines=99) == ReadingPath(
        visible_lines=4, longest_cell=3, first_result_at=4, source_lines=99)


def test_over_budget_names_what_exceeds_it():
    path = ReadingPath(visible_lines=351, longest_cell=40, first_result_at=10, source_lines=100)
    assert over_budget(path) == ["visible_lines 351 > 350"]
    no_result = ReadingPath(10, 5, None, 100)
    assert over_budget(no_result) == ["no visible cell shows a result"]


@pytest.mark.parametrize("chapter", CHAPTERS, ids=[c.stem for c in CHAPTERS])
def test_each_chapter_is_within_its_reading_path_budget(chapter):
    assert over_budget(chapter_reading_path(chapter)) == []


@pytest.mark.parametrize("chapter", CHAPTERS, ids=[c.stem for c in CHAPTERS])
def test_collapsed_cells_are_collapsed_in_jupyter_too(chapter):
    notebook = nbformat.read(chapter.with_suffix(".ipynb"), as_version=4)
    code_cells = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert is_collapsed(code_cells[0]), "the set-up cell"
    for cell in code_cells:
        if is_collapsed(cell):
            assert cell.metadata.get("jupyter", {}).get("source_hidden") is True


BOOK_CHAPTERS = [c for c in CHAPTERS if not c.stem.startswith("00")]  # the preface shows
# a set-up cell by taking one apart, so it is the one page with more than one


@pytest.mark.parametrize("chapter", BOOK_CHAPTERS, ids=[c.stem for c in BOOK_CHAPTERS])
def test_a_chapter_opens_with_one_collapsed_set_up_cell(chapter):
    """Install, size, budget and Drive: one collapsed cell, the only code before the first
    section that follows it (DESIGN.md's template)."""
    cells = nbformat.read(chapter.with_suffix(".ipynb"), as_version=4).cells
    first = next(i for i, cell in enumerate(cells) if cell.cell_type == "code")
    section = next(i for i in range(first + 1, len(cells))
                   if cells[i].cell_type == "markdown" and cells[i].source.startswith("## "))
    set_up = [cell for cell in cells[first:section] if cell.cell_type == "code"]
    assert len(set_up) == 1 and is_collapsed(set_up[0])
