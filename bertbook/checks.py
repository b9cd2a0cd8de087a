"""Checks that students run on their exercise solutions, and that explain what is wrong.

Each check calls the student's function on small cases whose answers were worked out by
hand (never on a reference implementation, which would give the solution away) and, on
the first wrong answer, says which input, what came back, what was expected and a hint.
"""

from __future__ import annotations

import copy
import math
import sys
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "CheckFailed",
    "Case",
    "check_cases",
    "check_run_minutes",
    "check_shuffled",
    "check_unigram_accuracy",
    "check_reading_offsets",
    "check_pieces_to_words",
    "check_segment_ids",
    "check_causal_mask",
    "check_attention_flops",
    "check_split_merge_heads",
    "check_layer_norm",
    "check_feed_forward_share",
    "check_apply_masking",
    "check_expected_coverage",
    "check_span_continuation",
    "check_cosine_lr_at",
    "check_decays",
    "check_masked_lm_loss",
    "check_all_mask",
    "check_best_answer_span",
    "check_sentence_logits",
    "check_learning_signals",
    "check_clearly_better",
    "check_attention_weights_bytes",
    "check_mfu",
    "check_rank_rows",
    "check_averaged_gradients",
    "check_favourite_offset",
]


class CheckFailed(AssertionError):
    """A student's answer is wrong; the message says how, and what to look at."""


@dataclass(frozen=True)
class Case:
    """One hand-worked example: arguments, the expected answer, and a hint if it fails."""

    args: tuple[Any, ...]
    expected: Any
    hint: str
    kwargs: dict[str, Any] = field(default_factory=dict)
    raises: type[BaseException] | None = None


def _same(got: Any, expected: Any) -> bool:
    """Equal in value *and* in type, all the way down.

    Comparing values alone lets a subclass whose `__eq__` always answers True pass every
    check; requiring the exact built-in type at every level closes that door. An int is
    accepted where a float is expected (2 for 2.0).
    """
    if type(expected) is float:
        return type(got) in (int, float) and math.isclose(got, expected, abs_tol=1e-6)
    if type(got) is not type(expected):
        return False
    if type(expected) in (list, tuple):
        return len(got) == len(expected) and all(map(_same, got, expected))
    return got == expected


def _unchanged(before: Any, after: Any) -> bool:
    """Whether a call left its arguments as they were (tensors compared element by element).
    The grader checks this too: an answer that edits its caller's list or tensor has a bug."""
    if type(before) is not type(after):
        return False
    if type(before) in (list, tuple):
        return len(before) == len(after) and all(map(_unchanged, before, after))
    if type(before).__name__ == "Tensor":
        return before.shape == after.shape and bool((before == after).all())
    return before == after


def _shown(got: Any, expected: Any) -> str:
    """How a wrong answer is described: its value, and its type when the values look alike."""
    if repr(got) == repr(expected) or type(got) is not type(expected):
        return f"{got!r} (of type {type(got).__name__}, not {type(expected).__name__})"
    return repr(got)


def _call(function: Callable[..., Any], case: Case, name: str = "") -> Any:
    try:
        return function(*case.args, **case.kwargs)
    except NotImplementedError as error:
        raise CheckFailed(
            f"{name or function.__name__} is still the stub: replace `raise NotImplementedError` "
            "with your code, run that cell, then run this check again."
        ) from error


def check_cases(function: Callable[..., Any], cases: list[Case], name: str = "") -> None:
    """Run every case; raise CheckFailed at the first wrong one, else print a summary.

    It prints rather than returns, so a check on a cell's last line shows its verdict once.

    name: the student's function, when `function` is a wrapper around it.
    """
    name = name or function.__name__
    for number, case in enumerate(cases, start=1):
        shown = ", ".join([repr(a) for a in case.args] +
                          [f"{k}={v!r}" for k, v in case.kwargs.items()])
        call = f"{name}({shown})"
        if case.raises is not None:
            try:
                got = _call(function, case, name)
            except case.raises:
                continue
            raise CheckFailed(f"case {number}: {call} returned {got!r}, but it should raise "
                              f"{case.raises.__name__}. Hint: {case.hint}")
        before = copy.deepcopy(case.args)
        got = _call(function, case, name)
        if not _unchanged(before, case.args):
            raise CheckFailed(f"case {number}: {call} changed its arguments to {case.args!r}: "
                              "leave the input as it was and build the answer anew")
        if not _same(got, case.expected):
            raise CheckFailed(f"case {number}: {call} returned {_shown(got, case.expected)}; "
                              f"expected {case.expected!r}. Hint: {case.hint}")
    print(f"✓ {name}: all {len(cases)} checks passed")


