"""bertlib models in transformers' Trainer, which saves only its own models whole.

The Trainer trains and evaluates a bertlib model as it is: the outputs index like
transformers' (loss first), the forwards take transformers' keywords, and the config
answers `get_text_config`. Saving is the one gap. The Trainer writes `config.json` only for
its own `PreTrainedModel`; for any other model it writes a bare state dict, which has no
config for `from_pretrained` to read and which safetensors refuses when two names share a
tensor (the masked LMs' decoder is the word embeddings). `TransformersTrainer` saves a
bertlib model with the model's own `save_pretrained` (config.json, tied weights once, a
folder that transformers' Auto classes and bertlib's `from_pretrained` both load) and
resumes a checkpoint through bertlib's loader. Other models, peft's included, are saved and
loaded as the Trainer does.

    from transformers import TrainingArguments
    from bertlib.integrations import TransformersTrainer

    trainer = TransformersTrainer(model=model, args=TrainingArguments("out"), ...)
    trainer.train()
    trainer.save_model("out/final")   # BertForSequenceClassification.from_pretrained reads it

This module imports transformers, which bertlib itself does not need: import it only to
use the Trainer.
"""

import os

import torch

try:
    import transformers
except ImportError as missing:
    raise ImportError("bertlib.integrations bridges bertlib and transformers' Trainer, and "
                      "needs transformers: pip install transformers accelerate") from missing

from bertlib.core.checkpoints import load_checkpoint, read_state_dict
from bertlib.core.encoder import BertPreTrainedModel

__all__ = ["TransformersTrainer"]


class TransformersTrainer(transformers.Trainer):
    """transformers.Trainer, saving and resuming bertlib models in their own folder format."""

    def _bertlib_model(self, model: torch.nn.Module | None = None) -> BertPreTrainedModel | None:
        """The bertlib model under any wrapper the Trainer added (DDP, compile), else None."""
        unwrapped = self.accelerator.unwrap_model(model if model is not None else self.model,
                                                  keep_torch_compile=False)
        return unwrapped if isinstance(unwrapped, BertPreTrainedModel) else None

    def save_model(self, output_dir: str | None = None, _internal_call: bool = False) -> None:
        """Write a folder that from_pretrained loads: the model's config.json and weights,
        the tokenizer when the Trainer was given one, and the training arguments."""
        model = self._bertlib_model()
        if model is None:
            return super().save_model(output_dir, _internal_call)
        if not self.args.should_save:  # another process of a distributed run saves
            return None
        output_dir = output_dir if output_dir is not None else self.args.output_dir
        model.save_pretrained(output_dir)
        if self.processing_class is not None:
            self.processing_class.save_pretrained(output_dir)
        torch.save(self.args, os.path.join(output_dir, "training_args.bin"))
        return None

    def _load_from_checkpoint(self, resume_from_checkpoint: str,
                              model: torch.nn.Module | None = None) -> None:
        """Resuming (train(resume_from_checkpoint=...)) reads the weights with bertlib's
        loader, which knows that tied weights are stored once."""
        bertlib_model = self._bertlib_model(model)
        if bertlib_model is None:
            return super()._load_from_checkpoint(resume_from_checkpoint, model)
        load_checkpoint(bertlib_model, read_state_dict(resume_from_checkpoint))
        return None

    def _load_best_model(self) -> None:
        """load_best_model_at_end: the best checkpoint's weights, read the same way."""
        model = self._bertlib_model()
        if model is None:
            return super()._load_best_model()
        load_checkpoint(model, read_state_dict(self.state.best_model_checkpoint))
        return None
