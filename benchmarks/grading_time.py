"""Seconds per notebook of `make grade`, this checkout's grader beside an earlier one's.

Both grade the same submissions (chapter 00's reference answers, at smoke size), in turns
(baseline, current, baseline, ...), so that a busy machine slows both alike; the medians
per notebook and their ratio are printed. The earlier grader runs from a git worktree of
`--baseline` (a commit), with this checkout's installed library.

    python benchmarks/grading_time.py --baseline 9968578 [--students 5] [--rounds 3]
"""

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tools.grading.grade_selftest import answered_copy, reference_answers  # noqa: E402
from tools.grading.student import write_student_copies  # noqa: E402

PREFACE = ROOT / "chapters" / "00_preface.py"


def submissions(folder: Path, students: int) -> Path:
    released = write_student_copies(folder / "student", [PREFACE])[0]
    notebook = answered_copy(released, reference_answers(PREFACE))
    for number in range(students):
        target = folder / "submissions" / f"student{number:02d}" / "00_preface.ipynb"
        target.parent.mkdir(parents=True)
        nbformat.write(notebook, target)
    return folder / "submissions"


def seconds_per_notebook(checkout: Path, folder: Path, students: int) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, str(checkout / "tools" / "grading" / "grade.py"),
                    str(folder), "--out", str(folder.parent / "grades.csv")],
                   check=True, capture_output=True, cwd=checkout)
    return (time.perf_counter() - started) / students


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", required=True, help="the earlier grader's commit")
    parser.add_argument("--students", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bertbook-grading-bench-") as scratch:
        worktree = Path(scratch) / "baseline"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach",
                        str(worktree), args.baseline], check=True, capture_output=True)
        try:
            folder = submissions(Path(scratch), args.students)
            times: dict[str, list[float]] = {"baseline": [], "current": []}
            for _ in range(args.rounds):
                for name, checkout in (("baseline", worktree), ("current", ROOT)):
                    times[name].append(seconds_per_notebook(checkout, folder, args.students))
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force",
                            str(worktree)], capture_output=True)
    base, current = (statistics.median(times[k]) for k in ("baseline", "current"))
    print(f"seconds per notebook, median of {args.rounds} rounds of {args.students}: "
          f"baseline ({args.baseline}) {base:.1f}, current {current:.1f}; "
          f"ratio {current / base:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