# ---- chapter 00 -------------------------------------------------------------------

def check_run_minutes(run_minutes: Callable[[int, int, float, float], float]) -> None:
    """Exercise 00.1: minutes of a training run by the 6-FLOPs-per-weight-per-token rule."""
    check_cases(run_minutes, [
        Case((10, 100, 6000.0, 1.0), 1 / 60, "6 x 10 weights x 100 tokens = 6,000 operations: "
                                             "one second at 6,000 per second"),
        Case((10, 6000, 6000.0, 1.0), 1.0, "training counts 6 operations per weight and token "
                                           "(2 forward, 4 backward), not 2"),
        Case((10, 6000, 6000.0, 0.5), 2.0, "at half the peak a run takes twice as long"),
        Case((20, 3000, 6000.0, 1.0), 1.0, "the answer is in minutes, not seconds"),
    ])


def check_shuffled(shuffled: Callable[[list, int], list]) -> None:
    """Exercise 00.2: a seeded shuffle that touches nothing else."""
    import random

    for case in (Case(([], 0), [], "no items, nothing to shuffle"),
                 Case((["x"], 5), ["x"], "one item has one order")):
        got = _call(shuffled, case)
        if not _same(got, case.expected):
            raise CheckFailed(f"shuffled{case.args!r} returned {_shown(got, case.expected)}; "
                              f"expected {case.expected!r}. Hint: {case.hint}")
    items = list(range(10))
    state = random.getstate()
    first, second = shuffled(items, 1), shuffled(items, 1)
    if items != list(range(10)):
        raise CheckFailed("shuffled changed the list it was given: shuffle a copy of it")
    if random.getstate() != state:
        raise CheckFailed("shuffled moved the random module's own generator: draw from a "
                          "random.Random(seed) of your own instead of random.seed")
    if first != second or sorted(first) != items:
        raise CheckFailed(f"shuffled(items, 1) gave {first!r} then {second!r}: the same seed "
                          "should give the same order of the same items")
    if first == shuffled(items, 2):
        raise CheckFailed("seeds 1 and 2 gave the same order: use the seed you are given")
    print("✓ shuffled: same seed, same order; input and random module left alone")


# ---- chapter 01 -------------------------------------------------------------------

def check_unigram_accuracy(
    unigram_accuracy: Callable[[list[int], list[int]], float],
) -> None:
    """Exercise 01.1: accuracy of always guessing the most frequent training token."""
    check_cases(unigram_accuracy, [
        Case(([5, 5, 7], [5, 7, 7, 7]), 0.25,
             "the guess comes from the training ids; the accuracy is measured on the test ids"),
        Case(([1, 2, 2, 2], [2, 2]), 1.0, "the most frequent training id here is 2"),
        Case(([3, 3, 4], [4, 4, 4]), 0.0, "a guess that never appears in the test ids scores 0"),
        Case(([], [1]), None, "with no training ids there is nothing to guess: raise ValueError",
             raises=ValueError),
    ])


def check_reading_offsets(offsets_for: Callable[[str, int], tuple[int, ...]]) -> None:
    """Exercise 01.2: which relative positions a one-way or two-way reader sees."""
    check_cases(offsets_for, [
        Case(("left", 3), (-3, -2, -1), "left means negative offsets, nearest word last"),
        Case(("right", 2), (1, 2), "right context starts at +1; offset 0 is the hidden word"),
        Case(("both", 4), (-2, -1, 1, 2), "'both' splits the width evenly and skips offset 0"),
        Case(("both", 3), None, "an odd width cannot be split evenly: raise ValueError",
             raises=ValueError),
        Case(("up", 2), None, "only 'left', 'right' and 'both' are readings: raise ValueError",
             raises=ValueError),
    ])


# ---- chapter 02 -------------------------------------------------------------------

