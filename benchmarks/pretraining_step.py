"""bertlib's pretraining step against transformers' BertForPreTraining, side by side.

Both models get the same config, the same weights, the same masked batch, the same
optimiser (AdamW), the same precision and the same number of threads. Steps alternate
between the two (bertlib, transformers, transformers, bertlib, ...) so that a slow spell of
the machine hits both alike; we report medians and their ratio. Peak memory is measured in a
fresh child process per model: how far its resident set grows during a training step above
its size between steps (activations, logits, gradients).

    python benchmarks/pretraining_step.py            # the full table (make bench)
    python benchmarks/pretraining_step.py --quick    # a tiny config, to check the script runs

Results go to benchmarks/results/ (a markdown table and a plot), and are printed.
"""

import argparse
import json
import os
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from bertbook.measure import (
    interleaved_timings,
    medians,
    peak_memory_mib,
    track_peak_memory,
    training_step,
)
from bertlib.batch import IGNORE_INDEX
from bertlib.core.config import BertConfig
from bertlib.pretraining.models import BertForPreTraining

RESULTS = Path(__file__).resolve().parent / "results"
MASKED_FRACTION = 0.15
MASK_ID = 103  # [MASK] in BERT's uncased vocabulary
LIBRARIES = ("bertlib", "transformers")


@dataclass(frozen=True)
class Case:
    """One row of the table: a model shape, a batch shape and a precision."""

    name: str
    preset: str  # a size of bertlib.core.config.PRESETS
    batch_size: int
    max_seq_length: int
    precision: str  # "fp32" or "bf16"
    repeats: int

    def config(self) -> BertConfig:
        return BertConfig.preset(self.preset)


def cases(quick: bool) -> list[Case]:
    """The issue's shapes: a small config (bert-mini: 4 x 256, seq 128, batch 32) and
    BERT-base."""
    if quick:
        return [Case("tiny", "bert-tiny", 8, 64, "fp32", 3)]
    return [Case(name, preset, batch_size, 128, precision, repeats)
            for name, preset, batch_size, repeats in [("small", "bert-mini", 32, 7),
                                                 ("base", "bert-base", 8, 3)]
            for precision in ("fp32", "bf16")]


def build(library: str, config: BertConfig) -> torch.nn.Module:
    """The same randomly initialised weights in either library's BertForPreTraining."""
    torch.manual_seed(0)
    ours = BertForPreTraining(config)
    if library == "bertlib":
        return ours
    import transformers

    their_config = transformers.BertConfig(**asdict(config), attn_implementation="sdpa")
    theirs = transformers.BertForPreTraining(their_config)
    theirs.load_state_dict(ours.state_dict(), strict=False)  # their decoder bias is tied
    check_same_function(ours, theirs, config)
    return theirs


def check_same_function(ours: torch.nn.Module, theirs: torch.nn.Module,
                        config: BertConfig) -> None:
    """Refuse to time two models that do not compute the same loss from the same weights."""
    batch = masked_batch(2, 16, config.vocab_size)
    with torch.no_grad():
        losses = [float(model.eval()(**batch).loss) for model in (ours, theirs)]
    if abs(losses[0] - losses[1]) > 1e-4 * abs(losses[0]):
        raise RuntimeError(f"bertlib and transformers disagree on the loss: {losses}")


