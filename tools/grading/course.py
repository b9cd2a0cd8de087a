"""A throwaway nbgrader course holding the chapters, for `make student` and `make grade`.

nbgrader works on a course folder: `source/<assignment>/<notebook>.ipynb` (the instructor's
notebooks, with nbgrader's cell metadata) and a gradebook database. Here each chapter is an
assignment of the same name, holding one notebook, the chapter itself. The course lives in a
temporary folder, so nothing of nbgrader's state is left in the repository.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import nbformat

from tools.chapters import read_chapter

COURSE_ID = "bert-end-to-end"


class NbgraderMissing(RuntimeError):
    """nbgrader is not installed: it comes with the `instructor` extra."""


OUTPUT_KEPT = 64 * 1024  # bytes of a grading run's output kept for its reasons


def nbgrader(*args: str, cwd: Path, env: dict[str, str] | None = None,
             timeout: float | None = None) -> subprocess.CompletedProcess[str]:
    """Run an nbgrader command (in this Python) and return what it printed."""
    try:
        import nbgrader as _  # noqa: F401  (only to say clearly when it is missing)
    except ImportError as error:
        raise NbgraderMissing(
            "nbgrader is not installed; run `make setup` (it installs the `instructor` "
            "extra) or `pip install -e '.[instructor]'`") from error
    env = dict(os.environ if env is None else env)
    # nbgrader runs `alembic` by name: this Python's scripts folder must come first.
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return run_keeping_tail([sys.executable, "-m", "nbgrader", *args], cwd=cwd, env=env,
                            timeout=timeout)


def run_keeping_tail(command: list[str], cwd: Path, env: dict[str, str],
                     timeout: float | None, keep: int = OUTPUT_KEPT
                     ) -> subprocess.CompletedProcess[str]:
    """Run `command`, keeping only the last `keep` bytes of what it prints (stdout and
    stderr together): a student's kernel inherits these descriptors, and one that writes a
    gigabyte to /dev/stdout must not make the grader hold it. subprocess.TimeoutExpired
    after `timeout` seconds, the process killed, as subprocess.run does."""
    process = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT)
    tail = bytearray()

    def drain() -> None:
        for chunk in iter(lambda: process.stdout.read(65536), b""):
            tail.extend(chunk)
            del tail[:-keep]

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        raise
    finally:
        reader.join(timeout=10)
    text = bytes(tail).decode("utf-8", errors="replace")
    return subprocess.CompletedProcess(command, process.returncode, text, "")


def config_flags(course: Path, database: Path) -> list[str]:
    return [f"--CourseDirectory.root={course}", f"--CourseDirectory.course_id={COURSE_ID}",
            f"--CourseDirectory.db_url=sqlite:///{database}"]


def source_notebook(chapter: Path) -> nbformat.NotebookNode:
    """The instructor's chapter as nbgrader's source notebook: every output cleared."""
    notebook = read_chapter(chapter)
    for cell in notebook.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    return notebook


def generate(chapters: list[Path], course: Path, database: Path) -> dict[str, Path]:
    """Put the chapters in `course` as assignments and run `nbgrader generate_assignment`.

    Returns each chapter's released student notebook. nbgrader checks the metadata here:
    a solution region outside a solution cell, or a duplicate grade id, stops it with its
    own message, which is raised.
    """
    released = {}
    for chapter in chapters:
        folder = course / "source" / chapter.stem
        folder.mkdir(parents=True, exist_ok=True)
        nbformat.write(source_notebook(chapter), folder / f"{chapter.stem}.ipynb")
        result = nbgrader("generate_assignment", chapter.stem, "--force",
                          *config_flags(course, database), cwd=course, timeout=600)
        student_copy = course / "release" / chapter.stem / f"{chapter.stem}.ipynb"
        if result.returncode != 0 or not student_copy.exists():
            raise RuntimeError(f"nbgrader generate_assignment {chapter.stem} failed:\n"
                               f"{result.stdout[-2000:]}{result.stderr[-2000:]}")
        released[chapter.stem] = student_copy
    return released
