"""How long one AdamW update takes on the CPU: torch's per-tensor loop against its fused
kernel, for the models the book fine-tunes and pretrains.

`bertlib.training.trainer.adamw_and_schedule` asks for the fused kernel wherever torch has
one (the CPU and CUDA). This script is the measurement behind that choice: the update alone,
with made-up gradients, the two implementations in turns (loop, fused, loop, fused...) so
that a slow moment of the machine falls on both, and the median of each round's median.
Run it alone on the machine.

    python benchmarks/adamw_step.py             # about a minute on 2 cores
    python benchmarks/adamw_step.py --rounds 1  # a quick look
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from torch import nn

from bertbook.datasets import minilm_dir
from bertlib.core.config import BertConfig
from bertlib.finetuning.models import BertForSequenceClassification
from bertlib.pretraining.models import BertForPreTraining
from bertlib.training.optimizer import parameter_groups

STEPS_PER_ROUND = 30
WARM_UP_STEPS = 5


def models() -> dict[str, nn.Module]:
    """Chapter 07's MiniLM classifier and chapter 08's two pretraining sizes."""
    return {
        "all-MiniLM-L6-v2 classifier": BertForSequenceClassification(
            BertConfig.from_json(minilm_dir()), num_labels=2),
        "bert-tiny, 4k vocabulary": BertForPreTraining(
            BertConfig.preset("bert-tiny", vocab_size=4000)),
        "bert-mini, 4k vocabulary": BertForPreTraining(
            BertConfig.preset("bert-mini", vocab_size=4000)),
    }


def median_update_seconds(model: nn.Module, fused: bool) -> float:
    """The median time of one optimiser step over STEPS_PER_ROUND steps, after a warm-up
    (the first steps allocate AdamW's two moment buffers)."""
    optimizer = torch.optim.AdamW(parameter_groups(model, 0.01), lr=1e-4, fused=fused)
    for parameter in model.parameters():
        parameter.grad = torch.randn_like(parameter) * 1e-3
    times = []
    for _ in range(WARM_UP_STEPS + STEPS_PER_ROUND):
        started = time.perf_counter()
        optimizer.step()
        times.append(time.perf_counter() - started)
    return statistics.median(times[WARM_UP_STEPS:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="loop/fused pairs per model")
    args = parser.parse_args()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, "
          f"median of {args.rounds} rounds of {STEPS_PER_ROUND} updates")
    print(f"{'model':30} {'weights':>8} {'loop ms':>8} {'fused ms':>9} {'ratio':>6}")
    for name, model in models().items():
        rounds = {False: [], True: []}
        for _ in range(args.rounds):
            for fused in (False, True):
                rounds[fused].append(median_update_seconds(model, fused))
        loop, fused = statistics.median(rounds[False]), statistics.median(rounds[True])
        weights = sum(p.numel() for p in model.parameters()) / 1e6
        print(f"{name:30} {weights:7.1f}M {loop * 1e3:8.2f} {fused * 1e3:9.2f} "
              f"{loop / fused:5.1f}x")


if __name__ == "__main__":
    main()