def masked_batch(batch_size: int, max_seq_length: int, vocab_size: int) -> dict[str, torch.Tensor]:
    """Random tokens (the arithmetic does not depend on which) with 15% of positions to
    predict, two segments, and next-sentence labels; the same for every call."""
    generator = torch.Generator().manual_seed(1)
    ids = torch.randint(1000, vocab_size, (batch_size, max_seq_length), generator=generator)
    chosen = torch.rand(batch_size, max_seq_length, generator=generator) < MASKED_FRACTION
    labels = torch.where(chosen, ids, torch.full_like(ids, IGNORE_INDEX))
    return {"input_ids": ids.masked_fill(chosen, MASK_ID), "attention_mask": torch.ones_like(ids),
            "token_type_ids": (torch.arange(max_seq_length) >= max_seq_length // 2).long()
            .expand_as(ids),
            "labels": labels,
            "next_sentence_label": torch.randint(0, 2, (batch_size,), generator=generator)}


def time_both(case: Case) -> dict[str, list[float]]:
    """Seconds per training step of each library, the runs interleaved."""
    config = case.config()
    batch = masked_batch(case.batch_size, case.max_seq_length, config.vocab_size)
    steps = {library: training_step(build(library, config), batch, case.precision)
             for library in LIBRARIES}
    return interleaved_timings(steps, case.repeats)


def peak_growth_mib(library: str, case: Case) -> float:
    """Run in a child: how far memory rises during a training step above its resting size,
    after a warm-up step has loaded the code and made Adam's state."""
    if not track_peak_memory():
        raise RuntimeError("peak memory is measured from /proc and glibc: Linux only")
    config = case.config()
    step = training_step(build(library, config),
                         masked_batch(case.batch_size, case.max_seq_length, config.vocab_size),
                         case.precision)
    step()
    return peak_memory_mib(step, torch.device("cpu"))


def measure_memory(library: str, case: Case, threads: int) -> float:
    """peak_growth_mib in a fresh interpreter, so one model's memory cannot hide another's."""
    command = [sys.executable, __file__, "--memory-of", library,
               "--case", json.dumps(asdict(case)), "--threads", str(threads)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode:
        raise RuntimeError(f"memory probe for {library} failed:\n{done.stderr}")
    return float(done.stdout.strip().splitlines()[-1])


def summarise(case: Case, seconds: dict[str, list[float]], memory: dict[str, float]) -> dict:
    tokens = case.batch_size * case.max_seq_length
    median = medians(seconds)
    return {"case": case.name, "precision": case.precision, "batch_size": case.batch_size,
            "max_seq_length": case.max_seq_length, "repeats": case.repeats,
            "bertlib_tok_s": tokens / median["bertlib"],
            "transformers_tok_s": tokens / median["transformers"],
            "speedup": median["transformers"] / median["bertlib"],
            "bertlib_mib": memory["bertlib"], "transformers_mib": memory["transformers"]}


def markdown(rows: list[dict], threads: int) -> str:
    lines = [f"torch {torch.__version__}, {threads} threads, "
             f"{os.cpu_count()} CPUs visible; medians of interleaved steps\n",
             "| config | precision | batch x seq | bertlib tok/s | transformers tok/s | "
             "speed-up | bertlib peak MiB | transformers peak MiB |",
             "|---|---|---|---|---|---|---|---|"]
    for row in rows:
        shape = f"{row['batch_size']} x {row['max_seq_length']}"
        lines.append(f"| {row['case']} | {row['precision']} | {shape} | "
                     f"{row['bertlib_tok_s']:,.0f} | {row['transformers_tok_s']:,.0f} | "
                     f"{row['speedup']:.2f}x | {row['bertlib_mib']:,.0f} | "
                     f"{row['transformers_mib']:,.0f} |")
    return "\n".join(lines) + "\n"


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [f"{row['case']}\n{row['precision']}" for row in rows]
    x = range(len(rows))
    figure, (speed, memory) = plt.subplots(1, 2, figsize=(10, 3.8))
    for offset, library in [(-0.2, "bertlib"), (0.2, "transformers")]:
        speed.bar([i + offset for i in x], [r[f"{library}_tok_s"] for r in rows], 0.4,
                  label=library)
        memory.bar([i + offset for i in x], [r[f"{library}_mib"] for r in rows], 0.4,
                   label=library)
    for axis, title in [(speed, "training tokens per second"),
                        (memory, "peak memory growth of a step (MiB)")]:
        axis.set_xticks(list(x), labels)
        axis.set_title(title)
        axis.legend()
    speed.set_yscale("log")
    figure.tight_layout()
    figure.savefig(path, dpi=110)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one tiny case (for tests)")
    parser.add_argument("--threads", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--memory-of", help=argparse.SUPPRESS)
    parser.add_argument("--case", help=argparse.SUPPRESS)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.memory_of:
        print(peak_growth_mib(args.memory_of, Case(**json.loads(args.case))))
        return 0
    rows = []
    for case in cases(args.quick):
        seconds = time_both(case)
        memory = {library: measure_memory(library, case, args.threads)
                  for library in LIBRARIES}
        rows.append(summarise(case, seconds, memory))
        print(markdown(rows[-1:], args.threads).splitlines()[-1], flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    table = markdown(rows, args.threads)
    (args.out / "pretraining_step.md").write_text(table, encoding="utf-8")
    (args.out / "pretraining_step.json").write_text(json.dumps(rows, indent=2) + "\n")
    plot(rows, args.out / "pretraining_step.png")
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