def check_pieces_to_words(pieces_to_words: Callable[[list[str]], list[str]]) -> None:
    """Exercise 02.1: WordPiece tokens joined back into words."""
    check_cases(pieces_to_words, [
        Case((["un", "##aff", "##able", "!"],), ["unaffable", "!"],
             "a ## piece continues the word before it; drop the ## when joining"),
        Case((["the", "bank"],), ["the", "bank"], "pieces without ## are whole words"),
        Case((["##ing", "x"],), ["ing", "x"],
             "a ## piece with nothing before it starts a word; strip its ##"),
        Case(([],), [], "no tokens, no words"),
    ])


def check_segment_ids(segment_ids: Callable[[int, int | None], list[int]]) -> None:
    """Exercise 02.2: segment ids of [CLS] A [SEP] (B [SEP])."""
    check_cases(segment_ids, [
        Case((2, None), [0, 0, 0, 0], "a single text: [CLS] a a [SEP], all segment 0"),
        Case((1, 2), [0, 0, 0, 1, 1, 1],
             "[CLS] and the first [SEP] belong to segment 0; B and the last [SEP] to 1"),
        Case((3, 1), [0, 0, 0, 0, 0, 1, 1], "len_a + 2 zeros, then len_b + 1 ones"),
    ])


# ---- chapter 03 -------------------------------------------------------------------

def check_causal_mask(causal_mask: Callable[[int], Any]) -> None:
    """Exercise 03.1: lower-triangular boolean mask, True where attending is allowed."""
    import torch

    mask = _call(causal_mask, Case((3,), None, ""))
    if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool:
        raise CheckFailed(f"causal_mask(3) should be a torch.bool tensor, got {mask!r}. "
                          "Hint: torch.ones(length, length, dtype=torch.bool) is a start")
    if mask.shape != (3, 3):
        raise CheckFailed(f"causal_mask(3) has shape {tuple(mask.shape)}; expected (3, 3)")
    expected = [[True, False, False], [True, True, False], [True, True, True]]
    if mask.tolist() != expected:
        raise CheckFailed(f"causal_mask(3) is {mask.tolist()}; expected {expected}. Hint: row "
                          "i is the position attending; it may see columns 0..i (itself "
                          "included). Look up Tensor.tril")
    def allowed_pairs(length: int) -> int:
        return int(causal_mask(length).sum())

    check_cases(allowed_pairs, [
        Case((1,), 1, "a single position may attend to itself"),
        Case((5,), 15, "a 5x5 causal mask allows 5+4+3+2+1 = 15 pairs"),
    ], name="causal_mask")


def check_attention_flops(attention_flops: Callable[[int, int], int]) -> None:
    """Exercise 03.2: FLOPs of QKᵀ and weights·V for one sequence."""
    check_cases(attention_flops, [
        Case((1, 1), 4, "two products, each one multiply-add (2 FLOPs) for length = hidden = 1"),
        Case((2, 1), 16, "QKᵀ is (length×hidden)·(hidden×length): length²·hidden multiply-adds"),
        Case((4, 8), 512, "2 products × 2 FLOPs per multiply-add × length² × hidden"),
    ])


def check_split_merge_heads(split_heads: Callable[[Any, int], Any],
                            merge_heads: Callable[[Any], Any]) -> None:
    """Exercise 03.4: (batch, seq, hidden) <-> (batch, heads, seq, head size), and back."""
    import torch

    x = torch.arange(2 * 3 * 8, dtype=torch.float32).reshape(2, 3, 8)
    split = _call(split_heads, Case((x, 2), None, ""))
    if not isinstance(split, torch.Tensor) or tuple(split.shape) != (2, 2, 3, 4):
        shape = tuple(split.shape) if isinstance(split, torch.Tensor) else split
        raise CheckFailed(f"split_heads(x of shape (2, 3, 8), heads=2) gave {shape}; expected "
                          "shape (2, 2, 3, 4). Hint: view as (batch, seq, heads, head size), "
                          "then swap the seq and heads axes")
    for head, position in [(h, t) for h in range(2) for t in range(3)]:
        if not torch.equal(split[0, head, position], x[0, position, 4 * head:4 * head + 4]):
            raise CheckFailed(f"head {head} of position {position} should hold x[0, {position}, "
                              f"{4 * head}:{4 * head + 4}], slice {head} of that position's "
                              "vector. Hint: split the last axis; do not reshape across positions")
    merged = _call(merge_heads, Case((split,), None, ""))
    if not isinstance(merged, torch.Tensor) or not torch.equal(merged, x):
        raise CheckFailed("merge_heads(split_heads(x, 2)) should give x back exactly. Hint: "
                          "swap the axes back, then .reshape(batch, seq, heads * head size)")
    print("✓ split_heads and merge_heads: all 3 checks passed")


