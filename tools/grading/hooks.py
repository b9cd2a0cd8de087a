"""Three nbgrader preprocessors that `make grade` puts in place of and around nbgrader's
own execution.

nbgrader scores a tests cell from its outputs: an error or *anything on stderr* scores 0, a
number as the cell's result scores that fraction, anything else scores the point. Two
consequences hurt a grader who runs students' code:

* an honest answer that prints a warning (stderr) loses the point;
* a student's hook that makes every cell show a result of `1` earns points for wrong
  answers, and one that turns later cells into `pass` makes the tests never run.

`MarkTests` runs before execution: it appends to every tests cell a line printing a token
that is new for each grading run, and runs the tests with Python's own builtins: a name the
student's cells gave to something else (`all = [...]`, `type = ...`) is set aside while the
tests run and put back after, so an honest variable named `all` costs nothing and a
redefined `abs` fools no test. `JudgeTests` runs after execution: a tests cell that does
not print its token did not run as written and scores 0, flagged for review by hand; of the
rest, errors count (stderr and results are set aside, because no tests cell of the book
returns a score), and then the verdict: the answers the hidden tests recorded must match
the reference solution's on every case (tools/grading/verdicts.py), or the cell scores 0
with an error of the grader's, its reason written where only the grader writes.
`BoundedExecute` is nbgrader's execution keeping at most MAX_OUTPUT_CHARS of output per
cell: a cell that prints gigabytes would otherwise fill the grader's memory (nbgrader's
own LimitOutput counts lines, after the fact).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from nbconvert.preprocessors import Preprocessor
from nbformat.v4 import new_output
from nbgrader.preprocessors import Execute

from bertbook.exercise_cases import ANSWERS_VARIABLE, SEED_VARIABLE
from tools.grading import verdicts
from tools.grading.exercises import grade_id_of, parse_grade_id

TOKEN_VARIABLE = "BERTBOOK_GRADING_TOKEN"  # the grader puts the run's token here
REFERENCE_VARIABLE = "BERTBOOK_REFERENCE"  # the grader's file of reference outcomes
VERDICTS_VARIABLE = "BERTBOOK_VERDICTS"  # where JudgeTests writes why an exercise failed
MAX_OUTPUT_CHARS = 200_000
NOT_AS_WRITTEN = ("the tests cell did not run as written (something changed how cells "
                  "run); review by hand")


def _tests_grade_id(cell) -> str | None:
    """The grade id of a tests cell (None for any other cell)."""
    grade_id = grade_id_of(cell)
    parsed = parse_grade_id(grade_id)
    is_tests = cell.cell_type == "code" and parsed is not None and parsed[1] == "tests"
    return grade_id if is_tests else None


def _proof(grade_id: str) -> str:
    """What a tests cell prints when it ran to its end: the run's token and its grade id."""
    return f"{os.environ[TOKEN_VARIABLE]}:{grade_id}"


def _proof_line(grade_id: str) -> str:
    return f"\nprint({_proof(grade_id)!r})"


# The tests, run by exec in the cell's own globals with every global that hides a builtin
# set aside; reached through `builtins` itself, which an import finds whatever the cell's
# globals hold.
WITH_BUILTINS = """import builtins as _grading
_grading_kept = {{_name: _grading.globals().pop(_name) for _name in _grading.list(
    _grading.globals()) if not _name.startswith("_") and _grading.hasattr(_grading, _name)}}
try:
    _grading.exec(_grading.compile({source!r}, "<tests>", "exec"), _grading.globals())
finally:
    _grading.globals().update(_grading_kept)"""
ORIGINAL = "bertbook_tests_source"  # where the tests cell's own source waits meanwhile


class MarkTests(Preprocessor):
    """Run every tests cell with the builtins, then print the proof line."""

    enabled = True  # nbconvert runs a preprocessor only when it is enabled

    def preprocess_cell(self, cell, resources, index):
        grade_id = _tests_grade_id(cell)
        if grade_id:
            cell.metadata[ORIGINAL] = cell.source
            cell.source = WITH_BUILTINS.format(source=cell.source) + _proof_line(grade_id)
        return cell, resources


class JudgeTests(Preprocessor):
    """Keep what a tests cell's score should rest on: its errors, or the proof it ran."""

    enabled = True

    def preprocess_cell(self, cell, resources, index):
        grade_id = _tests_grade_id(cell)
        if not grade_id:
            return cell, resources
        cell.source = cell.metadata.pop(ORIGINAL, cell.source)
        errors = [out for out in cell.outputs if out.output_type == "error"]
        printed = "".join(out.get("text", "") for out in cell.outputs
                          if out.output_type == "stream" and out.name == "stdout")
        if errors:
            cell.outputs = errors[:1]
        elif _proof(grade_id) not in printed.split("\n"):
            cell.outputs = [new_output("error", ename="NotRunAsWritten", evalue=NOT_AS_WRITTEN,
                                       traceback=[])]
        else:
            verdict = self._verdict(parse_grade_id(grade_id)[0])
            kept = printed.replace(_proof(grade_id) + "\n", "")
            cell.outputs = [_stdout(kept)] if kept.strip() else []
            if verdict:
                cell.outputs = [new_output("error", ename="WrongAnswer", evalue="",
                                           traceback=[])]
        return cell, resources

    def _verdict(self, exercise: str) -> verdicts.Verdict | None:
        """The comparison with the reference, its reason saved to the grader's own file."""
        if REFERENCE_VARIABLE not in os.environ:
            return None  # nbgrader run by hand, outside `make grade`: no reference here
        if not hasattr(self, "_reference"):
            with open(os.environ[REFERENCE_VARIABLE]) as handle:
                self._reference = json.load(handle)
        verdict = verdicts.judge(exercise, self._reference[exercise],
                                 Path(os.environ[ANSWERS_VARIABLE]),
                                 int(os.environ[SEED_VARIABLE]))
        if verdict:
            saved = Path(os.environ[VERDICTS_VARIABLE])
            found = json.loads(saved.read_text()) if saved.exists() else {}
            found[exercise] = [verdict.reason, verdict.student_text]
            saved.write_text(json.dumps(found))
        return verdict


def _stdout(text: str):
    return new_output("stream", name="stdout", text=text)


class BoundedExecute(Execute):
    """nbgrader's Execute, dropping a cell's output past MAX_OUTPUT_CHARS (errors are kept,
    cut short, since they decide the score)."""

    def output(self, outs, msg, display_id, cell_index):
        sizes = self.__dict__.setdefault("_output_chars", {})
        if msg["msg_type"] == "error":
            content = msg["content"]
            content["evalue"] = str(content.get("evalue", ""))[:2000]
            content["traceback"] = list(content.get("traceback", []))[-20:]
            return super().output(outs, msg, display_id, cell_index)
        sizes[cell_index] = sizes.get(cell_index, 0) + len(json.dumps(msg["content"]))
        if sizes[cell_index] > MAX_OUTPUT_CHARS:
            cut_note = f"[output cut: more than {MAX_OUTPUT_CHARS:,} characters]\n"
            if not any(out.get("text") == cut_note for out in outs):
                outs.append(_stdout(cut_note))
            return None
        return super().output(outs, msg, display_id, cell_index)
