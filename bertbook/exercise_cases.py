"""The cases each code exercise is graded on, and the plain form of an answer to them.

`make grade` never reaches a verdict inside the student's kernel, where the student's code
can redefine `type` or `abs`, patch `math.isclose` or return a list whose `==` always says
yes. Instead a code exercise's hidden tests call `record_answers`, which runs the student's
functions on the exercise's cases and writes what came back, as plain JSON, into the
folder the grader shares with the kernel. The grader then, in a process of its own, runs
the instructor's reference solution on the same cases and compares the two
(tools/grading/verdicts.py).

The cases are the fixed ones below plus DRAWN cases drawn from a seed the grader picks for
each batch, so an answer that hard-codes the published cases fails the drawn ones. This
file is public on purpose: it says how cases are drawn, not what their answers are.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import random
import string
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["SEED_VARIABLE", "ANSWERS_VARIABLE", "DRAWN", "Call", "Cases", "CASES",
           "cases_for", "plain", "answers", "record_answers"]

SEED_VARIABLE = "BERTBOOK_CASES_SEED"  # set by the grader in the kernel's environment
ANSWERS_VARIABLE = "BERTBOOK_ANSWERS_DIR"  # where the kernel writes its answers
DRAWN = 6  # cases drawn at grading time, per exercise


@dataclass(frozen=True)
class Call:
    """One call of a student's function: its name and its arguments."""

    function: str
    args: tuple[Any, ...]


@dataclass(frozen=True)
class Cases:
    """An exercise's fixed calls and how to draw one more from a random generator."""

    fixed: tuple[Call, ...]
    draw: Callable[[random.Random], Call]


def _tensor_generator(rng: random.Random):
    """A torch generator seeded from `rng`: tensors drawn the same way in every process."""
    import torch

    return torch.Generator().manual_seed(rng.getrandbits(62))


def _randn(rng: random.Random, *shape: int):
    import torch

    return torch.randn(*shape, generator=_tensor_generator(rng))


# ---- how each exercise's cases are drawn --------------------------------------------

def _run_minutes(rng: random.Random) -> Call:
    return Call("run_minutes", (rng.randrange(10**6, 10**9), rng.randrange(10**7, 10**11),
                                rng.choice([65e12, 312e12, 989e12]), rng.uniform(0.05, 0.6)))


def _shuffled(rng: random.Random) -> Call:
    items = [rng.choice(string.ascii_lowercase) for _ in range(rng.randrange(0, 9))]
    return Call("shuffled", (items, rng.randrange(1000)))


def _unigram_accuracy(rng: random.Random) -> Call:
    favourite, others = rng.randrange(50), [rng.randrange(50) for _ in range(rng.randrange(4))]
    train = [favourite] * (len(others) + 1) + others  # no tie: the favourite is a majority
    rng.shuffle(train)
    return Call("unigram_accuracy", (train, [rng.randrange(50) for _ in range(1, 9)]
                                     + [favourite] * rng.randrange(3)))


def _offsets_for(rng: random.Random) -> Call:
    return Call("offsets_for", (rng.choice(["left", "right", "both", "both", "above"]),
                                rng.randrange(1, 9)))


def _pieces_to_words(rng: random.Random) -> Call:
    tokens = []
    for _ in range(rng.randrange(0, 6)):
        word = "".join(rng.choice("abcdefghij!") for _ in range(rng.randrange(1, 8)))
        cuts = sorted(rng.sample(range(1, len(word)), min(len(word) - 1, rng.randrange(3))))
        pieces = [word[a:b] for a, b in zip([0, *cuts], [*cuts, len(word)])]
        tokens += [pieces[0], *("##" + piece for piece in pieces[1:])]
    if rng.random() < 0.3:
        tokens.insert(0, "##x")
    return Call("pieces_to_words", (tokens,))


def _segment_ids(rng: random.Random) -> Call:
    second = rng.choice([None, rng.randrange(0, 12)])
    return Call("segment_ids", (rng.randrange(0, 12),) + (() if second is None else (second,)))


