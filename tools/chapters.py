"""Reading the chapters: where they are and what their cells hold.

Shared by the exporter, the sync checks, the student-copy writer and the book builder.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import jupytext
import nbformat

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]


def chapter_sources(root: Path = ROOT) -> list[Path]:
    """The chapters' percent-format sources, in reading order (their NN_ prefix)."""
    return sorted((root / "chapters").glob("[0-9][0-9]_*.py"))


def read_chapter(path: Path) -> nbformat.NotebookNode:
    """A chapter as a notebook, from either twin (.py or .ipynb)."""
    return jupytext.read(path)


def cell_texts(notebook: nbformat.NotebookNode) -> list[tuple[str, str]]:
    """(cell type, source) of every cell: what the two twins must agree on."""
    return [(cell.cell_type, cell.source.strip()) for cell in notebook.cells]


def diagram_names(markdown: str) -> list[str]:
    """The diagrams (chapters/figures/NAME.svg) that markdown shows, by NAME, in order."""
    return re.findall(r"\]\(figures/([\w-]+)\.svg\)", markdown)


def book_settings(root: Path = ROOT) -> dict[str, str]:
    """The `[tool.bertbook]` table of pyproject.toml (repository slug and branch)."""
    with open(root / "pyproject.toml", "rb") as handle:
        return tomllib.load(handle)["tool"]["bertbook"]
