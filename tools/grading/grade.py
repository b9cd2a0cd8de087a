"""Grade a folder of student notebooks with nbgrader: `make grade SUBMISSIONS=folder`.

Layout: SUBMISSIONS/<student>/<NN_chapter>.ipynb (the copies `make student` wrote, worked
on). nbgrader scores them (`nbgrader autograde`): its tests cells are put back as the
instructor wrote them, hidden tests included, and each scores its point when it runs
without an error. What this script adds, and why:

* **Least privilege.** Each submission is graded alone, in a throwaway nbgrader course with
  its own gradebook, by a kernel in a sandbox (tools/grading/sandbox.py): a fresh
  unprivileged uid even when you are root, a file system of Python and the book's library
  only (read-only), no network, limits on memory, processes, files and time, and a process
  namespace killed with the notebook. So no submission can change or read the
  instructor's files, another student's score, or the machine.
* **Verdicts the student's code cannot reach.** The kernel only computes: the hidden tests
  record the student's answers on the exercise's cases, fixed ones and ones drawn from a
  seed picked for this batch (bertbook/exercise_cases.py), as plain JSON. The grader
  compares them, in its own process, with the reference solution's answers on the same
  cases, computed in a fresh process (tools/grading/verdicts.py). So a redefined builtin, a
  patched module or a look-alike object passes nothing, nor does an answer that hard-codes
  the published cases.
* **Tests that tampering cannot skip.** Every cell the student added or changed is read for
  the kernel's machinery (flagged for review by hand); a tests cell must print a token that
  is new for each run, or it did not run as written (tools/grading/hooks.py); errors fail
  it, a warning on stderr does not, and a result a hook injects scores nothing.
* **A batch that always finishes.** nbgrader interrupts a cell after the time limit; a
  kernel that dies, hits a limit or cannot be interrupted makes nbgrader give up on the
  whole notebook, so here that answer is replaced by its stub (scoring 0, with the reason)
  and the notebook graded again. A notebook has a wall-clock limit too.
* **One row per exercise** in a CSV, with the reason for every lost point in the grader's
  words; written exercises are listed for grading by hand; the instructor's own copy (what
  the Colab badge opens) is recognised and scored 0 with a message saying so; links,
  FIFOs and oversized files are refused by name (tools/grading/intake.py).

    python tools/grading/grade.py SUBMISSIONS [--out grades.csv] [--cell-timeout 60]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import nbformat

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bertbook.exercise_cases import ANSWERS_VARIABLE, SEED_VARIABLE
from bertbook.package_data import cache_dir
from bertbook.runs import CACHE_VARIABLE
from tools.chapters import ROOT, chapter_sources, read_chapter
from tools.grading import cgroups, intake, sandbox
from tools.grading.course import COURSE_ID, config_flags, generate, nbgrader
from tools.grading.exercises import exercise_cells, grade_id_of, parse_grade_id
from tools.grading.hooks import (
    NOT_AS_WRITTEN,
    REFERENCE_VARIABLE,
    TOKEN_VARIABLE,
    VERDICTS_VARIABLE,
)
from tools.grading.verdicts import reference_answers

# reason: always the grader's own words. review: "yes" where a person should look.
# student_text: text the student's work controls (an error's message, a written answer),
# bounded and kept apart, so nothing a submission prints can pass for the grader's words.
FIELDS = ["student", "chapter", "exercise", "points", "max_points", "reason", "review",
          "student_text"]
CODE_STUB = "# YOUR CODE HERE\nraise NotImplementedError()"  # what nbgrader's stub says
NOT_FOUND = "answer cell not found (was its cell deleted?)"
INSTRUCTOR_COPY = ("this is the instructor's copy of the chapter (solutions included, as the "
                   "Colab badge opens it); hand out the copies `make student` writes")
REVIEW = "review by hand: {where} uses {names}"
# What a grading kernel may read besides Python: the book's library and its data.
LIBRARY = [ROOT / "bertlib", ROOT / "bertbook", ROOT / "data"]
# Each submission has a course of its own, where the student is always this one: nbgrader
# reads a student id as a file pattern, and a folder name is the student's to choose.
NBGRADER_STUDENT = "student"
EXCEPTION_NAME = re.compile(r"[A-Za-z_][\w.]{0,60}")
# The only notes the sandbox writes when it stops a kernel (sandbox._stop); the file lies in
# the folder the kernel shares, so any other text in it was not written by the sandbox.
SANDBOX_NOTE = re.compile(r"(wall-clock limit: \d+ s|disk limit: more than \d+ MB written|"
                          r"file limit: more than \d+ files and folders)")
GRADER_ERROR = "the grader could not grade this notebook ({name}); review by hand"
NO_LAYOUT = ("no notebooks found in {folder}. Expected one folder per student, each holding "
             "the chapters' notebooks (SUBMISSIONS/<student>/05_masking.ipynb), or nbgrader's "
             "layout (SUBMISSIONS/submitted/<student>/<assignment>/05_masking.ipynb)")
FLAT_FOLDER = ("{folder} holds notebooks directly ({names}), so whose each is cannot be told. "
               "Put each student's notebooks in a folder named after the student "
               "(SUBMISSIONS/<student>/05_masking.ipynb) and grade again")


@dataclass
class Row:
    student: str
    chapter: str
    exercise: str
    points: float | str
    max_points: float | str
    reason: str
    review: str = ""  # "yes": a person should look
    student_text: str = ""


@dataclass
class Graded:
    """nbgrader graded the notebook: points and reasons per code exercise."""

    scores: dict[str, float]
    reasons: dict[str, tuple[str, str]]  # (the grader's words, the student's message)


@dataclass
class Stopped:
    """nbgrader gave up on the notebook while `exercise` was running (None: elsewhere)."""

    exercise: str | None
    why: tuple[str, str]  # (the grader's words, text the student's code wrote)


@dataclass
class Submission:
    """One student's notebook of the Grader's chapter."""

    student: str
    notebook: nbformat.NotebookNode


@dataclass
class Settings:
    """How a batch is graded: time limits, isolation, network."""

    cell_timeout: int = 60
    notebook_timeout: int = 1800
    isolate: bool = True
    network: bool = False


def answers_by_exercise(notebook: nbformat.NotebookNode) -> dict[str, str]:
    """Exercise -> source of the submission's code answer cell, found by nbgrader's grade id
    (the first copy, as `intake.repaired` grades it)."""
    found: dict[str, str] = {}
    for cell in notebook.cells:
        parsed = parse_grade_id(grade_id_of(cell))
        if parsed and parsed[1] == "answer":
            found.setdefault(parsed[0], cell.source)
    return found


def excerpt(text: str, limit: int) -> str:
    """A bounded, one-line, printable excerpt of text the student's code controls."""
    flat = " ".join("".join(c if c.isprintable() else " " for c in text).split())
    return flat if len(flat) <= limit else flat[:limit - 1] + "…"