def _split_or_merge(rng: random.Random) -> Call:
    heads, head_size = rng.randrange(1, 5), rng.randrange(1, 5)
    batch, length = rng.randrange(1, 4), rng.randrange(1, 6)
    if rng.random() < 0.5:
        return Call("split_heads", (_randn(rng, batch, length, heads * head_size), heads))
    return Call("merge_heads", (_randn(rng, batch, heads, length, head_size),))


def _layer_norm(rng: random.Random) -> Call:
    rows, width = rng.randrange(1, 5), rng.randrange(2, 9)
    return Call("layer_norm", (_randn(rng, rows, width) * 3 + 1, _randn(rng, width),
                               _randn(rng, width)))


def _feed_forward_share(rng: random.Random) -> Call:
    from bertlib.core.config import BertConfig

    heads = rng.randrange(1, 5)
    config = BertConfig(vocab_size=rng.randrange(50, 5000),
                        hidden_size=heads * 8 * rng.randrange(1, 5),
                        num_hidden_layers=rng.randrange(1, 7), num_attention_heads=heads,
                        intermediate_size=rng.randrange(8, 400),
                        max_position_embeddings=rng.randrange(8, 600))
    return Call("feed_forward_share", (config,))


def _expected_coverage(rng: random.Random) -> Call:
    return Call("expected_coverage", (rng.randrange(0, 50), round(rng.uniform(0.01, 0.9), 3)))


def _span_continuation(rng: random.Random) -> Call:
    return Call("span_continuation", (rng.randrange(0, 15), rng.randrange(0, 5)))


def _apply_masking(rng: random.Random) -> Call:
    ids = [rng.randrange(5, 100) for _ in range(rng.randrange(1, 12))]
    chosen = rng.sample(range(len(ids)), rng.randrange(0, len(ids) + 1))
    draws = [rng.random() for _ in chosen]
    return Call("apply_masking", (ids, chosen, draws, [rng.randrange(5, 100) for _ in chosen], 4))


def _cosine_lr_at(rng: random.Random) -> Call:
    warmup = rng.randrange(0, 20)
    steps = warmup + rng.randrange(1, 200)
    return Call("cosine_lr_at", (rng.randrange(0, steps + 20), rng.uniform(1e-5, 1.0), warmup,
                                 steps))


PARAMETER_NAMES = ["embeddings.word_embeddings.weight", "embeddings.LayerNorm.bias",
                   "encoder.layer.{n}.attention.self.query.weight",
                   "encoder.layer.{n}.attention.output.LayerNorm.weight",
                   "encoder.layer.{n}.intermediate.dense.bias", "pooler.dense.weight",
                   "cls.predictions.bias", "cls.predictions.transform.LayerNorm.weight"]


def _decays(rng: random.Random) -> Call:
    return Call("decays", (rng.choice(PARAMETER_NAMES).format(n=rng.randrange(24)),))


def _masked_lm_loss(rng: random.Random) -> Call:
    import torch

    batch, length, vocab = rng.randrange(1, 4), rng.randrange(1, 7), rng.randrange(2, 12)
    generator = _tensor_generator(rng)
    labels = torch.randint(0, vocab, (batch, length), generator=generator)
    labels[torch.rand(batch, length, generator=generator) < rng.uniform(0, 1)] = -100
    return Call("masked_lm_loss", (_randn(rng, batch, length, vocab) * 2, labels))


def _all_mask(rng: random.Random) -> Call:
    from bertlib.pretraining.masking import MaskingRecipe

    return Call("all_mask", (MaskingRecipe(probability=round(rng.uniform(0.05, 0.5), 2),
                                           max_predictions=rng.randrange(1, 80),
                                           whole_word=rng.random() < 0.5),))


