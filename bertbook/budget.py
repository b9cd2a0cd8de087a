"""How long a chapter's arithmetic takes on a GPU, estimated before it runs.

A chapter lists the work it will do at a size (each training run or evaluation pass, in
FLOPs, from the model's shape and the tokens it reads) and prints what that costs on a Colab
T4, on an A100 and on the GPU at hand. Why an estimate and not a stopwatch: a reader deciding
whether to press "Run all" needs the number first, and the budget a size must keep (30
minutes on a T4, 45 for pretraining) is checked by a test without any GPU.

The rate is an assumption, stated once: a GPU sustains ASSUMED_UTILISATION of its datasheet
half-precision peak on these small models (short sequences and narrow layers keep the
tensor cores far from full). `make gpu-check` measures the real share on BERT-base; where it
is higher, these minutes are an upper bound.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from bertbook.measure import (
    DATASHEET_TFLOPS,
    datasheet_peak_flops,
    forward_flops_per_token,
    training_flops_per_token,
)
from bertlib.core.config import BertConfig

__all__ = ["ASSUMED_UTILISATION", "REFERENCE_GPUS", "GPU_BUDGET_MINUTES",
           "PRETRAINING_BUDGET_MINUTES", "WIKITEXT_TOKENS_PER_ARTICLE", "Work", "training_work",
           "inference_work", "pretraining_work", "fine_tuning_work", "minutes_on",
           "budget_report"]

ASSUMED_UTILISATION = 0.15
REFERENCE_GPUS = ("T4", "A100")  # Colab's free GPU, and its fastest one
GPU_BUDGET_MINUTES = 30.0  # a chapter at the gpu size, on a Colab T4
PRETRAINING_BUDGET_MINUTES = 45.0  # chapter 06
# WikiText-103's training split: 103,227,021 words in 28,475 articles (Merity et al., 2016)
WIKITEXT_TOKENS_PER_ARTICLE = 103_227_021 / 28_475


@dataclass(frozen=True)
class Work:
    """One piece of a chapter's arithmetic: what it is, and its floating-point operations."""

    what: str
    flops: float


def training_work(what: str, config: BertConfig, tokens: float, max_seq_length: int,
                  predicted_share: float = 0.15) -> Work:
    """Training on `tokens` tokens: forward and backward, about three forward passes.
    predicted_share: the share of positions an output layer over the vocabulary scores
    (0.15 for a masked LM; 1.0 for a left-to-right one or a tagger)."""
    return Work(what, tokens * training_flops_per_token(config, max_seq_length, predicted_share))


def inference_work(what: str, config: BertConfig, tokens: float, max_seq_length: int) -> Work:
    """A forward pass over `tokens` tokens, with no output layer over the vocabulary."""
    return Work(what, tokens * forward_flops_per_token(config, max_seq_length, predicted_share=0.0))


def pretraining_work(settings: dict, what: str = "pretraining",
                     predicted_share: float = 0.15) -> Work:
    """A run of bertbook.pretrain with `settings` (a size of its SIZES): steps x batch x seq
    tokens through the preset model, its output layer scoring `predicted_share` of them
    (a masked LM's 15%; all of them for a left-to-right model)."""
    config = BertConfig.preset(settings["model"], vocab_size=settings["vocab_size"],
                               max_position_embeddings=settings["max_seq_length"])
    tokens = settings["steps"] * settings["batch_size"] * settings["max_seq_length"]
    return training_work(f"{what}: {settings['model']}, {settings['steps']:,} steps of "
                         f"{settings['batch_size']} x {settings['max_seq_length']}", config, tokens,
                         settings["max_seq_length"], predicted_share)


def fine_tuning_work(what: str, config: BertConfig, examples_seen: float,
                     length: int) -> Work:
    """Fine-tuning that reads `examples_seen` examples (epochs x examples, or the minimum
    steps x batch), each padded to `length` pieces: an upper bound, as most batches are
    shorter. The task heads are small next to the encoder and are left out."""
    return training_work(what, config, examples_seen * length, length, predicted_share=0.0)


def minutes_on(work: Sequence[Work], peak_flops: float) -> float:
    """Minutes for `work` at ASSUMED_UTILISATION of a `peak_flops` GPU."""
    return sum(piece.flops for piece in work) / (peak_flops * ASSUMED_UTILISATION) / 60


def budget_report(work: Sequence[Work], device: torch.device | None = None) -> str:
    """What a chapter prints at its top: the `gpu` size's work, and its minutes on the
    reference GPUs (and on this machine's GPU, when there is one)."""
    if not work:
        return "at the gpu size: no model is trained here, so no GPU arithmetic worth estimating"
    total = sum(piece.flops for piece in work)
    lines = [f"at the gpu size: {total / 1e15:,.2f} PFLOP of arithmetic"]
    lines += [f"  {piece.what}: {piece.flops / 1e15:,.2f} PFLOP" for piece in work]
    estimates = [f"{name} {minutes_on(work, DATASHEET_TFLOPS[name] * 1e12):,.0f} min"
                 for name in REFERENCE_GPUS]
    here = datasheet_peak_flops(device) if device is not None else None
    if here is not None:
        name = torch.cuda.get_device_name(device)
        estimates.append(f"this GPU ({name}) {minutes_on(work, here):,.0f} min")
    lines.append(f"about: {'; '.join(estimates)} (at {ASSUMED_UTILISATION:.0%} of each "
                 "GPU's half-precision peak; reading and preparing data not included)")
    return "\n".join(lines)