class Grader:
    """Grades one chapter's submissions, each in its own course."""

    def __init__(self, chapter: Path, settings: Settings):
        self.chapter, self.settings = chapter, settings
        self.items = exercise_cells(read_chapter(chapter))
        self.code = [i.exercise for i in self.items if i.role == "answer"]
        self.written = [i.exercise for i in self.items if i.role == "written"]
        self.template = Path(tempfile.mkdtemp(prefix="bertbook-gradebook-"))
        released = generate([chapter], self.template / "course",
                            self.template / "gradebook.db")
        self.release = nbformat.read(released[chapter.stem], as_version=4)
        # This batch's cases: drawn from a seed no student sees before grading starts.
        self.seed = secrets.randbits(62)
        self.reference = self.template / "reference.json"
        self.reference.write_text(json.dumps(reference_answers(chapter, self.seed)))

    def close(self) -> None:
        shutil.rmtree(self.template, ignore_errors=True)

    def rows(self, found: intake.Found) -> list[Row]:
        """The rows of one submitted notebook, and its total. Anything that goes wrong in
        grading it (a notebook the parser chokes on, a grader bug) is this student's row, to
        review by hand: the batch goes on."""
        try:
            rows = self._graded_rows(found)
        except Exception as error:  # noqa: BLE001 - RecursionError, MemoryError, anything
            reason = GRADER_ERROR.format(name=type(error).__name__)
            rows = [Row(found.student, self.chapter.stem, e, 0.0, 1.0, reason, "yes")
                    for e in self.code]
        return rows + [self._total(found.student, rows)]

    def _total(self, student: str, rows: list[Row]) -> Row:
        scored = [row for row in rows if isinstance(row.points, float)]
        pending = len(rows) - len(scored)
        reason = f"plus {pending} written, graded by hand" if pending else "all graded"
        return Row(student, self.chapter.stem, "total", sum(r.points for r in scored),
                   float(len(scored)), reason, "yes" if any(r.review for r in rows) else "")

    def _graded_rows(self, found: intake.Found) -> list[Row]:
        if found.refused:
            return self._all_zero(found.student, found.refused)
        try:
            notebook = intake.parse_notebook(intake.read_bounded(found.path))
        except OSError:
            notebook = "refused: the file could not be read as a regular file"
        if isinstance(notebook, str):
            return self._all_zero(found.student, notebook)
        answers = answers_by_exercise(notebook)
        if intake.is_instructor_copy(answers):
            return self._all_zero(found.student, INSTRUCTOR_COPY)
        notebook, notes = intake.repaired(notebook, self.release)
        scores, reasons = self._autograde(Submission(found.student, notebook))
        flags = {where: intake.machinery_used(source)
                 for where, source in intake.changed_code(notebook, self.release)}
        flags = {where: names for where, names in flags.items() if names}
        rows = []
        for exercise in self.code:
            points = scores.get(exercise, 0.0) if exercise in answers else 0.0
            text = ""
            if exercise not in answers:
                reason = NOT_FOUND
            elif points:  # a point scored means the tests passed, whatever else printed
                reason = "ok"
            else:
                reason, text = reasons.get(exercise, ("ok", ""))
            for where, names in flags.items():
                if where == f"answer {exercise}" or not where.startswith("answer"):
                    reason += "; " + REVIEW.format(where=where, names=", ".join(names[:6]))
            review = "yes" if "review by hand" in reason else ""  # the grader's words only
            rows.append(Row(found.student, self.chapter.stem, exercise, points, 1.0,
                            "; ".join([reason, *notes, *found.notes]), review, text))
        written = written_answers(notebook)
        rows += [Row(found.student, self.chapter.stem, e, "", 1.0, "written: graded by hand",
                     "", excerpt(written.get(e, ""), 300)) for e in self.written]
        return sorted(rows, key=lambda row: tuple(map(int, row.exercise.split("."))))

    def _all_zero(self, student: str, reason: str) -> list[Row]:
        return [Row(student, self.chapter.stem, e, 0.0, 1.0, reason) for e in self.code]

    def _autograde(self, submission: Submission
                   ) -> tuple[dict[str, float], dict[str, tuple[str, str]]]:
        """Scores and reasons per code exercise, replacing answers that kill the kernel.
        The notebook has one wall-clock budget for all its runs: a rerun gets what is left."""
        stubbed: dict[str, tuple[str, str]] = {}
        deadline = time.monotonic() + self.settings.notebook_timeout
        while True:
            seconds = int(deadline - time.monotonic())
            outcome = (self._autograde_once(submission, stubbed, seconds) if seconds > 0 else
                       Stopped(None, (self._over_time, "")))
            if isinstance(outcome, Graded):
                return outcome.scores, {**outcome.reasons, **stubbed}
            if outcome.exercise is None or outcome.exercise in stubbed:
                return {}, {e: outcome.why for e in self.code}
            stubbed[outcome.exercise] = outcome.why

    @property
    def _over_time(self) -> str:
        return f"wall-clock limit: the notebook ran more than {self.settings.notebook_timeout} s"

    def _autograde_once(self, submission: Submission, stubbed: dict[str, str], seconds: int
                        ) -> Graded | Stopped:
        """One nbgrader run in a fresh course, with the `stubbed` answers replaced, in at
        most `seconds`."""
        base = Path(tempfile.mkdtemp(prefix="bertbook-grading-"))
        limits = sandbox.Limits(seconds=seconds)
        group = (cgroups.ControlGroup.create(limits.memory_mb, limits.processes, limits.cpus)
                 if self.settings.isolate else None)
        try:
            course, private = base / "course", base / "private"
            for folder in (course / "runtime", private, base / "root"):
                folder.mkdir(parents=True)
            shutil.copy(self.template / "gradebook.db", private / "gradebook.db")
            notebook = _with_stubs(submission.notebook, stubbed)
            target = course / "submitted" / NBGRADER_STUDENT / self.chapter.stem
            target.mkdir(parents=True)
            nbformat.write(notebook, target / f"{self.chapter.stem}.ipynb")
            try:
                result = self._run_autograde(base, limits, group)
            except subprocess.TimeoutExpired:
                return Stopped(None, (self._over_time, ""))
            scores = self._scores(private / "gradebook.db")
            graded = course / "autograded" / NBGRADER_STUDENT / self.chapter.stem
            if scores is None or not graded.exists():
                return self._what_stopped(base, result.stdout + result.stderr, group)
            return Graded(scores, self._reasons(graded / f"{self.chapter.stem}.ipynb",
                                                private / "verdicts.json"))
        finally:
            if group:
                group.remove()
            shutil.rmtree(base, ignore_errors=True)

    def _run_autograde(self, base: Path, limits: sandbox.Limits,
                       group: cgroups.ControlGroup | None) -> subprocess.CompletedProcess[str]:
        course, private = base / "course", base / "private"
        shared = course / "runtime"  # the sandbox shows it to the kernel at the same path
        kernel_env = {"BERT_BOOK_SIZE": "smoke", "MPLBACKEND": "Agg",
                      "BERT_BOOK_RUNS": f"{sandbox.HOME}/runs", SEED_VARIABLE: str(self.seed),
                      ANSWERS_VARIABLE: str(shared),
                      CACHE_VARIABLE: str(cache_dir())}  # the cache warm_data_cache built
        _write_kernelspec(private / "jupyter", self._kernel_argv(base, kernel_env, limits, group),
                          kernel_env)
        (private / "nbgrader_config.py").write_text(_CONFIG.format(
            root=json.dumps(str(ROOT)), progress=json.dumps(str(private / "progress.txt")),
            transport=json.dumps("ipc" if self._sealed_off else "tcp"),
            connection=json.dumps(str(shared / "kernel.json"))))
        env = {**os.environ, "JUPYTER_PATH": str(private / "jupyter"),
               "JUPYTER_RUNTIME_DIR": str(shared), "BERT_BOOK_SIZE": "smoke",
               TOKEN_VARIABLE: secrets.token_hex(16), REFERENCE_VARIABLE: str(self.reference),
               SEED_VARIABLE: str(self.seed), ANSWERS_VARIABLE: str(shared),
               VERDICTS_VARIABLE: str(private / "verdicts.json")}
        return nbgrader("autograde", self.chapter.stem, f"--student={NBGRADER_STUDENT}", "--force",
                        f"--BoundedExecute.timeout={self.settings.cell_timeout}",
                        *config_flags(course, private / "gradebook.db"),
                        cwd=private, env=env, timeout=limits.seconds + 60)  # 60: nbgrader's start

    @property
    def _sealed_off(self) -> bool:
        """The kernel has no network: Jupyter's messages go through files (ipc), not TCP."""
        return self.settings.isolate and not self.settings.network

    def _kernel_argv(self, base: Path, env: dict[str, str], limits: sandbox.Limits,
                     group: cgroups.ControlGroup | None) -> list[str]:
        kernel = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
        if not self.settings.isolate:
            return kernel
        return sandbox.command(base / "course" / "runtime", base / "root",
                               [*sandbox.python_paths(), *LIBRARY, cache_dir()], kernel,
                               env, limits,
                               network=self.settings.network,
                               cgroup=group.folders if group else ())

    def _scores(self, database: Path) -> dict[str, float] | None:
        """Points per code exercise from nbgrader's gradebook, or None if nothing was graded."""
        from nbgrader.api import Gradebook, MissingEntry

        with Gradebook(f"sqlite:///{database}", COURSE_ID) as gradebook:
            try:
                graded = gradebook.find_submission_notebook(self.chapter.stem,
                                                            self.chapter.stem,
                                                            NBGRADER_STUDENT)
            except MissingEntry:
                return None
            scores = {}
            for grade in graded.grades:
                parsed = parse_grade_id(grade.name)
                if parsed and parsed[1] == "tests":
                    scores[parsed[0]] = float(grade.score or 0.0)
            return scores

    def _reasons(self, graded: Path, verdicts: Path) -> dict[str, tuple[str, str]]:
        """Exercise -> why it lost its point: the verdict JudgeTests wrote, else the first
        error in its answer or tests cell, from the graded notebook (the grader's words, the
        error's own message)."""
        reasons: dict[str, tuple[str, str]] = {}
        if verdicts.exists():
            reasons.update({e: (r, t) for e, (r, t) in json.loads(verdicts.read_text()).items()})
        for cell in nbformat.read(graded, as_version=4).cells:
            parsed = parse_grade_id(grade_id_of(cell))
            error = _first_error(cell, self.settings.cell_timeout)
            if parsed and parsed[1] in ("answer", "tests") and error:
                reasons.setdefault(parsed[0], (f"{parsed[1]} cell: {error[0]}", error[1]))
        return reasons

    def _what_stopped(self, base: Path, log: str, group: cgroups.ControlGroup | None
                      ) -> Stopped:
        progress = base / "private" / "progress.txt"
        started = progress.read_text().split() if progress.exists() else []
        parsed = parse_grade_id(started[-1]) if started else None
        limit = base / "course" / "runtime" / sandbox.LIMIT_FILE
        note = limit.read_text(errors="replace")[:200].strip() \
            if limit.is_file() and not limit.is_symlink() else ""
        if group and group.memory_kills():  # read from the kernel, not from the student
            why = ("the sandbox stopped it at its memory limit: "
                   f"{sandbox.Limits().memory_mb} MB for all its processes together")
        elif SANDBOX_NOTE.fullmatch(note):
            why = f"the sandbox stopped it at its {note}"
        elif note:  # the kernel can write that file too: not the sandbox's words
            why = "the kernel stopped and left a note the sandbox never writes: review by hand"
        elif "unresponsive" in log:
            why = "Timeout: the kernel could not be interrupted (an endless loop?)"
        elif "DeadKernelError" in log or "Kernel died" in log:
            why = "the kernel died (the answer crashed Python or hit a memory limit)"
        else:
            last = log.strip().splitlines()[-1] if log.strip() else "no message"
            why = f"nbgrader could not grade it: {excerpt(last, 160)}"
        running = parsed[0] if parsed and parsed[1] in ("answer", "tests") else None
        return Stopped(running, (why, excerpt(note, 160) if note else ""))


