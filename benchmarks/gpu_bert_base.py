"""The pretraining step's levers on one CUDA GPU, one at a time: BERT-base (and chapter
06's gpu preset) at length 128, the library's precision policy. Each row adds one lever to
the row above and reports tokens per second, model FLOPs utilisation (MFU: chapter 10's
FLOP count against the datasheet's dense bf16 peak), peak memory and the attention kernel:

1. as the trainer stepped before: the masked LM from labels alone (a boolean gather, so a
   host sync each step and a graph break under torch.compile), an all-ones attention mask,
   AdamW over each tensor;
2. fixed slots: the collator's `masked_positions`, so the head gathers a fixed number;
3. no all-ones mask: the trainer leaves it out, and attention may take the flash kernel;
4. fused AdamW: one kernel for every weight's update;
5. torch.compile of model and loss (the trainer's `compile=True`);
6. a batch twice as large.

Results go to a JSON file row by row, so a run stopped by a time limit keeps what finished;
after the last row the profiler's top operators say where the best step's time goes.

    python benchmarks/gpu_bert_base.py --json results.json
    python benchmarks/gpu_bert_base.py --dry-run   # bert-tiny on the CPU: tries the script

Without a CUDA device (and without --dry-run) it says so and exits with status 2.
"""

import argparse
import json
import math
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

from bertbook.measure import (
    datasheet_peak_flops,
    native_logs_silenced,
    training_flops_per_token,
    training_step,
)
from bertlib.batch import IGNORE_INDEX
from bertlib.core.config import BertConfig
from bertlib.pretraining.models import BertForPreTraining
from bertlib.runtime import resolve_precision
from bertlib.training.trainer import without_full_attention_mask

SDPA_KERNELS = {  # profiler operator names -> the kernel's usual name
    "_scaled_dot_product_flash_attention": "flash",
    "_scaled_dot_product_efficient_attention": "memory-efficient",
    "_scaled_dot_product_cudnn_attention": "cuDNN",
    "_scaled_dot_product_attention_math": "math (unfused)",
}


def profiled(run: Callable[[], object]) -> list:
    """The profiler's operator table of one call of `run` (the GPU's too, where there is
    one), its own log lines kept out of the output."""
    activities = [ProfilerActivity.CPU]
    if torch.cuda.is_available():
        activities.append(ProfilerActivity.CUDA)
    with native_logs_silenced(), profile(activities=activities) as profiler:
        run()
    return profiler.key_averages()


def attention_kernels(run: Callable[[], object]) -> list[str]:
    """Which scaled-dot-product-attention kernels one call of `run` used, by the operator
    names PyTorch's profiler records."""
    names = {event.key for event in profiled(run)}
    return sorted({kernel for operator, kernel in SDPA_KERNELS.items()
                   if any(operator in name for name in names)})


LEVERS = ("labels alone, all-ones mask, AdamW", "+ fixed slots", "+ no all-ones mask",
          "+ fused AdamW", "+ torch.compile", "+ batch x2")


