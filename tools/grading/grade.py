"""Grade a folder of student notebooks with nbgrader: `make grade SUBMISSIONS=folder`.

Layout: SUBMISSIONS/<student>/<NN_chapter>.ipynb (the copies `make student` wrote, worked
on). nbgrader scores them (`nbgrader autograde`): its tests cells are put back as the
instructor wrote them, hidden tests included, and each scores its points when it runs
without an error. What this script adds, and why:

* **Isolation.** Each submission is graded alone, in a throwaway nbgrader course with its
  own gradebook, by a kernel in a sandbox (tools/grading/sandbox.py) that can write only to that
  course and cannot see the chapters, the other submissions or the gradebook. So no
  submission can change the instructor's files, another student's score, or its own
  score by any way but a right answer, and grades do not depend on the order.
* **A batch that always finishes.** nbgrader interrupts a cell after the time limit; a
  kernel that dies or cannot be interrupted makes nbgrader give up on the whole notebook,
  so here that answer is replaced by its stub (scoring 0, with the reason) and the notebook
  graded again. A file that is not a notebook scores 0.
* **One row per exercise** in a CSV, with the reason for every lost point; written
  exercises are listed for grading by hand; the instructor's own copy (what the Colab
  badge opens) is recognised and scored 0 with a message saying so; an answer that
  touches the grading machinery is flagged for a human to read.

    python tools/grading/grade.py SUBMISSIONS [--out grades.csv] [--cell-timeout 60]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import nbformat

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tools.chapters import ROOT, read_chapter
from tools.grading import sandbox
from tools.grading.course import COURSE_ID, config_flags, generate, nbgrader
from tools.grading.exercises import SOLUTION, exercise_cells, grade_id_of, parse_grade_id

FIELDS = ["student", "chapter", "exercise", "points", "max_points", "reason"]
CODE_STUB = "# YOUR CODE HERE\nraise NotImplementedError()"  # what nbgrader's stub says
NOT_FOUND = "answer cell not found (was its cell deleted?)"
INSTRUCTOR_COPY = ("this is the instructor's copy of the chapter (solutions included, as the "
                   "Colab badge opens it); hand out the copies `make student` writes")
# Names an honest answer has no reason to use; an answer that does is read by a human.
SUSPICIOUS = re.compile(r"\b(bertbook|checks|builtins|__builtins__|sys\.modules|importlib|"
                        r"__dict__|__class__|__eq__|get_ipython|setattr|gradebook|nbgrader)\b")


@dataclass
class Row:
    student: str
    chapter: str
    exercise: str
    points: float | str
    max_points: float | str
    reason: str


@dataclass
class Graded:
    """nbgrader graded the notebook: points and reasons per code exercise."""

    scores: dict[str, float]
    reasons: dict[str, str]


@dataclass
class Stopped:
    """nbgrader gave up on the notebook while `exercise` was running (None: elsewhere)."""

    exercise: str | None
    why: str


@dataclass
class Submission:
    """One student's notebook of the Grader's chapter."""

    student: str
    notebook: nbformat.NotebookNode


def answers_by_exercise(notebook: nbformat.NotebookNode) -> dict[str, str]:
    """Exercise -> source of the submission's code answer cell, found by nbgrader's grade id."""
    found = {}
    for cell in notebook.cells:
        parsed = parse_grade_id(grade_id_of(cell))
        if parsed and parsed[1] == "answer":
            found[parsed[0]] = cell.source
    return found


class Grader:
    """Grades one chapter's submissions, each in its own course, with one cell time limit."""

    def __init__(self, chapter: Path, submissions: Path, cell_timeout: int, isolate: bool):
        self.chapter, self.submissions = chapter, submissions.resolve()
        self.cell_timeout, self.isolate = cell_timeout, isolate
        self.items = exercise_cells(read_chapter(chapter))
        self.code = [i.exercise for i in self.items if i.role == "answer"]
        self.written = [i.exercise for i in self.items if i.role == "written"]
        self.template = Path(tempfile.mkdtemp(prefix="bertbook-gradebook-"))
        generate([chapter], self.template / "course", self.template / "gradebook.db")

    def close(self) -> None:
        shutil.rmtree(self.template, ignore_errors=True)

    def rows(self, student: str, path: Path) -> list[Row]:
        """The rows of one submitted notebook."""
        try:
            notebook = nbformat.read(path, as_version=4)
            nbformat.validate(notebook)
        except Exception as error:  # any unreadable file scores zero, with the reason
            return self._all_zero(student, f"not a valid notebook ({type(error).__name__}: "
                                           f"{str(error)[:120]})")
        answers = answers_by_exercise(notebook)
        if any(SOLUTION[0] in source for source in answers.values()):
            return self._all_zero(student, INSTRUCTOR_COPY)
        scores, reasons = self._autograde(Submission(student, notebook))
        rows = []
        for exercise in self.code:
            points = scores.get(exercise, 0.0) if exercise in answers else 0.0
            if exercise not in answers:
                reason = NOT_FOUND
            else:  # a point scored means the tests passed, whatever else printed an error
                reason = "ok" if points else reasons.get(exercise, "ok")
            if exercise in answers and SUSPICIOUS.search(answers[exercise]):
                reason += "; review by hand: the answer uses the grading machinery's names"
            rows.append(Row(student, self.chapter.stem, exercise, points, 1.0, reason))
        rows += [Row(student, self.chapter.stem, e, "", 1.0, "written: graded by hand")
                 for e in self.written]
        return sorted(rows, key=lambda row: tuple(map(int, row.exercise.split("."))))

    def _all_zero(self, student: str, reason: str) -> list[Row]:
        return [Row(student, self.chapter.stem, e, 0.0, 1.0, reason) for e in self.code]

    def _autograde(self, submission: Submission) -> tuple[dict[str, float], dict[str, str]]:
        """Scores and reasons per code exercise, replacing answers that kill the kernel."""
        stubbed: dict[str, str] = {}
        while True:
            outcome = self._autograde_once(submission, stubbed)
            if isinstance(outcome, Graded):
                return outcome.scores, {**outcome.reasons, **stubbed}
            if outcome.exercise is None or outcome.exercise in stubbed:
                return {}, {e: outcome.why for e in self.code}
            stubbed[outcome.exercise] = outcome.why

    def _autograde_once(self, submission: Submission, stubbed: dict[str, str]
                        ) -> Graded | Stopped:
        """One nbgrader run in a fresh course, with the `stubbed` answers replaced."""
        base = Path(tempfile.mkdtemp(prefix="bertbook-grading-"))
        try:
            course, private = base / "course", base / "private"
            course.mkdir()
            private.mkdir()
            shutil.copy(self.template / "gradebook.db", private / "gradebook.db")
            notebook = _with_stubs(submission.notebook, stubbed)
            target = course / "submitted" / submission.student / self.chapter.stem
            target.mkdir(parents=True)
            nbformat.write(notebook, target / f"{self.chapter.stem}.ipynb")
            result = self._run_autograde(course, private, submission.student)
            scores = self._scores(private / "gradebook.db", submission.student)
            graded = course / "autograded" / submission.student / self.chapter.stem
            if scores is None or not graded.exists():
                return self._what_stopped(private, result.stdout + result.stderr)
            return Graded(scores, self._reasons(graded / f"{self.chapter.stem}.ipynb"))
        finally:
            shutil.rmtree(base, ignore_errors=True)

    def _run_autograde(self, course: Path, private: Path, student: str):
        (course / "home").mkdir()
        (course / "tmp").mkdir()
        _write_kernelspec(private / "jupyter", self._kernel_argv(course, private),
                          {"BERT_BOOK_SIZE": "smoke", "HOME": str(course / "home"),
                           "TMPDIR": str(course / "tmp"), "MPLBACKEND": "Agg",
                           # the chapters' training runs, in this throwaway course: the
                           # kernel's working folder is read-only in the sandbox
                           "BERT_BOOK_RUNS": str(course / "runs")})
        (private / "nbgrader_config.py").write_text(_CONFIG.format(
            progress=json.dumps(str(private / "progress.txt"))))
        env = {**os.environ, "JUPYTER_PATH": str(private / "jupyter"),
               "JUPYTER_RUNTIME_DIR": str(course / "runtime"), "BERT_BOOK_SIZE": "smoke"}
        return nbgrader("autograde", self.chapter.stem, f"--student={student}", "--force",
                        f"--Execute.timeout={self.cell_timeout}",
                        *config_flags(course, private / "gradebook.db"),
                        cwd=private, env=env)

    def _kernel_argv(self, course: Path, private: Path) -> list[str]:
        kernel = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
        if not self.isolate:
            return kernel
        hidden = [ROOT / "chapters", private, self.submissions, self.template]
        return sandbox.command(course, hidden, kernel)

    def _scores(self, database: Path, student: str) -> dict[str, float] | None:
        """Points per code exercise from nbgrader's gradebook, or None if nothing was graded."""
        from nbgrader.api import Gradebook, MissingEntry

        with Gradebook(f"sqlite:///{database}", COURSE_ID) as gradebook:
            try:
                graded = gradebook.find_submission_notebook(self.chapter.stem,
                                                            self.chapter.stem, student)
            except MissingEntry:
                return None
            scores = {}
            for grade in graded.grades:
                parsed = parse_grade_id(grade.name)
                if parsed and parsed[1] == "tests":
                    scores[parsed[0]] = float(grade.score or 0.0)
            return scores

    def _reasons(self, graded: Path) -> dict[str, str]:
        """Exercise -> the first error in its answer or tests cell, from the graded notebook."""
        reasons: dict[str, str] = {}
        for cell in nbformat.read(graded, as_version=4).cells:
            parsed = parse_grade_id(grade_id_of(cell))
            error = _first_error(cell, self.cell_timeout)
            if parsed and parsed[1] in ("answer", "tests") and error:
                reasons.setdefault(parsed[0], f"{parsed[1]} cell: {error}")
        return reasons

    def _what_stopped(self, private: Path, log: str) -> Stopped:
        progress = private / "progress.txt"
        started = progress.read_text().split() if progress.exists() else []
        parsed = parse_grade_id(started[-1]) if started else None
        if "unresponsive" in log:
            why = "Timeout: the kernel could not be interrupted (an endless loop?)"
        elif "DeadKernelError" in log or "Kernel died" in log:
            why = "the kernel died (the answer crashed Python)"
        else:
            why = f"nbgrader could not grade it: {log.strip().splitlines()[-1][:200]}"
        running = parsed[0] if parsed and parsed[1] in ("answer", "tests") else None
        return Stopped(running, why)