# ---- chapter 04 -------------------------------------------------------------------

def check_layer_norm(layer_norm: Callable[..., Any]) -> None:
    """Exercise 04.1: LayerNorm over the last dimension, by hand."""
    import torch

    ones, zeros = torch.ones(2), torch.zeros(2)

    def normalised(values: list[float], weight=ones, bias=zeros) -> list[float]:
        out = layer_norm(torch.tensor([values]), weight, bias, 1e-12)
        return [round(v, 4) for v in out[0].tolist()]

    check_cases(normalised, [
        Case(([1.0, 3.0],), [-1.0, 1.0],
             "subtract the mean (2) and divide by the standard deviation (1, not √2: "
             "LayerNorm uses the biased variance, unbiased=False)"),
        Case(([5.0, 5.0],), [0.0, 0.0], "equal values have zero variance: eps keeps it finite"),
        Case(([1.0, 3.0], torch.tensor([2.0, 3.0]), torch.tensor([1.0, 0.0])), [-1.0, 3.0],
             "scale by weight, then add bias, after normalising"),
    ], name="layer_norm")


def check_feed_forward_share(feed_forward_share: Callable[[Any], float]) -> None:
    """Exercise 04.2: the fraction of parameters in the feed-forward blocks."""
    from bertlib.core.config import BertConfig

    def share_of(**fields: int) -> float:
        return round(feed_forward_share(BertConfig(**fields)), 6)

    tiny = dict(vocab_size=10, hidden_size=2, num_hidden_layers=1, num_attention_heads=1,
                intermediate_size=4, max_position_embeddings=4, type_vocab_size=2)
    # by hand: embeddings (10+4+2)*2 + 4 = 36; layer: attention 4*(4+2) = 24, feed-forward
    # (2*4+4) + (4*2+2) = 22, LayerNorms 8, so 54; pooler 4 + 2 = 6; total 96
    check_cases(share_of, [
        Case((), round(22 / 96, 6), "feed-forward = (hidden*intermediate + intermediate) + "
             "(intermediate*hidden + hidden) per layer; divide by the whole model's count, "
             "pooler included", kwargs=tiny),
        Case((), round(44 / 150, 6), "every layer has its own feed-forward block",
             kwargs={**tiny, "num_hidden_layers": 2}),
    ], name="feed_forward_share")


# ---- chapter 05 -------------------------------------------------------------------

def check_apply_masking(apply_masking: Callable[..., tuple[list[int], list[int]]]) -> None:
    """Exercise 05.4: the 80/10/10 replacement of the chosen positions, with given draws."""
    ids = [101, 7, 8, 9, 10, 102]
    check_cases(apply_masking, [
        Case((ids, [2], [0.5], [55], 103), ([101, 7, 103, 9, 10, 102],
                                            [-100, -100, 8, -100, -100, -100]),
             "a draw under 0.8 puts [MASK] (mask_id) there; the label is the original id"),
        Case((ids, [3], [0.85], [55], 103), ([101, 7, 8, 55, 10, 102],
                                             [-100, -100, -100, 9, -100, -100]),
             "a draw in [0.8, 0.9) puts that position's random id there"),
        Case((ids, [4], [0.95], [55], 103), ([101, 7, 8, 9, 10, 102],
                                             [-100, -100, -100, -100, 10, -100]),
             "a draw of 0.9 or more keeps the token, but it is still predicted"),
        Case((ids, [1, 4], [0.1, 0.8], [55, 66], 103), ([101, 103, 8, 9, 66, 102],
                                                        [-100, 7, -100, -100, 10, -100]),
             "the k-th chosen position uses draws[k] and random_ids[k]; 0.8 is not < 0.8"),
        Case((ids, [], [], [], 103), (ids, [-100] * 6),
             "nothing chosen: the ids unchanged, every label -100"),
    ])


