"""What `make grade` does with a submission before any of it runs.

A submission is hostile until read: it may be a link to a file of yours, a FIFO that never
ends, a device, a file of gigabytes, or a notebook whose cells reach into the kernel to
fool the tests. It may also be honest and messy: renamed by the browser
(`00_preface (1).ipynb`), with a pasted copy of an exercise cell, or a deleted tests cell.
This module

* finds each student's notebook for each chapter, whatever the browser called it;
* refuses links, FIFOs, devices and oversized files by name, before reading a byte;
* repairs what honest editing breaks: a duplicated exercise cell is graded once (the first
  copy) and a deleted tests cell is put back from the student copy;
* reads every cell the student added or changed for the kernel's machinery, however the
  names are spelled (through the syntax tree, not the text), so a human looks at it.
"""

from __future__ import annotations

import ast
import copy
import os
import re
import stat
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from tools.grading.exercises import SOLUTION, grade_id_of, parse_grade_id

MAX_BYTES = 20 * 1024 * 1024  # the largest chapter with outputs is a few MB
MAX_CELLS = 1000  # the longest chapter has about 150 cells
# "00_preface.ipynb", "00_preface (1).ipynb" (a browser's second download),
# "Copy of 00_preface.ipynb" (Colab's "Save a copy")
NOTEBOOK_NAME = re.compile(r"(?:Copy of )?(?P<stem>\d\d_\w+?)(?: ?\(\d+\))?\.ipynb",
                           re.IGNORECASE)

# What answers to the book's exercises import; anything else is read by a human.
ALLOWED_MODULES = {"bertlib", "bisect", "collections", "copy", "dataclasses", "functools",
                   "heapq", "itertools", "math", "matplotlib", "numpy", "operator",
                   "random", "re", "statistics", "string", "tokenizers", "torch", "typing",
                   "unicodedata", "warnings"}
# Names that reach the interpreter, the kernel or the grader rather than the exercise.
MACHINERY = {"__import__", "breakpoint", "builtins", "compile", "ctypes", "delattr",
             "eval", "events", "exec", "gc", "get_ipython", "getattr", "globals",
             "importlib", "input_transformers_cleanup", "input_transformers_post",
             "inspect", "locals", "modules", "os", "register", "setattr", "subprocess",
             "sys", "vars", "bertbook", "checks", "nbgrader", "gradebook", "f_globals",
             "f_locals", "f_back", "tb_frame", "gi_frame", "display_formatter",
             "displayhook", "excepthook", "exit", "quit"}


@dataclass
class Found:
    """One student's file for one chapter: `path`, or why it is refused."""

    student: str
    chapter: str
    path: Path
    refused: str = ""
    notes: list[str] = field(default_factory=list)


def student_folders(submissions: Path) -> list[Path]:
    """The student folders (real folders only: a link could lead anywhere)."""
    return sorted(Path(entry.path) for entry in os.scandir(submissions)
                  if entry.is_dir(follow_symlinks=False))


def submission_folders(submissions: Path) -> list[tuple[str, Path]]:
    """(student, the folder holding their notebooks) for every student, in one of the two
    layouts accepted: SUBMISSIONS/<student>/*.ipynb, or nbgrader's
    SUBMISSIONS/submitted/<student>/<assignment>/*.ipynb (also without `submitted/`).
    Notebooks lying loose in SUBMISSIONS belong to no one named: LayoutError says so."""
    loose = sorted(entry.name for entry in os.scandir(submissions)
                   if entry.name.lower().endswith(".ipynb"))
    if loose:
        raise LayoutError(", ".join(loose[:3]) + (", ..." if len(loose) > 3 else ""))
    nbgrader_root = submissions / "submitted"
    if nbgrader_root.is_dir() and not nbgrader_root.is_symlink():
        submissions = nbgrader_root
    folders = []
    for student_dir in student_folders(submissions):
        holds_notebooks = any(entry.name.lower().endswith(".ipynb")
                              for entry in os.scandir(student_dir))
        assignments = [] if holds_notebooks else student_folders(student_dir)
        folders += [(student_dir.name, folder) for folder in assignments or [student_dir]]
    return folders


class LayoutError(ValueError):
    """Notebooks lie loose in the submissions folder; the message names a few of them."""


def chapter_files(student_dir: Path, chapters: set[str], student: str | None = None
                  ) -> tuple[list[Found], list[str]]:
    """The file graded for each chapter (exact name first, else the newest), and the
    names of notebooks that are no chapter's. `student` defaults to the folder's name."""
    candidates: dict[str, list[Path]] = {}
    unknown = []
    for entry in sorted(os.scandir(student_dir), key=lambda e: e.name):
        if not entry.name.lower().endswith(".ipynb"):
            continue
        match = NOTEBOOK_NAME.fullmatch(entry.name)
        if match and match["stem"] in chapters:
            candidates.setdefault(match["stem"], []).append(Path(entry.path))
        else:
            unknown.append(entry.name)
    found = []
    for stem, paths in sorted(candidates.items()):
        exact = [p for p in paths if p.name == f"{stem}.ipynb"]
        chosen = exact[0] if exact else max(paths, key=lambda p: os.lstat(p).st_mtime)
        item = Found(student or student_dir.name, stem, chosen, refusal(chosen))
        if len(paths) > 1:
            others = ", ".join(p.name for p in paths if p != chosen)
            item.notes.append(f"graded {chosen.name}, not {others}")
        found.append(item)
    return found, unknown


