"""Three nbgrader preprocessors that `make grade` puts in place of and around nbgrader's
own execution.

nbgrader scores a tests cell from its outputs: an error or *anything on stderr* scores 0, a
number as the cell's result scores that fraction, anything else scores the point. Two
consequences hurt a grader who runs students' code:

* an honest answer that prints a warning (stderr) loses the point;
* a student's hook that makes every cell show a result of `1` earns points for wrong
  answers, and one that turns later cells into `pass` makes the tests never run.

`MarkTests` runs before execution: it appends to every tests cell a line printing a token
that is new for each grading run. `JudgeTests` runs after execution: a tests cell that does
not print its token did not run as written and scores 0, flagged for review by hand; of the
rest, only errors count (stderr and results are set aside), because no tests cell of the
book returns a score. `BoundedExecute` is nbgrader's execution keeping at most
MAX_OUTPUT_CHARS of output per cell: a cell that prints gigabytes would otherwise fill the
grader's memory (nbgrader's own LimitOutput counts lines, after the fact).
"""

from __future__ import annotations

import json
import os

from nbconvert.preprocessors import Preprocessor
from nbformat.v4 import new_output
from nbgrader.preprocessors import Execute

from tools.grading.exercises import grade_id_of, parse_grade_id

TOKEN_VARIABLE = "BERTBOOK_GRADING_TOKEN"  # the grader puts the run's token here
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


class MarkTests(Preprocessor):
    """Append the proof line to every tests cell, after the tests."""

    enabled = True  # nbconvert runs a preprocessor only when it is enabled

    def preprocess_cell(self, cell, resources, index):
        grade_id = _tests_grade_id(cell)
        if grade_id:
            cell.source = cell.source.rstrip() + _proof_line(grade_id)
        return cell, resources


class JudgeTests(Preprocessor):
    """Keep what a tests cell's score should rest on: its errors, or the proof it ran."""

    enabled = True

    def preprocess_cell(self, cell, resources, index):
        grade_id = _tests_grade_id(cell)
        if not grade_id:
            return cell, resources
        cell.source = cell.source.replace(_proof_line(grade_id), "")
        errors = [out for out in cell.outputs if out.output_type == "error"]
        printed = "".join(out.get("text", "") for out in cell.outputs
                          if out.output_type == "stream" and out.name == "stdout")
        if errors:
            cell.outputs = errors[:1]
        elif _proof(grade_id) not in printed.split("\n"):
            cell.outputs = [new_output("error", ename="NotRunAsWritten", evalue=NOT_AS_WRITTEN,
                                       traceback=[])]
        else:
            kept = printed.replace(_proof(grade_id) + "\n", "")
            cell.outputs = [_stdout(kept)] if kept.strip() else []
        return cell, resources


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