# nbgrader reads this from its working folder; the hook records which cell is running, so a
# kernel that dies can be traced to its exercise.
_CONFIG = """\
def _started(cell, cell_index, **_):
    grade_id = cell.metadata.get("nbgrader", {{}}).get("grade_id", "-")
    with open({progress}, "a") as progress:
        progress.write(grade_id + "\\n")


c = get_config()  # noqa: F821
c.Execute.on_cell_execute = _started
"""


def _write_kernelspec(jupyter: Path, argv: list[str], env: dict[str, str]) -> None:
    """A `python3` kernel spec that takes precedence (JUPYTER_PATH) and runs `argv`."""
    folder = jupyter / "kernels" / "python3"
    folder.mkdir(parents=True)
    spec = {"argv": argv, "display_name": "Python 3 (grading)", "language": "python",
            "env": env}
    (folder / "kernel.json").write_text(json.dumps(spec, indent=1))


def _with_stubs(notebook: nbformat.NotebookNode, stubbed: dict[str, str]
                ) -> nbformat.NotebookNode:
    """A copy whose answers to the `stubbed` exercises are the unanswered stub."""
    copy = nbformat.from_dict(json.loads(json.dumps(notebook)))
    for cell in copy.cells:
        parsed = parse_grade_id(grade_id_of(cell))
        if parsed and parsed[1] == "answer" and parsed[0] in stubbed:
            cell.source = CODE_STUB
    return copy