def _best_answer_span(rng: random.Random) -> Call:
    length = rng.randrange(1, 14)
    scores = [[round(rng.gauss(0, 2), 3) for _ in range(length)] for _ in range(2)]
    return Call("best_answer_span", (*scores, rng.randrange(1, 6)))


def _sentence_logits(rng: random.Random) -> Call:
    batch, length, hidden, labels = (rng.randrange(1, 4), rng.randrange(1, 5),
                                     rng.randrange(2, 7), rng.randrange(1, 4))
    return Call("sentence_logits", (_randn(rng, batch, length, hidden), _randn(rng, hidden, hidden),
                                    _randn(rng, hidden), _randn(rng, labels, hidden),
                                    _randn(rng, labels)))


def _learning_signals(rng: random.Random) -> Call:
    return Call("learning_signals", (rng.randrange(1, 100), rng.randrange(2, 300),
                                     rng.choice(["mlm", "left-to-right"]),
                                     round(rng.uniform(0.01, 0.6), 2)))


def _clearly_better(rng: random.Random) -> Call:
    def scores() -> list[float]:
        centre = rng.uniform(0.4, 0.9)
        return [round(centre + rng.gauss(0, 0.03), 3) for _ in range(rng.randrange(1, 6))]

    return Call("clearly_better", (scores(), scores()))


def _favourite_offset(rng: random.Random) -> Call:
    import torch

    size = rng.randrange(3, 8)
    return Call("favourite_offset", (torch.softmax(_randn(rng, size, size) * 3, dim=-1),))


def _attention_weights_bytes(rng: random.Random) -> Call:
    return Call("attention_weights_bytes", (rng.randrange(1, 64), rng.randrange(1, 17),
                                            rng.randrange(1, 1025), rng.choice([2, 4])))


def _mfu(rng: random.Random) -> Call:
    return Call("mfu", (rng.uniform(1e3, 1e6), rng.randrange(1, 25), rng.randrange(64, 2049),
                        rng.choice([65e12, 312e12, 989e12])))


def _rank_rows(rng: random.Random) -> Call:
    world_size = rng.randrange(1, 5)
    batch_size = world_size * rng.randrange(1, 5) + (rng.random() < 0.2)
    order = rng.sample(range(100), 3 * batch_size)
    return Call("rank_rows", (order, rng.randrange(3), batch_size, rng.randrange(world_size),
                              world_size))


def _averaged_gradients(rng: random.Random) -> Call:
    size = rng.randrange(1, 6)
    ranks = [[round(rng.gauss(0, 1), 3) for _ in range(size)] for _ in range(rng.randrange(1, 5))]
    if rng.random() < 0.15:
        ranks[-1].append(0.5)  # a rank whose model differs: refused
    return Call("averaged_gradients", (ranks,))


def _fixed(function: str, *calls: tuple[Any, ...]) -> tuple[Call, ...]:
    return tuple(Call(function, args) for args in calls)


def _fixed_tensors() -> dict[str, tuple[Call, ...]]:
    """The fixed cases that need torch, built only when an exercise asks for them."""
    import torch

    x = torch.arange(24.0).reshape(2, 3, 4)
    return {
        "3.1": _fixed("causal_mask", (1,), (3,)),
        "3.4": (Call("split_heads", (x, 2)), Call("merge_heads", (x.reshape(2, 3, 2, 2),))),
        "4.1": _fixed("layer_norm", (torch.tensor([[1.0, 2.0, 3.0]]), torch.ones(3),
                                     torch.zeros(3))),
        "6.4": _fixed("masked_lm_loss", (torch.zeros(1, 2, 3), torch.tensor([[2, -100]])),
                      (torch.zeros(1, 2, 3), torch.tensor([[-100, -100]]))),
        "7.3": _fixed("sentence_logits", (x.float(), torch.eye(4), torch.zeros(4),
                                          torch.ones(1, 4), torch.zeros(1))),
        "9.1": _fixed("favourite_offset", (torch.eye(4),), (torch.diag(torch.ones(3), -1),),
                      (torch.diag(torch.ones(2), 2),)),
    }


