"""Write the student copy of every chapter with nbgrader: `make student`.

`nbgrader generate_assignment` does the work, in a throwaway course (tools/grading/course.py): it
replaces each solution by a stub (`raise NotImplementedError()` in code, "YOUR ANSWER HERE"
in markdown), removes the hidden tests, clears the outputs and checks the cell metadata.
This script only copies its release into one folder, a notebook per chapter.

    python tools/grading/student.py [OUT_DIR]     # default: _build/student
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tools.chapters import ROOT, chapter_sources
from tools.grading.course import generate


def write_student_copies(out_dir: Path, chapters: list[Path] | None = None) -> list[Path]:
    chapters = chapter_sources(ROOT) if chapters is None else chapters
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="bertbook-course-") as scratch:
        released = generate(chapters, Path(scratch) / "course", Path(scratch) / "gradebook.db")
        written = []
        for stem, notebook in released.items():
            written.append(Path(shutil.copy(notebook, out_dir / f"{stem}.ipynb")))
    return written


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    out_dir = Path(argv[0]) if argv else ROOT / "_build" / "student"
    for path in write_student_copies(out_dir):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