def refusal(path: Path) -> str:
    """Why `path` is not read at all ("" when it may be read)."""
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode):
        return "refused: the submission is a link, not a notebook file"
    if not stat.S_ISREG(info.st_mode):
        return "refused: the submission is not a regular file (a FIFO or a device?)"
    if info.st_size > MAX_BYTES:
        return f"refused: {info.st_size:,} bytes, more than a notebook's {MAX_BYTES:,}"
    return ""


def read_bounded(path: Path) -> bytes:
    """The file's bytes, opened without following links or blocking, and checked again
    after opening (the file may have been swapped since `refusal`)."""
    descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(descriptor, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_BYTES:
            raise OSError("not a regular file of a notebook's size")
        return handle.read(MAX_BYTES + 1)[:MAX_BYTES]


def parse_notebook(data: bytes) -> nbformat.NotebookNode | str:
    """The notebook, or why it is not one, in the grader's words (never the file's)."""
    try:
        notebook = nbformat.reads(data.decode("utf-8"), as_version=4)
    except UnicodeDecodeError:
        return "not a valid notebook (not UTF-8 text)"
    except Exception:  # nbformat raises several kinds for a file that is not JSON
        return "not a valid notebook (not a Jupyter notebook's JSON)"
    if len(notebook.cells) > MAX_CELLS:
        return f"refused: {len(notebook.cells)} cells, more than a notebook's {MAX_CELLS}"
    _renumber_duplicate_ids(notebook)
    _drop_malformed_grading_metadata(notebook)
    try:
        nbformat.validate(notebook)
    except nbformat.ValidationError:
        return "not a valid notebook (nbformat 4's checks fail)"
    return notebook


def _drop_malformed_grading_metadata(notebook: nbformat.NotebookNode) -> None:
    """A cell's nbgrader metadata that is not a table of fields (`"nbgrader": "x"`) would
    stop nbgrader on the whole batch; without it the cell is a plain cell, and an exercise
    cell so damaged is put back from the release, as a deleted one is."""
    for cell in notebook.cells:
        metadata = cell.get("metadata")
        if isinstance(metadata, dict) and not isinstance(metadata.get("nbgrader", {}), dict):
            del metadata["nbgrader"]


def _renumber_duplicate_ids(notebook: nbformat.NotebookNode) -> None:
    seen = set()
    for cell in notebook.cells:
        if cell.get("id") in seen:
            cell["id"] = uuid.uuid4().hex[:8]
        seen.add(cell.get("id"))


def is_instructor_copy(answers: dict[str, str]) -> bool:
    """Every code answer still holds nbgrader's solution markers, each on a line of its own
    (a student's comment mentioning a marker does not count)."""
    def marked(source: str) -> bool:
        lines = {line.strip() for line in source.splitlines()}
        return SOLUTION[0] in lines and SOLUTION[1] in lines
    return bool(answers) and all(marked(source) for source in answers.values())


def repaired(notebook: nbformat.NotebookNode, release: nbformat.NotebookNode
             ) -> tuple[nbformat.NotebookNode, list[str]]:
    """The notebook with exercise cells nbgrader can grade, and what was changed.

    A copy of an exercise cell (same grade id, as Jupyter's copy and paste leaves it) loses
    nbgrader's role and runs as an ordinary cell, as it ran for the student; a tests cell
    the student deleted is put back after the exercise's answer, as nbgrader itself
    restores tests cells the student changed.
    """
    fixed = copy.deepcopy(notebook)
    notes, seen = [], set()
    for cell in fixed.cells:
        grade_id = grade_id_of(cell)
        if grade_id and grade_id in seen:
            cell.metadata.pop("nbgrader", None)
            notes.append(f"cell {grade_id} appears twice: the copy ran as an ordinary cell")
        seen.add(grade_id)
    for cell in release.cells:
        parsed = parse_grade_id(grade_id_of(cell))
        if parsed and parsed[1] == "tests" and grade_id_of(cell) not in seen:
            answer = f"ex{parsed[0].replace('.', '_')}_answer"
            at = next((i + 1 for i, c in enumerate(fixed.cells) if grade_id_of(c) == answer),
                      len(fixed.cells))
            fixed.cells.insert(at, copy.deepcopy(cell))
            notes.append(f"tests cell of exercise {parsed[0]} was missing: put back")
    return fixed, notes


def changed_code(notebook: nbformat.NotebookNode, release: nbformat.NotebookNode
                 ) -> list[tuple[str, str]]:
    """(where, source) of each code cell the student wrote or changed."""
    given = {cell.source for cell in release.cells if cell.cell_type == "code"}
    changed = []
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type == "code" and cell.source not in given:
            parsed = parse_grade_id(grade_id_of(cell))
            where = (f"answer {parsed[0]}" if parsed and parsed[1] == "answer"
                     else f"cell {index + 1}")
            changed.append((where, cell.source))
    return changed


def machinery_used(source: str) -> list[str]:
    """The names in `source` that reach past the exercise into the interpreter, the kernel
    or the grader, read from its syntax tree (so spacing, aliases and comments do not
    hide them); code that is not plain Python (magics, shell escapes) is reported too."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return ["code that is not plain Python (a magic or shell command?)"]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            modules = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                       else [node.module or "."])
            found |= {f"import {name}" for name in modules
                      if name.split(".")[0] not in ALLOWED_MODULES}
        elif isinstance(node, ast.Name) and (node.id in MACHINERY or node.id.startswith("__")):
            found.add(node.id)
        elif isinstance(node, ast.Attribute) and (node.attr in MACHINERY
                                                  or node.attr.startswith("_")):
            found.add("." + node.attr)
    return sorted(found)