def _fixed_config() -> tuple[Call, ...]:
    from bertlib.core.config import BertConfig

    return _fixed("feed_forward_share", (BertConfig.preset("bert-base"),))


def _fixed_recipe() -> tuple[Call, ...]:
    from bertlib.pretraining.masking import MaskingRecipe

    return _fixed("all_mask", (MaskingRecipe(probability=0.3, max_predictions=7),))


CASES: dict[str, Callable[[], Cases]] = {
    "0.1": lambda: Cases(_fixed("run_minutes", (110_000_000, 10**9, 65e12, 0.5),
                                (1000, 60, 1e6, 1.0)), _run_minutes),
    "0.2": lambda: Cases(_fixed("shuffled", (["a", "b", "c", "d"], 0), ([], 3)), _shuffled),
    "1.1": lambda: Cases(_fixed("unigram_accuracy", ([9], [9, 9, 1, 1]), ([4, 4, 2], [4, 2, 2]),
                                ([], [1])), _unigram_accuracy),
    "1.2": lambda: Cases(_fixed("offsets_for", ("left", 2), ("right", 3), ("both", 2),
                                ("both", 5)), _offsets_for),
    "2.1": lambda: Cases(_fixed("pieces_to_words", (["un", "##believ", "##able", "!", "##x"],)),
                         _pieces_to_words),
    "2.2": lambda: Cases(_fixed("segment_ids", (0, 0), (5,), (1, 2)), _segment_ids),
    "3.1": lambda: Cases(_fixed_tensors()["3.1"],
                         lambda rng: Call("causal_mask", (rng.randrange(1, 9),))),
    "3.2": lambda: Cases(_fixed("attention_flops", (4, 8)),
                         lambda rng: Call("attention_flops", (rng.randrange(1, 1025),
                                                              rng.randrange(1, 1025)))),
    "3.4": lambda: Cases(_fixed_tensors()["3.4"], _split_or_merge),
    "4.1": lambda: Cases(_fixed_tensors()["4.1"], _layer_norm),
    "4.2": lambda: Cases(_fixed_config(), _feed_forward_share),
    "5.1": lambda: Cases(_fixed("expected_coverage", (2, 0.5), (0, 0.15), (1, 0.2)),
                         _expected_coverage),
    "5.2": lambda: Cases(_fixed("span_continuation", (5, 2), (3, 0)), _span_continuation),
    "5.4": lambda: Cases(_fixed("apply_masking", ([1, 2, 3], [0, 1, 2], [0.79, 0.89, 0.9],
                                                  [7, 8, 9], 4)), _apply_masking),
    "6.1": lambda: Cases(_fixed("cosine_lr_at", *((step, 2.0, 10, 110)
                                                  for step in (0, 5, 10, 60, 110, 200))),
                         _cosine_lr_at),
    "6.2": lambda: Cases(_fixed("decays", ("encoder.layer.3.output.dense.weight",),
                                ("encoder.layer.3.output.dense.bias",),
                                ("embeddings.LayerNorm.weight",)), _decays),
    "6.4": lambda: Cases(_fixed_tensors()["6.4"], _masked_lm_loss),
    "6.5": lambda: Cases(_fixed_recipe(), _all_mask),
    "7.2": lambda: Cases(_fixed("best_answer_span", ([0.0, 1.0, 0.0], [0.0, 0.0, 2.0], 2),
                                ([1.0, 1.0], [1.0, 1.0], 2)), _best_answer_span),
    "7.3": lambda: Cases(_fixed_tensors()["7.3"], _sentence_logits),
    "8.1": lambda: Cases(_fixed("learning_signals", (1, 130, "mlm", 0.15),
                                (2, 2, "left-to-right", 0.15), (10, 66, "mlm", 0.5)),
                         _learning_signals),
    "8.2": lambda: Cases(_fixed("clearly_better", ([0.7, 0.7, 0.7], [0.6, 0.6, 0.6]),
                                ([0.6, 0.7], [0.6, 0.7]), ([1.0, 0.0], [0.0, 0.0])),
                         _clearly_better),
    "9.1": lambda: Cases(_fixed_tensors()["9.1"], _favourite_offset),
    "10.1": lambda: Cases(_fixed("attention_weights_bytes", (8, 12, 512, 4), (1, 1, 1, 2)),
                          _attention_weights_bytes),
    "10.3": lambda: Cases(_fixed("mfu", (2_000.0, 2, 10, 1e8)), _mfu),
    "11.1": lambda: Cases(_fixed("rank_rows", (list(range(8)), 0, 4, 1, 2),
                                 ([5, 3, 1, 0, 2, 4], 1, 3, 0, 1), (list(range(8)), 0, 3, 0, 2)),
                          _rank_rows),
    "11.3": lambda: Cases(_fixed("averaged_gradients", ([[1.0, 2.0], [3.0, 6.0]],),
                                 ([[1.0], [1.0, 2.0]],)), _averaged_gradients),
}