# nbgrader reads this from its working folder. The hook records which cell is running, so a
# kernel that dies can be traced to its exercise; hooks.py's two preprocessors surround
# nbgrader's execution (see there why).
_CONFIG = """\
import sys
sys.path.insert(0, {root})
from nbconvert.preprocessors import ClearMetadataPreprocessor
from nbgrader.preprocessors import (AssignLatePenalties, CheckCellMetadata, IgnorePattern,
                                    LimitOutput, SaveAutoGrades)
from tools.grading.hooks import BoundedExecute, JudgeTests, MarkTests


def _started(cell, cell_index, **_):
    grade_id = cell.metadata.get("nbgrader", {{}}).get("grade_id", "-")
    with open({progress}, "a") as progress:
        progress.write(grade_id + "\\n")


c = get_config()  # noqa: F821
c.BoundedExecute.on_cell_execute = _started
c.KernelManager.transport = {transport}
c.KernelManager.connection_file = {connection}  # in the folder the sandbox shares
c.Autograde.autograde_preprocessors = [
    MarkTests, BoundedExecute, JudgeTests, IgnorePattern, ClearMetadataPreprocessor, LimitOutput,
    SaveAutoGrades, AssignLatePenalties, CheckCellMetadata]
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


def _first_error(cell: nbformat.NotebookNode, cell_timeout: int) -> tuple[str, str] | None:
    """The cell's first error: (the grader's words, with the exception's name; a bounded,
    sanitised excerpt of its message, which the student's code writes)."""
    for output in cell.get("outputs", []):
        if output.get("output_type") != "error":
            continue
        name = output.get("ename", "")
        if name in ("KeyboardInterrupt", "CellTimeoutError"):
            return f"Timeout: interrupted after {cell_timeout} s (an endless loop?)", ""
        if name == "NotRunAsWritten":  # JudgeTests' verdict (a student raising it loses)
            return NOT_AS_WRITTEN, ""
        name = name if EXCEPTION_NAME.fullmatch(name) else "an error"
        return name, excerpt(str(output.get("evalue", "")), 160)
    return None


