"""BertConfig: the numbers that make one BERT differ from another, as in config.json."""

import json
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path

from bertlib.errors import ConfigError
from bertlib.files import write_atomically

__all__ = ["BertConfig", "PRESETS"]


ACTIVATIONS = ("gelu", "gelu_new", "gelu_pytorch_tanh", "relu")


@dataclass
class BertConfig:
    """The shape of one BERT: sizes, activation, dropout, positions, and a task head's labels.

    The field names are those of transformers' BertConfig, so a folder's config.json reads
    the same in both libraries; the defaults are BERT-base's (Devlin et al., 2018, §3:
    12 layers, hidden 768, 12 heads, a feed-forward 4 times as wide, sequences of up to
    512 pieces). Every value is checked when the config is built, so a wrong number fails
    here with advice instead of deep inside a forward pass. `PRESETS` names the sizes of
    Turc et al. (2019)'s small BERTs and BERT-base/large.
    """

    # Not fields: what transformers' pipelines and peft look up. bertlib's classifier
    # heads pick one label per text (a softmax over them), never a regression.
    model_type = "bert"
    problem_type = "single_label_classification"

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
    # The labels themselves, in class order and of their own types (1, True, 0.5 or "pos"),
    # for the labels a classifier was trained on; id2label can hold only their text.
    label_values: list | None = None

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
        self._check_label_values()
        names = list(self.id2label.values())
        if len(set(names)) < len(names):
            twice = sorted({name for name in names if names.count(name) > 1})
            raise ConfigError(f"id2label names two labels alike ({', '.join(twice)}); give "
                              "each label its own name, or predictions cannot be told apart")

    def _check_label_values(self) -> None:
        if self.label_values is None:
            return
        self.label_values = list(self.label_values)
        if len(self.label_values) != self.num_labels:
            raise ConfigError(f"label_values holds {len(self.label_values)} labels for "
                              f"num_labels={self.num_labels}; give one value per label")
        odd = [v for v in self.label_values if not isinstance(v, (str, int, float, bool))]
        if odd:
            raise ConfigError(f"label_values must be strings, numbers or booleans (what "
                              f"config.json can keep), not {odd[0]!r}")

    def with_overrides(self, **overrides) -> "BertConfig":
        """A copy with some fields changed, re-validated. An unknown name is refused with
        the valid ones; num_labels alone keeps the label names when the count is the same
        and resets them to generic names when it changes."""
        known = {f.name for f in fields(self)}
        unknown = sorted(set(overrides) - known)
        if unknown:
            raise ConfigError(f"BertConfig has no field {', '.join(map(repr, unknown))}; "
                              f"the fields are: {', '.join(sorted(known))}")
        if "id2label" in overrides and "num_labels" not in overrides:
            overrides["num_labels"] = None  # follows the new names
        elif ("num_labels" in overrides and "id2label" not in overrides
              and overrides["num_labels"] != self.num_labels):
            overrides["id2label"] = None  # generic names for the new count
            overrides.setdefault("label_values", None)
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

    @property
    def label2id(self) -> dict[str, int]:
        """The label names' ids, the other way round from id2label (as transformers has it)."""
        return {name: i for i, name in self.id2label.items()}

    def to_dict(self) -> dict:
        """The config as config.json holds it, as transformers' `to_dict` gives it:
        model_type, and the label names both ways (id2label, label2id) instead of
        num_labels; label_values only when there are some."""
        payload = {"model_type": self.model_type, **asdict(self)}
        del payload["num_labels"]
        payload["id2label"] = {str(i): name for i, name in self.id2label.items()}
        payload["label2id"] = self.label2id
        if self.label_values is None:
            del payload["label_values"]
        return payload

    def to_json(self, path: str | Path, architecture: str = "BertModel") -> Path:
        """Write config.json as transformers expects it: `to_dict` and the architecture."""
        path = Path(path) / "config.json" if Path(path).is_dir() else Path(path)
        payload = {"architectures": [architecture], **self.to_dict()}
        text = json.dumps(payload, indent=2) + "\n"
        return write_atomically(
            path, lambda temporary: temporary.write_text(text, encoding="utf-8"), ConfigError)

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