def check_expected_coverage(expected_coverage: Callable[[int, float], float]) -> None:
    """Exercise 05.1: 1 - (1 - p)^epochs."""
    check_cases(expected_coverage, [
        Case((1, 0.15), 0.15, "after one epoch, exactly the tokens chosen once: p"),
        Case((0, 0.15), 0.0, "after no epochs nothing has been predicted"),
        Case((2, 0.5), 0.75, "a token escapes both epochs with probability (1-p)^2 = 0.25"),
        Case((3, 1.0), 1.0, "p = 1 predicts everything at once"),
    ])


def check_span_continuation(span_continuation: Callable[[int, int], list[bool]]) -> None:
    """Exercise 05.2: continuation flags that glue positions into spans."""
    f, t = False, True
    check_cases(span_continuation, [
        Case((7, 3), [f, t, t, f, t, t, f],
             "each span starts with False and continues with True; the last may be short"),
        Case((2, 1), [f, f], "spans of one token: nothing is glued"),
        Case((0, 4), [], "no positions, no flags"),
        Case((3, 0), None, "a span of 0 tokens makes no sense: raise ValueError",
             raises=ValueError),
    ])


# ---- chapter 06 -------------------------------------------------------------------

def check_cosine_lr_at(cosine_lr_at: Callable[[int, float, int, int], float]) -> None:
    """Exercise 06.1: linear warm-up, then a half-cosine decay."""
    check_cases(cosine_lr_at, [
        Case((0, 1e-3, 10, 110), 0.0, "the warm-up starts from zero"),
        Case((5, 1e-3, 10, 110), 5e-4, "halfway through the warm-up: half the peak"),
        Case((10, 1e-3, 10, 110), 1e-3, "the end of the warm-up is the peak"),
        Case((35, 1e-3, 10, 110), 1e-3 * 0.5 * (1 + math.cos(math.pi / 4)),
             "a quarter of the way through the decay: progress = (35-10)/(110-10) = 0.25"),
        Case((60, 1e-3, 10, 110), 5e-4, "halfway through the decay, cos(π/2) = 0: half"),
        Case((110, 1e-3, 10, 110), 0.0, "at the last step the rate is zero"),
        Case((200, 1e-3, 10, 110), 0.0, "past the end progress stays 1: zero, never rising"),
    ])


def check_decays(decays: Callable[[str], bool]) -> None:
    """Exercise 06.2: weight decay on weight matrices only."""
    check_cases(decays, [
        Case(("bert.encoder.layer.0.attention.self.query.weight",), True,
             "weight matrices are decayed"),
        Case(("bert.encoder.layer.0.attention.self.query.bias",), False, "biases are not"),
        Case(("bert.embeddings.LayerNorm.weight",), False,
             "LayerNorm's scale is not decayed either, although its name ends in 'weight'"),
        Case(("cls.predictions.bias",), False, "the output bias is a bias"),
        Case(("bert.embeddings.word_embeddings.weight",), True, "embeddings are decayed"),
    ])


LN3 = math.log(3)  # logits [0, ln 3] give the second piece probability 3/4


