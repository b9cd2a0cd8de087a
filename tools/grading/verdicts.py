"""Verdicts on code exercises, reached outside the student's kernel.

The student's kernel only computes: the hidden tests call `bertbook.exercise_cases.
record_answers`, which writes the student's outcomes on the exercise's cases (fixed ones and
ones drawn from this batch's secret seed) as JSON into the folder the sandbox shares. Here,
in the grader's processes:

* `reference_answers` runs the instructor's solutions on the same cases, in a fresh Python
  process (`python -m tools.grading.verdicts CHAPTER SEED`), once per chapter and batch;
* `judge` reads a kernel's answers (no links, no FIFOs, a bounded size, plain JSON) and
  compares them with the reference, exact types at every level, floats within a tolerance.

So a redefined builtin, a patched module or an object whose `==` always says yes changes
nothing: the comparison never runs where the student's code does, and never on the student's
objects. What can still pass is an answer that computes the right outputs: the student's
own, one copied from the public instructor's copy, or a call to the library's version.
"""

from __future__ import annotations

import ast
import json
import math
import os
import stat
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bertbook.exercise_cases import DRAWN, answers, cases_for
from tools.chapters import ROOT, read_chapter
from tools.grading.exercises import SOLUTION, exercise_cells, without_markers

MAX_ANSWER_BYTES = 4 * 1024 * 1024  # one exercise's outcomes; more is refused
FLOAT_TOLERANCE = 1e-9  # relative and absolute: the same arithmetic in another order
TENSOR_TOLERANCE = (1e-4, 1e-5)  # (relative, absolute): float32 kernels in another order


@dataclass(frozen=True)
class Verdict:
    """Why an exercise lost its point: the grader's words, and what the student's code
    returned (its text, kept apart)."""

    reason: str
    student_text: str = ""


