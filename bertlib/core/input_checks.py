"""The checks at the model's edge: a clear InputError for a batch the encoder cannot read.

BertModel.forward calls `check_model_input` first (chapter 04). The cheap checks (which
tensors were given, their shapes and types) always run; the value ranges (token ids inside
the vocabulary, positions inside the table) only on the CPU, where reading a tensor back
costs no device sync, and never under torch.compile, so a compiled GPU step has no graph
break and no host sync.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from bertlib.errors import InputError

if TYPE_CHECKING:  # only read, never built, here
    from bertlib.core.config import BertConfig

__all__ = ["check_model_input"]


def check_model_input(config: BertConfig, input_ids: torch.Tensor | None,
                      attention_mask: torch.Tensor | None, token_type_ids: torch.Tensor | None,
                      position_ids: torch.Tensor | None,
                      inputs_embeds: torch.Tensor | None = None) -> None:
    """Raise an InputError that says what to do if the batch does not fit a model of
    `config`; return None if it does."""
    if (input_ids is None) == (inputs_embeds is None):
        raise InputError("give input_ids (token ids) or inputs_embeds (their vectors), one "
                         "of the two; a tokenizer's batch gives input_ids: "
                         "model(**tokenizer(texts))")
    shape = _token_shape(config, input_ids, inputs_embeds)
    if 0 in shape:
        raise InputError(f"the batch is empty (shape {tuple(shape)}); a batch "
                         "needs at least one text of at least one token")
    if shape[1] > config.max_position_embeddings:
        raise InputError(f"the input is {shape[1]} tokens long; this model has "
                         f"{config.max_position_embeddings} positions. Truncate it "
                         "(BertTokenizer(max_length=...)) or split the text")
    on_cpu = (input_ids if input_ids is not None else inputs_embeds).device.type == "cpu"
    if on_cpu and not torch.compiler.is_compiling():
        _check_value_ranges(config, input_ids, token_type_ids, position_ids)
    if attention_mask is not None and attention_mask.shape not in (shape, (*shape, shape[1])):
        raise InputError(f"attention_mask has shape {tuple(attention_mask.shape)}; it must "
                         f"be {tuple(shape)} like input_ids (1 = token, "
                         "0 = padding) or (batch, seq, seq) (which token sees which)")
    for name, tensor in [("position_ids", position_ids), ("token_type_ids", token_type_ids)]:
        if tensor is not None and tensor.shape != shape:
            raise InputError(f"{name} has shape {tuple(tensor.shape)} but input_ids has "
                             f"{tuple(shape)}; they must match")


def _token_shape(config: BertConfig, input_ids: torch.Tensor | None,
                 inputs_embeds: torch.Tensor | None) -> torch.Size:
    """The (batch, seq) shape of whichever of the two was given, once it is well formed."""
    if inputs_embeds is not None:
        width = config.hidden_size
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


def _check_value_ranges(config: BertConfig, input_ids: torch.Tensor | None,
                        token_type_ids: torch.Tensor | None,
                        position_ids: torch.Tensor | None) -> None:
    vocab, types = config.vocab_size, config.type_vocab_size
    positions = config.max_position_embeddings
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