def check_masked_lm_loss(masked_lm_loss: Callable[[Any, Any], Any]) -> None:
    """Exercise 06.4: the mean cross-entropy over the hidden pieces of a whole batch."""
    import torch

    def loss_of(logits: list, labels: list) -> float:
        scores = torch.tensor(logits, dtype=torch.float32, requires_grad=True)
        got = _call(masked_lm_loss, Case((scores, torch.tensor(labels)), None, ""))
        if not isinstance(got, torch.Tensor) or got.dim() != 0:
            raise CheckFailed(f"masked_lm_loss returned {got!r}; expected a tensor with one "
                              "number (shape ()). Hint: a loss is a 0-dimensional tensor")
        if not got.requires_grad:
            raise CheckFailed("the loss has no gradient, so training could not follow it. "
                              "Hint: compute it from logits with torch operations; do not "
                              "call .item(), float() or .detach() on the way")
        return round(float(got.detach()), 6)

    uniform, likely_second, likely_first = [0.0, 0.0], [0.0, LN3], [LN3, 0.0]
    check_cases(loss_of, [
        Case(([[uniform, uniform]], [[1, 0]]), round(math.log(2), 6),
             "two equally likely pieces: each hidden one's probability is 1/2, loss ln 2"),
        Case(([[likely_second, uniform]], [[1, -100]]), round(math.log(4 / 3), 6),
             "only the hidden position is scored: -ln(3/4); do not divide by the positions "
             "labelled -100 too"),
        Case(([[likely_second, uniform]], [[1, 0]]), round((math.log(4 / 3) + math.log(2)) / 2, 6),
             "two hidden pieces: the mean of their losses, not their sum"),
        Case(([[likely_second, uniform], [likely_first, uniform]], [[1, 0], [0, -100]]),
             round((2 * math.log(4 / 3) + math.log(2)) / 3, 6),
             "one mean over every hidden piece of the batch (three here), not the mean of "
             "each row's mean"),
        Case(([[uniform, uniform]], [[-100, -100]]), 0.0,
             "nothing hidden: the loss is 0, not NaN (0 / 0); divide by at least 1"),
    ], name="masked_lm_loss")


def check_all_mask(all_mask: Callable[[Any], Any]) -> None:
    """Exercise 06.5: the same masking recipe with every chosen piece shown as [MASK]."""
    from bertlib.pretraining.masking import MaskingRecipe

    def fields(recipe: MaskingRecipe) -> tuple:
        got = all_mask(recipe)
        if type(got) is not MaskingRecipe:
            raise CheckFailed(f"all_mask returned {got!r}; expected a MaskingRecipe. Hint: "
                              "dataclasses.replace(recipe, ...) copies one with fields changed")
        return (float(got.probability), got.max_predictions, got.whole_word,
                float(got.mask_share), float(got.random_share))

    check_cases(fields, [
        Case((MaskingRecipe(),), (0.15, 20, False, 1.0, 0.0),
             "every chosen piece becomes [MASK]: mask_share 1 and random_share 0, so none is "
             "replaced by a random piece or left as it was"),
        Case((MaskingRecipe(probability=0.4, max_predictions=52, whole_word=True),),
             (0.4, 52, True, 1.0, 0.0),
             "change only what replaces a chosen piece; keep how many are chosen "
             "(probability, max_predictions) and how (whole_word), so that the twin run "
             "predicts the same pieces as the original"),
    ], name="all_mask")


# ---- chapter 07 -------------------------------------------------------------------

def check_best_answer_span(best_answer_span: Callable[[list[float], list[float], int],
                                                   tuple[int, int]]) -> None:
    """Exercise 07.2: the best (start, end) with start <= end < start + max length."""
    check_cases(best_answer_span, [
        Case(([0.0, 5.0, 1.0], [0.0, 1.0, 6.0], 3), (1, 2),
             "the span whose start score plus end score is highest: 5 + 6"),
        Case(([0.0, 0.0, 9.0], [8.0, 0.0, 1.0], 3), (2, 2),
             "the end may not come before the start: the two best scores alone would give "
             "(2, 0), which is no span"),
        Case(([5.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 7.0], 3), (1, 3),
             "a span holds at most max_answer_length pieces (end < start + max_answer_length),"
             " so (0, 3) is too long; of the spans tied at 7, keep the earliest start"),
        Case(([1.0, 3.0], [2.0, 1.0], 1), (1, 1),
             "with max_answer_length 1 every span is one piece: start == end"),
        Case(([1.0, 1.0], [1.0, 1.0], 2), (0, 0),
             "on a tie keep the earliest start, then the earliest end; return a tuple of ints"),
    ])