def fixed_slot_batch(batch_size: int, length: int, vocab_size: int, share: float = 0.15
                     ) -> dict[str, torch.Tensor]:
    """Full rows (no padding) with ceil(share x length) hidden pieces a row at random
    places between [CLS] and [SEP], their places in `masked_positions`, and sentence labels;
    the same every call."""
    generator = torch.Generator().manual_seed(1)
    slots = math.ceil(share * length)
    ids = torch.randint(1000, vocab_size, (batch_size, length), generator=generator)
    places = torch.rand(batch_size, length - 2, generator=generator).argsort(-1)[:, :slots] + 1
    places = places.sort(-1).values
    labels = torch.full_like(ids, IGNORE_INDEX).scatter(1, places, ids.gather(1, places))
    return {"input_ids": ids.scatter(1, places, 103), "attention_mask": torch.ones_like(ids),
            "token_type_ids": (torch.arange(length) >= length // 2).long().expand_as(ids),
            "labels": labels, "masked_positions": places,
            "next_sentence_label": torch.randint(0, 2, (batch_size,), generator=generator)}


def lever_batch(lever: int, batch_size: int, length: int, vocab_size: int
                ) -> dict[str, torch.Tensor]:
    """The batch row `lever` of the table steps on (see the module's docstring)."""
    batch = fixed_slot_batch(batch_size * (2 if lever >= 5 else 1), length, vocab_size)
    if lever == 0:
        del batch["masked_positions"]
    return batch if lever < 2 else without_full_attention_mask(batch)


def measure(preset: str, lever: int, args, device: torch.device) -> dict:
    """One row: a fresh model with levers 0..lever, its median step and what it achieves."""
    precision = resolve_precision("auto", device) if device.type == "cuda" else "fp32"
    config = BertConfig.preset(preset)
    torch.manual_seed(0)
    model = BertForPreTraining(config).to(device)
    compile_options = {} if device.type == "cuda" else {"backend": "eager"}  # dry run
    step_model = torch.compile(model, **compile_options) if lever >= 4 else model
    fused = {"fused": True} if lever >= 3 else {"foreach": True}
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, **fused)
    batch = {name: tensor.to(device) for name, tensor
             in lever_batch(lever, args.batch_size, args.max_seq_length,
                            config.vocab_size).items()}
    step = training_step(step_model, batch, precision, optimizer=optimizer)
    started = time.perf_counter()
    for _ in range(args.untimed_steps):
        step()
    warm_up_s = time.perf_counter() - started
    kernels = attention_kernels(step)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    seconds = []
    for _ in range(args.steps):
        started = time.perf_counter()
        step()  # returns the loss as a float, so it waits for the GPU
        seconds.append(time.perf_counter() - started)
    rows, length = batch["input_ids"].shape
    tokens_per_second = rows * length / statistics.median(seconds)
    predicted = math.ceil(0.15 * length) / length
    achieved = tokens_per_second * training_flops_per_token(config, length, predicted)
    peak = datasheet_peak_flops(device)
    return {"preset": preset, "lever": LEVERS[lever], "precision": precision,
            "batch_size": rows, "max_seq_length": length, "attention_kernels": kernels,
            "tokens_per_second": round(tokens_per_second),
            "achieved_tflops": round(achieved / 1e12, 2),
            "mfu": None if peak is None else round(achieved / peak, 3),
            "peak_memory_gib": (round(torch.cuda.max_memory_allocated() / 2**30, 2)
                                if device.type == "cuda" else None),
            "median_step_s": round(statistics.median(seconds), 4),
            "warm_up_s": round(warm_up_s, 1), "step": step}


def time_breakdown(step: Callable[[], object], top: int = 12) -> list[dict]:
    """Where one step's device time goes: the operators that took the most, by the
    profiler (CPU time where there is no GPU)."""
    key = "self_device_time_total" if torch.cuda.is_available() else "self_cpu_time_total"
    events = sorted(profiled(step), key=lambda e: getattr(e, key, 0), reverse=True)
    total = sum(getattr(e, key, 0) for e in events) or 1
    return [{"operator": e.key, "share": round(getattr(e, key, 0) / total, 3)}
            for e in events[:top]]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--presets", nargs="+", default=["bert-base", "bert-small"])
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--max-seq-length", type=int, default=128)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--untimed-steps", type=int, default=5)
    parser.add_argument("--json", type=Path, help="write the rows here as each finishes")
    parser.add_argument("--dry-run", action="store_true",
                        help="bert-tiny on the CPU, a few steps: tries the script itself")
    args = parser.parse_args(argv)
    if args.dry_run:
        args.presets, args.batch_size, args.max_seq_length = ["bert-tiny"], 4, 32
        args.steps, args.untimed_steps = 2, 1
    elif not torch.cuda.is_available():
        print("no CUDA device here: this script measures a GPU (run it on Colab or a GPU box)")
        return 2
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.backends.cuda.matmul.allow_tf32 = True
    rows, best = [], None
    for preset in args.presets:
        for lever in range(len(LEVERS)):
            row = measure(preset, lever, args, device)
            step = row.pop("step")
            if preset == args.presets[0] and (best is None or row["tokens_per_second"]
                                              > best[0]["tokens_per_second"]):
                best = (row, step)
            rows.append(row)
            print(json.dumps(row), flush=True)
            if args.json:
                args.json.write_text(json.dumps({"rows": rows}, indent=1) + "\n")
            if device.type == "cuda":
                torch.cuda.empty_cache()
    breakdown = time_breakdown(best[1])
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "best": best[0]["lever"],
                                         "time_breakdown": breakdown}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
