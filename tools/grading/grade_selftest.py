"""Grade the reference answers of every chapter: `make grade-selftest`.

Before a course, this shows that nbgrader's own commands work on every chapter on this
machine: `generate_assignment` writes the student copies, the instructor's answers are put
in them, and `autograde` (sandboxed, at smoke size) must give every coding exercise its
point. It exits 1, listing what lost points, if any did. It runs each chapter once at the
smoke size (about ten minutes on two cores).

    python tools/grading/grade_selftest.py [--out _build/grades-selftest.csv]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import nbformat

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tools.chapters import ROOT, read_chapter
from tools.grading.exercises import SOLUTION, exercise_cells, grade_id_of, without_markers
from tools.grading.grade import grade_folder, write_csv
from tools.grading.student import write_student_copies


def reference_answers(chapter: Path) -> dict[str, str]:
    """grade id -> the instructor's code answer, without nbgrader's markers."""
    notebook = read_chapter(chapter)
    return {item.grade_id: without_markers(notebook.cells[item.index].source, SOLUTION,
                                           keep_inside=True)
            for item in exercise_cells(notebook) if item.role == "answer"}


def answered_copy(released: Path, answers: dict[str, str]) -> nbformat.NotebookNode:
    notebook = nbformat.read(released, as_version=4)
    for cell in notebook.cells:
        if grade_id_of(cell) in answers:
            cell.source = answers[grade_id_of(cell)]
    return notebook


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "_build" / "grades-selftest.csv")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bertbook-selftest-") as scratch:
        folder = Path(scratch) / "submissions" / "reference"
        folder.mkdir(parents=True)
        for released in write_student_copies(Path(scratch) / "student"):
            chapter = ROOT / "chapters" / f"{released.stem}.py"
            nbformat.write(answered_copy(released, reference_answers(chapter)),
                           folder / released.name)
        started = time.perf_counter()
        rows = grade_folder(folder.parent, cell_timeout=600)
    write_csv(rows, args.out)
    lost = [row for row in rows if row.exercise != "total" and row.points not in ("", 1.0)]
    print(f"graded {len(rows)} exercises in {time.perf_counter() - started:.0f} s; "
          f"wrote {args.out}")
    for row in lost:
        print(f"LOST: {row.chapter} {row.exercise}: {row.reason}")
    return 1 if lost else 0


if __name__ == "__main__":
    sys.exit(main())