def _first_error(cell: nbformat.NotebookNode, cell_timeout: int) -> str | None:
    for output in cell.get("outputs", []):
        if output.get("output_type") != "error":
            continue
        if output["ename"] in ("KeyboardInterrupt", "CellTimeoutError"):
            return f"Timeout: interrupted after {cell_timeout} s (an endless loop?)"
        return f"{output['ename']}: {output['evalue']}"[:300]
    return None


def grade_folder(submissions: Path, cell_timeout: int = 60, isolate: bool = True) -> list[Row]:
    """Every row for every submission under `submissions`, in a fixed order."""
    rows, graders = [], {}
    try:
        for student_dir in sorted(p for p in submissions.iterdir() if p.is_dir()):
            for path in sorted(student_dir.glob("*.ipynb")):
                chapter = ROOT / "chapters" / f"{path.stem}.py"
                if not chapter.exists():
                    rows.append(Row(student_dir.name, path.stem, "", 0, 0, "no such chapter"))
                    continue
                if path.stem not in graders:
                    graders[path.stem] = Grader(chapter, submissions, cell_timeout, isolate)
                print(f"grading {student_dir.name}/{path.name}", flush=True)
                rows += graders[path.stem].rows(student_dir.name, path)
    finally:
        for grader in graders.values():
            grader.close()
    return rows


def write_csv(rows: list[Row], out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(FIELDS)
        writer.writerows([getattr(row, f) for f in FIELDS] for row in rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Grade student notebooks into a CSV.")
    parser.add_argument("submissions", type=Path)
    parser.add_argument("--out", type=Path, default=ROOT / "_build" / "grades.csv")
    parser.add_argument("--cell-timeout", type=int, default=60)
    parser.add_argument("--no-isolation", action="store_true",
                        help="run students' code unconfined (only for code you trust)")
    args = parser.parse_args(argv)
    if not args.submissions.is_dir():
        parser.error(f"{args.submissions} is not a folder of student folders")
    if not args.no_isolation and not sandbox.available():
        parser.error("this machine does not allow user namespaces, which grading uses to "
                     "keep students' code away from your files. Grade in a Linux container "
                     "or VM (INSTRUCTORS.md shows how), or pass --no-isolation for code "
                     "you trust")
    rows = grade_folder(args.submissions, args.cell_timeout, isolate=not args.no_isolation)
    write_csv(rows, args.out)
    print(f"wrote {len(rows)} rows to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
