"""Grade a folder of student notebooks: `make grade SUBMISSIONS=folder`.

Layout: SUBMISSIONS/<student>/<NN_chapter>.ipynb (the student copies of `make student`,
worked on). For each notebook, the instructor's chapter is run at smoke size with the
student's answer cells in place of the solutions, so the visible checks and the hidden
ones (which the student never saw) both run. Each exercise scores 1 when its answer, its
check and its hidden tests all run without error, else 0 with the reason. Every cell has
a time limit; an endless loop is interrupted, a crashed kernel is restarted without the
exercise that crashed it, and a file that is not a notebook scores zero — the batch never
stops. Written exercises are listed for grading by hand.

    python tools/grade.py SUBMISSIONS [--out grades.csv] [--cell-timeout 60]
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import DeadKernelError

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tools.chapters import ROOT, read_chapter
from tools.exercises import METADATA_KEY, exercise_cells
from tools.student import CODE_STUB

FIELDS = ["student", "chapter", "exercise", "points", "max_points", "reason"]


@dataclass
class Row:
    student: str
    chapter: str
    exercise: str
    points: int | str
    max_points: int | str
    reason: str


def student_answers(submission: nbformat.NotebookNode) -> dict[str, str]:
    """Exercise -> source of the student's answer cell (found by its metadata tag)."""
    answers = {}
    for cell in submission.cells:
        tag = cell.get("metadata", {}).get(METADATA_KEY, {})
        if tag.get("role") in ("answer", "written"):
            answers[tag["exercise"]] = cell.source
    return answers


def _run(notebook: nbformat.NotebookNode, cell_timeout: int) -> tuple[str | None, int]:
    """Execute in place, errors kept in the outputs. Returns (why the kernel died, or None;
    the index of the last cell started)."""
    started = [-1]
    client = NotebookClient(
        notebook, timeout=cell_timeout, kernel_name="python3", allow_errors=True,
        interrupt_on_timeout=True, resources={"metadata": {"path": str(ROOT / "chapters")}},
        error_on_timeout={"ename": "Timeout", "evalue": f"no result after {cell_timeout} s "
                                                       "(an endless loop?)", "traceback": []},
        on_cell_execute=lambda cell, cell_index: started.__setitem__(0, cell_index))
    try:
        client.execute()
    except DeadKernelError as error:
        return f"the kernel died ({str(error)[:100]})", started[0]
    return None, started[0]


def _error(cell, cell_timeout: int) -> str | None:
    """The cell's error, if it raised one; the interrupt of a timed-out cell says so."""
    for output in cell.get("outputs", []):
        if output.get("output_type") != "error":
            continue
        if output["ename"] == "KeyboardInterrupt":  # what our interrupt on timeout raises
            return f"Timeout: interrupted after {cell_timeout} s (an endless loop?)"
        return f"{output['ename']}: {output['evalue']}"[:300]
    return None


def grade_notebook(student: str, chapter: Path, path: Path, cell_timeout: int) -> list[Row]:
    """Rows for one student's notebook of one chapter."""
    instructor = read_chapter(chapter)
    items = exercise_cells(instructor)
    exercises = sorted({i.exercise for i in items}, key=lambda e: tuple(map(int, e.split("."))))
    written = {i.exercise for i in items if i.role == "written"}
    try:
        answers = student_answers(nbformat.read(path, as_version=4))
    except Exception as error:  # any unreadable file scores zero, with the reason
        reason = f"not a valid notebook ({type(error).__name__}: {str(error)[:120]})"
        return [Row(student, chapter.stem, e, 0, 1, reason) for e in exercises
                if e not in written]
    failures: dict[str, str] = {}
    while True:  # one pass, plus one more for each exercise that kills the kernel
        graded = read_chapter(chapter)
        for item in items:
            if item.role == "answer":
                source = answers.get(item.exercise)
                if item.exercise in failures or source is None:
                    source = CODE_STUB
                graded.cells[item.index].source = source
        died, running = _run(graded, cell_timeout)
        if died is None:
            break
        crashed = next((item.exercise for item in items if item.index == running), None)
        if crashed is None or crashed in failures:
            return [Row(student, chapter.stem, e, 0, 1, died) for e in exercises
                    if e not in written]
        failures[crashed] = died
    rows = []
    for exercise in exercises:
        if exercise in written:
            rows.append(Row(student, chapter.stem, exercise, "", "", "written: graded by hand"))
            continue
        reason = failures.get(exercise)
        if reason is None and exercise not in answers:
            reason = "answer cell not found (was its cell deleted?)"
        if reason is None:
            for item in items:
                if item.exercise == exercise and (error := _error(graded.cells[item.index],
                                                                 cell_timeout)):
                    reason = f"{item.role} cell: {error}"
                    break
        rows.append(Row(student, chapter.stem, exercise, 0 if reason else 1, 1, reason or "ok"))
    return rows


def grade_folder(submissions: Path, cell_timeout: int = 60) -> list[Row]:
    rows = []
    os.environ["BERT_BOOK_SIZE"] = "smoke"  # kernels inherit it: grading runs at smoke size
    for student_dir in sorted(p for p in submissions.iterdir() if p.is_dir()):
        for path in sorted(student_dir.glob("*.ipynb")):
            chapter = ROOT / "chapters" / f"{path.stem}.py"
            if not chapter.exists():
                rows.append(Row(student_dir.name, path.stem, "", 0, 0, "no such chapter"))
                continue
            print(f"grading {student_dir.name}/{path.name}", flush=True)
            rows += grade_notebook(student_dir.name, chapter, path, cell_timeout)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Grade student notebooks into a CSV.")
    parser.add_argument("submissions", type=Path)
    parser.add_argument("--out", type=Path, default=ROOT / "_build" / "grades.csv")
    parser.add_argument("--cell-timeout", type=int, default=60)
    args = parser.parse_args(argv)
    if not args.submissions.is_dir():
        parser.error(f"{args.submissions} is not a folder of student folders")
    rows = grade_folder(args.submissions, args.cell_timeout)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(FIELDS)
        writer.writerows([getattr(row, f) for f in FIELDS] for row in rows)
    print(f"wrote {len(rows)} rows to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