def written_answers(notebook: nbformat.NotebookNode) -> dict[str, str]:
    """Exercise -> the text of the student's written answer (nbgrader's markdown cell)."""
    found: dict[str, str] = {}
    for cell in notebook.cells:
        parsed = parse_grade_id(grade_id_of(cell))
        if parsed and parsed[1] == "written" and cell.cell_type == "markdown":
            found.setdefault(parsed[0], cell.source)
    return found


def grade_folder(submissions: Path, cell_timeout: int = 60, isolate: bool = True,
                 network: bool = False, notebook_timeout: int = 1800,
                 on_rows: Callable[[list[Row]], None] = lambda rows: None) -> list[Row]:
    """Every row for every submission under `submissions`, in a fixed order; `on_rows`
    gets each student's rows as soon as they are graded. intake.LayoutError where the
    folder is in no layout the grader reads."""
    settings = Settings(cell_timeout, notebook_timeout, isolate, network)
    chapters = {path.stem for path in chapter_sources(ROOT)}
    folders = intake.submission_folders(submissions)
    warm_data_cache()
    rows, graders = [], {}
    try:
        for student, folder in folders:
            found, unknown = intake.chapter_files(folder, chapters, student)
            theirs = [Row(student, name, "", 0, 0, "no such chapter") for name in unknown]
            for item in found:
                if item.chapter not in graders:
                    graders[item.chapter] = Grader(
                        ROOT / "chapters" / f"{item.chapter}.py", settings)
                print(f"grading {student}/{item.path.name}", flush=True)
                theirs += graders[item.chapter].rows(item)
            on_rows(theirs)
            rows += theirs
    finally:
        for grader in graders.values():
            grader.close()
    return rows