def check_sentence_logits(sentence_logits: Callable[..., Any]) -> None:
    """Exercise 07.3: BERT's sentence head, the pooler then a linear layer, on [CLS]."""
    import torch

    def logits_of(hidden: list, pooler_weight: list, pooler_bias: list,
                  classifier_weight: list, classifier_bias: list) -> list:
        tensors = [torch.tensor(x, dtype=torch.float32) for x in
                   (hidden, pooler_weight, pooler_bias, classifier_weight, classifier_bias)]
        got = _call(sentence_logits, Case(tuple(tensors), None, ""))
        rows, labels = len(hidden), len(classifier_bias)
        if not isinstance(got, torch.Tensor) or tuple(got.shape) != (rows, labels):
            raise CheckFailed(f"sentence_logits returned {got!r}; expected a tensor of shape "
                              f"({rows}, {labels}): one row per sentence, one score per label")
        return [[round(float(v), 6) for v in row] for row in got.detach()]

    identity, zeros, t1 = [[1.0, 0.0], [0.0, 1.0]], [0.0, 0.0], round(math.tanh(1), 6)
    check_cases(logits_of, [
        Case(([[[1.0, 0.0], [5.0, 5.0]]], identity, zeros, identity, zeros), [[t1, 0.0]],
             "the pooler reads the first position, [CLS], alone, and squashes it with tanh: "
             "tanh(1) = 0.761594"),
        Case(([[[0.0, 0.0], [2.0, 2.0]]], identity, zeros, identity, [0.5, -0.5]),
             [[0.5, -0.5]],
             "[CLS] is all zeros here, so the pooled vector is tanh(0) = 0 and only the "
             "classifier's bias is left; an average over the positions would not give 0"),
        Case(([[[1.0, 2.0], [0.0, 0.0]]], [[0.0, 1.0], [0.0, 0.0]], zeros, identity, zeros),
             [[round(math.tanh(2), 6), 0.0]],
             "a weight is stored [out, in], as nn.Linear keeps it: W @ x, that is x @ W.T; "
             "x @ W gives [0, 1] here, not [2, 0]"),
        Case(([[[1.0, 0.0], [9.0, 9.0]], [[0.0, 1.0], [9.0, 9.0]]], identity, zeros,
              [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]], [0.0, 0.0, 1.0]),
             [[t1, 0.0, round(t1 + 1, 6)], [0.0, t1, round(t1 + 1, 6)]],
             "two sentences, three labels: each row's pooled vector times each label's "
             "weights, plus that label's bias"),
    ], name="sentence_logits")


# ---- chapter 08 -------------------------------------------------------------------

def check_learning_signals(learning_signals: Callable[[int, int, str, float], float]) -> None:
    """Exercise 08.1: the positions of a batch that give a gradient, by objective."""
    check_cases(learning_signals, [
        Case((32, 128, "left-to-right", 0.15), 32 * 127.0,
             "left to right: every position but the last predicts the next piece"),
        Case((32, 128, "mlm", 0.15), 32 * 0.15 * 126,
             "a masked LM: 15% of the 126 pieces between [CLS] and [SEP], on average"),
        Case((32, 128, "mlm", 0.4), 32 * 0.4 * 126, "40% of 126 pieces per row"),
        Case((4, 8, "mlm", 0.01), 4.0, "at least one hidden piece per row"),
    ])


def check_clearly_better(clearly_better: Callable[[list[float], list[float]], bool]) -> None:
    """Exercise 08.2: a difference of means larger than the two spreads together."""
    check_cases(clearly_better, [
        Case(([0.8, 0.8], [0.4, 0.4]), True, "no spread at all: any gap is clear"),
        Case(([0.9, 0.7], [0.5, 0.5]), True,
             "gap 0.3; spreads 0.141 (the sample standard deviation) and 0: clear"),
        Case(([0.9, 0.5], [0.5, 0.5]), False,
             "gap 0.2, but our spread alone is 0.283: not clear"),
        Case(([0.5, 0.5], [0.8, 0.8]), False, "a loss is never a win"),
        Case(([0.6], [0.5]), True, "one score each: spreads of 0"),
    ])


# ---- chapter 10 -------------------------------------------------------------------

def check_attention_weights_bytes(
    attention_weights_bytes: Callable[[int, int, int, int], int],
) -> None:
    """Exercise 10.1: the bytes of one layer's attention weights that explicit attention keeps."""
    check_cases(attention_weights_bytes, [
        Case((1, 1, 3, 4), 36, "one head of 3 tokens: a 3 x 3 matrix of 4-byte values"),
        Case((1, 1, 6, 4), 144, "twice the length, four times the bytes: every token "
                                "weighs every other"),
        Case((2, 3, 3, 4), 216, "one matrix per sequence and per head"),
        Case((1, 1, 3, 2), 18, "bf16 values take 2 bytes each"),
    ])


