"""bertlib: BERT, built chapter by chapter in the book *BERT End to End*, as a library.

    from bertlib import BertConfig, BertTokenizer, BertForSequenceClassification

The front door below names what a practitioner reaches for; every module also declares
its own `__all__`. Most modules are generated from the chapters (each exported cell
carries a line naming its chapter); `errors`, `runtime` and `integrations` (the bridge to
transformers' Trainer, imported only when used) are written by hand. The book's own
scaffolding (sizes, exercise checks, its datasets, timing) is the separate `bertbook`
package, which imports bertlib and never the reverse.
"""

from bertlib.batch import IGNORE_INDEX, PaddingCollator, pad_batch
from bertlib.config import BertConfig
from bertlib.errors import (
    BertlibError,
    CheckpointError,
    ConfigError,
    DataUnavailable,
    InputError,
    TokenizerError,
    TrainingDiverged,
)
from bertlib.finetuning import (
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertForTokenClassification,
    classification_features,
)
from bertlib.left_to_right import BertLMHeadModel
from bertlib.masking import MaskingRecipe, PretrainingCollator
from bertlib.model import BertModel, BertPreTrainedModel
from bertlib.pretraining import (
    BertForMaskedLM,
    BertForPreTraining,
    PretrainingResult,
    PretrainingRun,
    pretrain,
)
from bertlib.runtime import best_device, seed_everything
from bertlib.tokenizer import BertTokenizer, train_wordpiece
from bertlib.train import Trainer, TrainingConfig, resolve_precision
from bertlib.tuning import FineTuningRecipe, classify, fine_tune, fine_tune_classifier, predict

__version__ = "0.2.0"

__all__ = [
    "BertConfig",
    "BertTokenizer",
    "train_wordpiece",
    "BertPreTrainedModel",
    "BertModel",
    "BertForPreTraining",
    "BertForMaskedLM",
    "BertLMHeadModel",
    "BertForSequenceClassification",
    "BertForTokenClassification",
    "BertForQuestionAnswering",
    "MaskingRecipe",
    "PretrainingCollator",
    "PretrainingRun",
    "PretrainingResult",
    "pretrain",
    "PaddingCollator",
    "pad_batch",
    "IGNORE_INDEX",
    "Trainer",
    "TrainingConfig",
    "resolve_precision",
    "FineTuningRecipe",
    "fine_tune",
    "fine_tune_classifier",
    "classification_features",
    "classify",
    "predict",
    "best_device",
    "seed_everything",
    "BertlibError",
    "ConfigError",
    "InputError",
    "TokenizerError",
    "CheckpointError",
    "DataUnavailable",
    "TrainingDiverged",
]