def cases_for(exercise: str, seed: int | None) -> list[Call]:
    """The exercise's fixed calls, then DRAWN calls drawn from `seed` (none when None).
    Each exercise draws from its own stream, so adding an exercise changes no other's."""
    cases = CASES[exercise]()
    if seed is None:
        return list(cases.fixed)
    rng = random.Random(f"{seed}/{exercise}")
    return [*cases.fixed, *(cases.draw(rng) for _ in range(DRAWN))]


def plain(value: Any) -> Any:
    """`value` as JSON-ready data that keeps its exact type: a tuple, a tensor or a
    dataclass is tagged; any other type, or a subclass of a built-in one, becomes
    {"unsupported": its name}, which matches no reference answer. So an object whose `==`
    always says yes arrives as what it is."""
    kind = type(value)
    if value is None or kind in (bool, int, float, str):
        return value
    if kind is list:
        return [plain(item) for item in value]
    if kind is tuple:
        return {"tuple": [plain(item) for item in value]}
    if kind is dict:
        return {"dict": [[plain(key), plain(item)] for key, item in value.items()]}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
        return {"dataclass": kind.__qualname__, "fields": fields}
    if kind.__module__ == "torch" and kind.__name__ == "Tensor":
        tensor = value.detach().cpu()
        return {"tensor": str(tensor.dtype), "shape": list(tensor.shape),
                "values": tensor.flatten().tolist()}
    return {"unsupported": kind.__name__}


def _outcome(function: Callable[..., Any], call: Call) -> dict[str, Any]:
    """What one call gave: its result and its arguments afterwards (an answer that changes
    its input has a bug), or the exception it raised, named with its base classes."""
    args = copy.deepcopy(call.args)
    try:
        result = function(*args)
    except Exception as error:  # noqa: BLE001 - a raised error is an answer too
        return {"raised": [base.__name__ for base in type(error).__mro__]}
    return {"returned": plain(result), "arguments": plain(args)}


def answers(exercise: str, functions: dict[str, Callable[..., Any]], seed: int | None
            ) -> list[dict[str, Any]]:
    """The outcome of every case of `exercise`, calling `functions` by name."""
    return [_outcome(functions[call.function], call) for call in cases_for(exercise, seed)]


def record_answers(exercise: str, **functions: Callable[..., Any]) -> None:
    """Run the student's functions on the exercise's cases. While grading, write the
    outcomes where the grader reads them; otherwise just run the fixed cases, so the
    instructor's copy shows that its hidden tests run."""
    seed, folder = os.environ.get(SEED_VARIABLE), os.environ.get(ANSWERS_VARIABLE)
    outcomes = answers(exercise, functions, int(seed) if seed else None)
    if folder:
        path = Path(folder) / f"{exercise}.json"
        path.write_text(json.dumps(outcomes))