def check_mfu(mfu: Callable[[float, int, int, float], float]) -> None:
    """Exercise 10.3: model FLOPs utilisation by the 6-FLOPs-per-weight count."""
    check_cases(mfu, [
        Case((1000.0, 1, 10, 7.2e7), 0.1, "one layer of h = 10 has 1,200 weights: 7,200 "
                                          "FLOPs a token, 7.2e6 FLOP/s of 7.2e7"),
        Case((1000.0, 2, 10, 7.2e7), 0.2, "twice the layers, twice the FLOPs per token"),
        Case((500.0, 1, 20, 7.2e7), 0.2, "h = 20: four times the weights of h = 10, at half "
                                         "the rate"),
        Case((0.0, 12, 768, 1e12), 0.0, "no tokens, no use"),
    ])


# ---- chapter 11 -------------------------------------------------------------------

def check_rank_rows(rank_rows: Callable[[list[int], int, int, int, int], list[int]]) -> None:
    """Exercise 11.1: the rows of a global batch that one rank takes."""
    order = [7, 3, 5, 1, 0, 2, 6, 4]
    check_cases(rank_rows, [
        Case((order, 0, 8, 0, 1), order, "alone, a process takes the whole batch"),
        Case((order, 0, 4, 0, 2), [7, 3], "rank 0 of 2 takes the first half of batch 0: a "
                                          "contiguous slice, not every other row"),
        Case((order, 0, 4, 1, 2), [5, 1], "rank 1 takes the slice after rank 0's"),
        Case((order, 1, 4, 1, 2), [6, 4], "batch 1 starts 4 rows into the epoch's order"),
        Case((order, 0, 3, 0, 2), None, "3 rows do not split over 2 processes: raise ValueError",
             raises=ValueError),
    ])


def check_averaged_gradients(averaged_gradients: Callable[[list[list[float]]], list[float]]
                             ) -> None:
    """Exercise 11.3: what every rank holds after DDP's all-reduce of the gradients."""
    check_cases(averaged_gradients, [
        Case(([[1.0, 2.0]],), [1.0, 2.0], "one rank: its gradient is already the average"),
        Case(([[1.0, 2.0], [3.0, 4.0]],), [2.0, 3.0],
             "average across ranks, one weight at a time; an all-reduce that sums would give "
             "[4.0, 6.0]"),
        Case(([[0.0], [0.0], [3.0]],), [1.0], "divide by the number of ranks"),
        Case(([[1.0, 2.0], [1.0]],), None, "every rank holds the same model: gradients of "
                                           "different sizes are an error (ValueError)",
             raises=ValueError),
    ])


# ---- chapter 09 -------------------------------------------------------------------

def check_favourite_offset(favourite_offset: Callable[[Any], int]) -> None:
    """Exercise 09.1: the relative position a head attends to most."""
    import torch

    def on(rows: list[list[float]]) -> int:
        return favourite_offset(torch.tensor(rows))

    on.__name__ = "favourite_offset"
    check_cases(on, [
        Case(([[1.0, 0, 0], [0, 1.0, 0], [0, 0, 1.0]],), 0, "every token attends to itself"),
        Case(([[0, 1.0, 0], [0, 0, 1.0], [1.0, 0, 0]],), 1,
             "rows 0 and 1 look one ahead (total 2); row 2's weight is at offset -2"),
        Case(([[1.0, 0, 0], [1.0, 0, 0], [0, 1.0, 0]],), -1,
             "rows 1 and 2 look one back (total 2), row 0 at itself (1)"),
        Case(([[0.5, 0.5], [0.5, 0.5]],), 0,
             "offsets -1 and 1 total 0.5 each, offset 0 totals 1"),
        Case(([[0, 1.0], [1.0, 0]],), -1, "offsets -1 and 1 tie at 1.0: the smaller wins"),
    ])


class _ReadOnlyModule(types.ModuleType):
    """This module, closed to assignment.

    Graded answers run in the same Python process as the checks, so an answer cell could
    otherwise replace a check (`bertbook.checks.check_size_rule = print`) and pass it.
    """

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"bertbook.checks is read-only: {name} cannot be replaced")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"bertbook.checks is read-only: {name} cannot be deleted")


sys.modules[__name__].__class__ = _ReadOnlyModule