def reference_answers(chapter: Path, seed: int) -> dict[str, list[Any]]:
    """Exercise -> the reference solution's outcomes on its cases, computed in a fresh
    Python process so that nothing of the grader's state (or a student's) is in play."""
    result = subprocess.run([sys.executable, "-m", "tools.grading.verdicts", str(chapter),
                             str(seed)], cwd=ROOT, capture_output=True, text=True, timeout=600,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    if result.returncode != 0:
        raise RuntimeError(f"the reference solutions of {chapter.name} did not run:\n"
                           f"{result.stderr[-3000:]}")
    return json.loads(result.stdout)


def _imports_before(notebook, index: int) -> str:
    """Every import statement of the code cells before cell `index`: what an answer cell
    may rely on without importing it itself."""
    found = []
    for cell in notebook.cells[:index]:
        if cell.cell_type != "code" or cell.source.lstrip().startswith(("%", "!")):
            continue
        try:
            tree = ast.parse(cell.source)
        except SyntaxError:
            continue
        found += [ast.unparse(node) for node in tree.body
                  if isinstance(node, (ast.Import, ast.ImportFrom))]
    return "\n".join(found)


def _compute_references(chapter: Path, seed: int) -> dict[str, list[Any]]:
    """Run each code exercise's reference solution on its cases (in this process)."""
    notebook = read_chapter(chapter)
    outcomes = {}
    for item in exercise_cells(notebook):
        if item.role != "answer":
            continue
        namespace: dict[str, Any] = {"__name__": f"reference_{item.grade_id}"}
        exec(_imports_before(notebook, item.index), namespace)  # noqa: S102 - the book's own
        source = without_markers(notebook.cells[item.index].source, SOLUTION, keep_inside=True)
        exec(source, namespace)  # noqa: S102 - the instructor's solution
        names = {call.function for call in cases_for(item.exercise, None)}
        outcomes[item.exercise] = answers(item.exercise, {n: namespace[n] for n in names}, seed)
    return outcomes


def read_answers(folder: Path, exercise: str) -> list[Any] | str:
    """The outcomes a kernel wrote for `exercise`, or why they cannot be read (in the
    grader's words). Opened without following links or blocking on a FIFO, bounded."""
    try:
        descriptor = os.open(folder / f"{exercise}.json", os.O_RDONLY | os.O_NOFOLLOW
                             | os.O_NONBLOCK)
    except OSError:
        return "no answers were recorded (the hidden tests did not reach the end)"
    with os.fdopen(descriptor, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_ANSWER_BYTES:
            return "the recorded answers are not a regular file of a bounded size"
        data = handle.read(MAX_ANSWER_BYTES + 1)
    try:
        outcomes = json.loads(data)
    except (ValueError, RecursionError):
        return "the recorded answers are not readable JSON"
    return outcomes if type(outcomes) is list else "the recorded answers are not a list"


def same(expected: Any, got: Any) -> bool:
    """Equal in type and value at every level; floats and float tensors within a tolerance,
    an int accepted where a float is expected (2 for 2.0), as the visible checks do."""
    if type(expected) is float:
        return type(got) in (int, float) and _close(expected, float(got), FLOAT_TOLERANCE,
                                                    FLOAT_TOLERANCE)
    if type(got) is not type(expected):
        return False
    if type(expected) is list:
        return len(got) == len(expected) and all(map(same, expected, got))
    if type(expected) is dict:
        if "unsupported" in expected:
            raise ValueError(f"a reference answer has no plain form: {expected}")
        if "tensor" in expected:
            return _same_tensor(expected, got)
        return expected.keys() == got.keys() and all(same(expected[k], got[k])
                                                     for k in expected)
    return got == expected


def _close(expected: float, got: float, relative: float, absolute: float) -> bool:
    if math.isnan(expected):
        return math.isnan(got)
    return math.isclose(got, expected, rel_tol=relative, abs_tol=absolute)


def _same_tensor(expected: dict[str, Any], got: dict[str, Any]) -> bool:
    if got.keys() != expected.keys() or got["tensor"] != expected["tensor"] \
            or got["shape"] != expected["shape"] or type(got["values"]) is not list \
            or len(got["values"]) != len(expected["values"]):
        return False
    if "float" not in expected["tensor"]:
        return all(type(g) is type(e) and g == e for g, e in zip(got["values"],
                                                                  expected["values"]))
    return all(type(g) in (int, float) and _close(e, float(g), *TENSOR_TOLERANCE)
               for g, e in zip(got["values"], expected["values"]))


def _shown(outcome: Any, limit: int = 160) -> str:
    text = json.dumps(outcome, default=str)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def judge(exercise: str, reference: list[Any], folder: Path, seed: int) -> Verdict | None:
    """None when the kernel's outcomes for `exercise` match the reference's, case by
    case; else the first case that differs, described in the grader's words."""
    got = read_answers(folder, exercise)
    if isinstance(got, str):
        return Verdict(f"{got}; review by hand")
    if len(got) != len(reference):
        return Verdict(f"{len(got)} answers recorded for {len(reference)} cases; review by hand")
    calls = cases_for(exercise, seed)
    fixed = len(calls) - DRAWN  # cases_for puts the fixed calls first
    for number, (call, expected, outcome) in enumerate(zip(calls, reference, got), start=1):
        difference = _difference(expected, outcome)
        if difference:
            kind = "a fixed case" if number <= fixed else "a case drawn at grading time"
            return Verdict(f"wrong answer: case {number} of {len(calls)} ({kind}): "
                           f"{call.function}(...) {difference}", f"got {_shown(outcome)}")
    return None


def _difference(expected: dict[str, Any], outcome: Any) -> str | None:
    """How a kernel's outcome of one call differs from the reference's (None: it does not).
    A raised error matches when the reference's exception is among its base classes."""
    if "raised" in expected:
        raised = outcome.get("raised") if type(outcome) is dict else None
        if type(raised) is list and expected["raised"][0] in raised:
            return None
        return f"should have raised {expected['raised'][0]}"
    if type(outcome) is not dict or not same(expected["returned"], outcome.get("returned")):
        return f"should have returned {_shown(expected['returned'])}"
    if not same(expected["arguments"], outcome.get("arguments")):
        return "changed its arguments (an answer should leave its input as it was)"
    return None


def main(argv: list[str]) -> int:
    """`python -m tools.grading.verdicts CHAPTER SEED`: the reference outcomes as JSON."""
    chapter, seed = Path(argv[0]), int(argv[1])
    json.dump(_compute_references(chapter, seed), sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
