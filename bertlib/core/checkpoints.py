"""Checkpoint folders in `transformers`' layout: reading their tensors, matching their names
to a model's, and writing a folder so that a crash or a second writer never leaves half a save.

`BertPreTrainedModel.from_pretrained` and `save_pretrained` call it. How this file is made:
written by hand (chapter 04 tells what a checkpoint folder holds).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import torch
from torch import nn

from bertlib.errors import CheckpointError
from bertlib.files import reading_folder, writing_together

if TYPE_CHECKING:  # the config is handed in, so the checkpoints sit beside it, not above
    from bertlib.core.config import BertConfig

__all__ = ["checkpoint_folder", "read_state_dict", "load_checkpoint", "read_folder",
           "write_folder"]


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


def read_folder(folder: str | Path,
                config_class: type[BertConfig]) -> tuple[dict[str, torch.Tensor], BertConfig]:
    """A checkpoint folder's tensors and its config (read by `config_class.from_json`),
    read while no save into the folder is in progress."""
    with reading_folder(folder):
        state = read_state_dict(folder)  # first: it says what is wrong with the folder
        config = config_class.from_json(folder)
    return state, config


def write_folder(folder: str | Path, config: BertConfig, tensors: dict[str, torch.Tensor],
                 architecture: str) -> Path:
    """Write config.json and model.safetensors into `folder`, together: a crash leaves the
    last save whole, and two processes saving into one folder take turns instead of leaving
    one's config beside the other's weights."""
    from safetensors.torch import save_file

    with writing_together(folder, CheckpointError) as staging:
        config.to_json(staging / "config.json", architecture=architecture)
        save_file(tensors, staging / "model.safetensors", metadata={"format": "pt"})
    return Path(folder)
