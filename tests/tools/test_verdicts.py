"""Verdicts outside the kernel: every chapter's reference solutions run on their cases, the
classic slips and the look-alike answers fail, honest variations pass, and a kernel's
answers file is read as plain, bounded data that cannot point the grader elsewhere."""

import json
import math
import os
import random

import pytest

from bertbook.exercise_cases import CASES, DRAWN, answers, cases_for, plain
from tools.chapters import ROOT, chapter_sources
from tools.grading import verdicts

SEED = 20261207


@pytest.fixture(scope="module")
def references():
    """Every chapter's reference outcomes on this seed's cases (the grader's own step)."""
    found = {}
    for chapter in chapter_sources(ROOT):
        found.update(verdicts._compute_references(chapter, SEED))
    return found


def _judged(tmp_path, exercise, references, **functions):
    (tmp_path / f"{exercise}.json").write_text(json.dumps(answers(exercise, functions, SEED)))
    return verdicts.judge(exercise, references[exercise], tmp_path, SEED)


def test_every_code_exercise_has_cases_and_a_reference_in_plain_data(references):
    assert set(references) == set(CASES)
    for exercise, outcomes in references.items():
        assert len(outcomes) == len(cases_for(exercise, None)) + DRAWN, exercise
        assert "unsupported" not in json.dumps(outcomes), exercise
        returned = [json.dumps(o.get("returned")) for o in outcomes if "returned" in o]
        assert len(set(returned)) > 1, f"{exercise}: every case gives the same answer"


def test_drawn_cases_depend_on_the_seed_and_only_on_it():
    first, again = cases_for("0.1", 1), cases_for("0.1", 1)
    assert first == again and first != cases_for("0.1", 2)
    assert cases_for("0.1", None) == first[:len(first) - DRAWN]


def test_the_reference_itself_passes_and_an_honest_variation_too(tmp_path, references):
    def run_minutes(parameters, tokens, peak_flops, utilisation):
        seconds = parameters * tokens * 6 / peak_flops / utilisation  # another order
        return seconds / 60

    assert _judged(tmp_path, "0.1", references, run_minutes=run_minutes) is None


@pytest.mark.parametrize("exercise, function, slip", [
    ("0.1", "run_minutes", lambda n, t, peak, share: 2 * n * t / (peak * share) / 60),
    ("0.1", "run_minutes", lambda n, t, peak, share: 6 * n * t / (peak * share)),
    ("10.1", "attention_weights_bytes", lambda b, h, length, size: b * h * length * size),
    ("11.1", "rank_rows", lambda order, batch, size, rank, world:
     order[batch * size:(batch + 1) * size][rank::world]),
    ("11.3", "averaged_gradients", lambda ranks: [sum(v) for v in zip(*ranks)]),
])
def test_classic_slips_lose_the_point(tmp_path, references, exercise, function, slip):
    verdict = _judged(tmp_path, exercise, references, **{function: slip})
    assert verdict is not None and verdict.reason.startswith("wrong answer")


def test_an_answer_that_changes_its_input_loses_the_point(tmp_path, references):
    def shuffled(items, seed):
        random.Random(seed).shuffle(items)
        return list(items)

    verdict = _judged(tmp_path, "0.2", references, shuffled=shuffled)
    assert "changed its arguments" in verdict.reason


def test_look_alike_results_arrive_as_what_they_are():
    class AlwaysEqual(list):
        def __eq__(self, other):
            return True

    assert plain(AlwaysEqual()) == {"unsupported": "AlwaysEqual"}
    assert plain((1, [True, 2.0])) == {"tuple": [1, [True, 2.0]]}
    assert not verdicts.same(1, True) and not verdicts.same([1], {"tuple": [1]})
    assert verdicts.same(2.0, 2) and not verdicts.same(2, 2.0)  # an int where a float is due
    assert verdicts.same(math.nan, math.nan)


def test_a_student_raising_a_subclass_of_the_expected_error_is_right():
    assert verdicts._difference({"raised": ["ValueError", "Exception"]},
                                {"raised": ["MyError", "ValueError", "Exception"]}) is None
    assert verdicts._difference({"raised": ["ValueError"]}, {"returned": 1, "arguments": 0})


@pytest.mark.parametrize("planted", ["link", "fifo", "huge", "deep", "not a list", "absent"])
def test_a_planted_answers_file_is_refused_in_the_graders_words(tmp_path, planted):
    path = tmp_path / "0.1.json"
    if planted == "link":
        path.symlink_to("/etc/passwd")
    elif planted == "fifo":
        os.mkfifo(path)
    elif planted == "huge":
        path.write_text("[" + "1," * verdicts.MAX_ANSWER_BYTES + "1]")
    elif planted == "deep":
        path.write_text("[" * 100_000 + "]" * 100_000)
    elif planted == "not a list":
        path.write_text('{"0.1": "full marks"}')
    verdict = verdicts.judge("0.1", [], tmp_path, SEED)
    assert verdict.reason.endswith("review by hand") and verdict.student_text == ""
    assert "root:" not in verdict.reason
