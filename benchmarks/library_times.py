"""How long the library README's two examples take on this machine, measured, not guessed.

The fine-tuning example (all-MiniLM-L6-v2 on Rotten Tomatoes snippets, the README's recipe)
and the pretraining example (bert-mini, 128 pieces, batch 32) are each timed for a few
optimiser steps after a warm-up step; the whole run's time is the median seconds per step
times its steps. Writes benchmarks/results/library_times.json and .md.

    python benchmarks/library_times.py            # about two minutes on 2 cores
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bertbook.datasets import minilm_dir, rotten_tomatoes
from bertlib import (
    BertConfig,
    BertForMaskedLM,
    BertForSequenceClassification,
    BertTokenizer,
    PretrainingCollator,
    Trainer,
    TrainingConfig,
    classification_features,
)
from bertlib.batch import PaddingCollator
from bertlib.finetuning.run import new_head_expected
from bertlib.pretraining.sentence_pairs import SentencePair
from bertlib.runtime import cpu_has_fast_bf16
from bertlib.tokenizer import SPECIAL_TOKENS, train_wordpiece

RESULTS = Path(__file__).resolve().parent / "results"


def seconds_per_step(trainer: Trainer, steps: int) -> list[float]:
    """Each step's time after one warm-up step (the first allocates and tunes)."""
    times: list[float] = []
    last = [time.perf_counter()]

    def clock(record: dict) -> None:
        now = time.perf_counter()
        times.append(now - last[0])
        last[0] = now

    trainer.callbacks.append(clock)
    trainer.train()
    return times[1:]


def fine_tuning_step(steps: int) -> dict:
    """The README's classifier: MiniLM, batch 32, texts cut at 128 pieces."""
    tokenizer = BertTokenizer.from_pretrained(minilm_dir(), max_length=128)
    train = rotten_tomatoes()["train"]
    features = classification_features(tokenizer, train[:32 * (steps + 1)])
    torch.manual_seed(0)
    with new_head_expected():
        model = BertForSequenceClassification.from_pretrained(minilm_dir(), num_labels=2)
    config = TrainingConfig(steps=steps + 1, batch_size=32, learning_rate=5e-5,
                            precision="fp32", progress=False)
    trainer = Trainer(model, features, PaddingCollator(tokenizer.pad_id), config)
    times = seconds_per_step(trainer, steps)
    return {"examples": len(train), "batch_size": 32, "seconds_per_step": times}


def pretraining_step(steps: int) -> dict:
    """The README's pretraining run: bert-mini, vocabulary 8,000, 128 pieces, batch 32."""
    texts = [example.text for example in rotten_tomatoes()["train"]]
    tokenizer = train_wordpiece(texts, 8000, max_length=128)
    generator = torch.Generator().manual_seed(0)
    ordinary = (len(SPECIAL_TOKENS), tokenizer.vocab_size)  # row pieces: no special tokens
    rows = torch.randint(*ordinary, (32 * (steps + 1), 125), generator=generator).tolist()
    pairs = [SentencePair(tuple(row[:63]), tuple(row[63:]), False) for row in rows]
    torch.manual_seed(0)
    model = BertForMaskedLM(BertConfig.preset("bert-mini", vocab_size=tokenizer.vocab_size,
                                              max_position_embeddings=128))
    config = TrainingConfig(steps=steps + 1, batch_size=32, learning_rate=1e-3,
                            precision="fp32", progress=False)
    collator = PretrainingCollator(tokenizer, next_sentence=False)
    trainer = Trainer(model, pairs, collator, config)
    return {"seconds_per_step": seconds_per_step(trainer, steps)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=8, help="timed steps per example")
    args = parser.parse_args(argv)
    tuning, pretraining = fine_tuning_step(args.steps), pretraining_step(args.steps)
    tuning_step = statistics.median(tuning["seconds_per_step"])
    pretraining_step_s = statistics.median(pretraining["seconds_per_step"])
    epochs = 3  # the README's recipe
    tuning_minutes = epochs * tuning["examples"] / tuning["batch_size"] * tuning_step / 60
    pretraining_minutes = 2000 * pretraining_step_s / 60  # the README's run: 2,000 steps
    summary = {
        "machine": f"{platform.processor() or platform.machine()}, "
                   f"{torch.get_num_threads()} threads, torch {torch.__version__}, "
                   f"fast bf16: {cpu_has_fast_bf16()}",
        "fine_tuning": {**tuning, "median_seconds_per_step": tuning_step,
                        "minutes_for_3_epochs": tuning_minutes},
        "pretraining": {**pretraining, "median_seconds_per_step": pretraining_step_s,
                        "minutes_for_2000_steps": pretraining_minutes},
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "library_times.json").write_text(json.dumps(summary, indent=2) + "\n")
    table = ("| example | median s/step | whole run (estimated from the step) |\n|---|---|---|\n"
             f"| fine-tune MiniLM, {tuning['examples']:,} texts, 3 epochs, batch 32 | "
             f"{tuning_step:.2f} | {tuning_minutes:.0f} min |\n"
             f"| pretrain bert-mini, 2,000 steps, batch 32 x 128 | {pretraining_step_s:.2f} | "
             f"{pretraining_minutes:.0f} min |\n\n{summary['machine']}\n")
    (RESULTS / "library_times.md").write_text(table)
    print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
