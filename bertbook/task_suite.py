"""Chapter 07's runs: every start fine-tuned on every task, each run done once.

A task is (splits, feature builder, head class, head options, evaluation, length in
pieces); a start is (tokenizer, load(head class, head options) -> model, recipe). The suite
caches features and scores, so a later section that asks for a run already made (the
few-labels comparison, the benchmarks) reuses it instead of training again.
"""

import functools
import random
import time
from collections.abc import Callable

import torch

from bertbook.baselines import majority_rate, string_match_rate, tagging_baseline
from bertlib.batch import PaddingCollator
from bertlib.finetuning.run import (
    evaluate_span_qa,
    evaluate_tagging,
    fine_tune,
    new_head_expected,
)
from bertlib.runtime import seed_everything

__all__ = ["sample", "TaskSuite"]


def sample(items: list, n: int | None, seed: int = 0) -> list:
    """n items drawn without replacement with a fixed seed (all of them when n is None)."""
    if n is None or n >= len(items):
        return list(items)
    return random.Random(seed).sample(items, n)


class TaskSuite:
    """Fine-tuning runs over named tasks and starts, scored on a capped test split."""

    def __init__(self, tasks: dict[str, tuple], starts: dict[str, tuple],
                 collator: PaddingCollator, device: torch.device, eval_cap: int | None):
        self.tasks, self.starts = tasks, starts  # shared: the chapter may add to them
        self.collator, self.device, self.eval_cap = collator, device, eval_cap
        self.features: Callable[..., list[dict]] = functools.cache(self._features)
        self.scores: Callable[..., dict[str, float]] = functools.cache(self._scores)

    def _features(self, tokenizer, task: str, split: str) -> list[dict]:
        splits, featurize, _, _, _, length = self.tasks[task]
        return featurize(tokenizer, splits[split], length)

    def _scores(self, start: str, task: str, n_train: int | None = None,
                draw: int = 0) -> dict[str, float]:
        """Test scores of `start` fine-tuned on n_train training examples of `task` (which
        ones depends on `draw`; every start gets the same ones for the same draw)."""
        tokenizer, load, recipe = self.starts[start]
        _, _, head, options, evaluate, _ = self.tasks[task]
        train = sample(self.features(tokenizer, task, "train"), n_train, seed=draw)
        test = self.test_sample(tokenizer, task)
        seed_everything(0)
        with new_head_expected():  # the head is fine-tuned next
            model = load(head, options)
        started = time.perf_counter()
        fine_tune(model, train, recipe, self.collator, self.device)
        scores = evaluate(model, test, self.collator, self.device)
        print(f"{start:18} {task:15} {len(train):6,} train {len(test):5,} test "
              f"{(time.perf_counter() - started) / 60:4.1f} min -> "
              + ", ".join(f"{k} {v:.3f}" for k, v in scores.items()))
        return scores

    def test_sample(self, tokenizer, task: str) -> list[dict]:
        """The test features every score of `task` is counted on (the same for every run)."""
        return sample(self.features(tokenizer, task, "test"), self.eval_cap, seed=1)

    def baseline(self, start: str, task: str, n_train: int | None = None) -> float:
        """The task's score without a Transformer, on the test sample of `scores`: the
        dictionary tagger trained on the same n_train examples for tagging, string matching
        for span QA, the most frequent label otherwise."""
        tokenizer = self.starts[start][0]
        evaluate = self.tasks[task][4]
        test = self.test_sample(tokenizer, task)
        if evaluate is evaluate_tagging:
            train = sample(self.features(tokenizer, task, "train"), n_train)
            return tagging_baseline(train, test)
        if evaluate is evaluate_span_qa:
            return string_match_rate(test)
        return majority_rate(test)