def warm_data_cache() -> None:
    """Build the text the chapters derive from the data packages (bertbook's cache) here,
    where data/ is writable: the sandbox shows data/ read-only, and on a fresh clone every
    kernel would otherwise parse the corpus again, once per student."""
    from bertbook.corpora import wikipedia_articles
    from bertbook.datasets import wikipedia_links

    wikipedia_articles()
    wikipedia_links()


def spreadsheet_safe(value: object) -> object:
    """A text a spreadsheet would read as a formula (=, +, -, @ first) is quoted."""
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + value
    return value


def write_csv(rows: list[Row], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(FIELDS)
        append_rows(writer, rows)


def append_rows(writer, rows: list[Row]) -> None:
    writer.writerows([spreadsheet_safe(getattr(row, f)) for f in FIELDS] for row in rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Grade student notebooks into a CSV.")
    parser.add_argument("submissions", type=Path)
    parser.add_argument("--out", type=Path, default=ROOT / "_build" / "grades.csv")
    parser.add_argument("--cell-timeout", type=int, default=60)
    parser.add_argument("--notebook-timeout", type=int, default=1800,
                        help="wall-clock seconds for one notebook, every cell together")
    parser.add_argument("--allow-network", action="store_true",
                        help="let students' code reach the network (off by default)")
    parser.add_argument("--no-isolation", action="store_true",
                        help="run students' code unconfined (only for code you trust)")
    args = parser.parse_args(argv)
    if not args.submissions.is_dir():
        parser.error(f"{args.submissions} is not a folder of student folders")
    if not args.no_isolation and not sandbox.available():
        parser.error("this machine does not allow the namespaces grading uses to keep "
                     "students' code away from your files. Grade in a Linux container "
                     "or VM (INSTRUCTORS.md shows how), or pass --no-isolation for code "
                     "you trust")
    # A batch stopped with SIGTERM (a course server's shutdown, `timeout`) still removes
    # its temporary courses, which hold the instructor's notebooks and gradebooks.
    signal.signal(signal.SIGTERM, lambda number, frame: sys.exit(128 + number))
    # Rows go to <out>.partial as each student is graded, so a batch stopped halfway keeps
    # what finished; the last grades.csv is replaced only by a batch that graded someone.
    partial = args.out.with_name(args.out.name + ".partial")
    write_csv([], partial)
    with open(partial, "a", newline="") as handle:
        writer = csv.writer(handle)

        def save(rows: list[Row]) -> None:
            append_rows(writer, rows)
            handle.flush()

        try:
            rows = grade_folder(args.submissions, args.cell_timeout, not args.no_isolation,
                                args.allow_network, args.notebook_timeout, on_rows=save)
        except intake.LayoutError as error:  # notebooks loose in the folder: whose?
            partial.unlink()
            parser.error(FLAT_FOLDER.format(folder=args.submissions, names=error.args[0]))
    if not rows:
        partial.unlink()
        print(NO_LAYOUT.format(folder=args.submissions) + f"; {args.out} is left as it was",
              file=sys.stderr)
        return 1
    os.replace(partial, args.out)
    print(f"wrote {len(rows)} rows to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
