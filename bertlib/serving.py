"""Serving a bertlib classifier on a CPU with onnxruntime: one call writes an ONNX file
whose graph onnxruntime's BERT optimiser recognises, so its fused kernels (attention,
embedding and skip layer norms, bias-GELU) run instead of the graph's many small operators.

The optimiser (`onnxruntime.transformers.optimizer`) finds BERT by the shape of its graph:
the embeddings summed and normalised in a fixed order, the padding mask made additive as
(1 - mask) x -10000, each head's keys transposed once, the scores divided by √d, a mask
added before the softmax. The model's own forward is written to teach and to train (one
fused attention call, a boolean mask), so the export runs the same weights through a
forward written in that shape; the logits agree with eager torch's (a test checks it).

How this file is made: written by hand. Needs the `onnx` extra (onnx, onnxruntime).
"""

from __future__ import annotations

import math
import warnings
from pathlib import Path

import torch
from torch import nn

from bertlib.errors import ConfigError
from bertlib.finetuning.models import BertForSequenceClassification

__all__ = ["export_onnx"]

INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")


class _FusableClassifier(nn.Module):
    """A BertForSequenceClassification's weights, computed in the operator order that
    onnxruntime's BERT fusions match (see the module's docstring). Evaluation only."""

    def __init__(self, model: BertForSequenceClassification):
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                token_type_ids: torch.Tensor) -> torch.Tensor:
        bert = self.model.bert
        hidden = self._embeddings(bert.embeddings, input_ids, token_type_ids)
        additive_mask = (1.0 - attention_mask.unsqueeze(1).unsqueeze(2).float()) * -10000.0
        for layer in bert.encoder.layer:
            context = self._attention(layer.attention.self, hidden, additive_mask)
            hidden = layer.attention.output(context, hidden)
            hidden = layer.output(layer.intermediate(hidden), hidden)
        return self.model.classifier(bert.pooler(hidden))

    @staticmethod
    def _embeddings(embeddings: nn.Module, input_ids: torch.Tensor,
                    token_type_ids: torch.Tensor) -> torch.Tensor:
        """Word plus token type, then position (0 .. length-1 in every row), normalised."""
        length = input_ids.shape[1]
        positions = torch.arange(length, dtype=torch.long, device=input_ids.device)
        positions = positions.unsqueeze(0).expand_as(input_ids)
        summed = (embeddings.word_embeddings(input_ids)
                  + embeddings.token_type_embeddings(token_type_ids))
        return embeddings.LayerNorm(summed + embeddings.position_embeddings(positions))

    @staticmethod
    def _attention(attention: nn.Module, hidden: torch.Tensor,
                   additive_mask: torch.Tensor) -> torch.Tensor:
        """softmax(q kᵀ / √d + mask) v per head, each head's keys transposed in one step."""
        rows, heads, size = hidden.shape[0], attention.num_heads, attention.head_size
        q = attention.query(hidden).view(rows, -1, heads, size).permute(0, 2, 1, 3)
        k = attention.key(hidden).view(rows, -1, heads, size).permute(0, 2, 3, 1)
        v = attention.value(hidden).view(rows, -1, heads, size).permute(0, 2, 1, 3)
        scores = torch.matmul(q, k) / math.sqrt(size) + additive_mask
        context = torch.matmul(scores.softmax(dim=-1), v).permute(0, 2, 1, 3)
        return context.reshape(rows, -1, heads * size)


def export_onnx(model: BertForSequenceClassification, path: str | Path,
                opset: int = 17) -> Path:
    """Write `model` (a BertForSequenceClassification) to `path` as ONNX, with a dynamic
    batch and length, inputs input_ids, attention_mask and token_type_ids, output logits.

    Then, for the fused kernels and optionally int8:

        from onnxruntime.transformers.optimizer import optimize_model
        fused = optimize_model(str(path), model_type="bert",
                               num_heads=config.num_attention_heads,
                               hidden_size=config.hidden_size)
        fused.save_model_to_file("fused.onnx")
        # onnxruntime.quantization.quantize_dynamic("fused.onnx", "int8.onnx")"""
    if not isinstance(model, BertForSequenceClassification):
        raise ConfigError(f"export_onnx writes a BertForSequenceClassification, not a "
                          f"{type(model).__name__}; for other heads use torch.onnx.export")
    if model.config.is_decoder:
        raise ConfigError("export_onnx writes a bidirectional encoder; this model reads left "
                          "to right (is_decoder=True): use torch.onnx.export")
    path = Path(path)
    example = torch.ones(2, 8, dtype=torch.long)
    inputs = (example, torch.ones_like(example), torch.zeros_like(example))
    device = next(model.parameters()).device
    training = model.training
    model.eval().cpu()
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the exporter's notes on traced shapes
            torch.onnx.export(_FusableClassifier(model), inputs, str(path), dynamo=False,
                              input_names=list(INPUT_NAMES), output_names=["logits"],
                              dynamic_axes={name: {0: "rows", 1: "length"}
                                            for name in INPUT_NAMES},
                              opset_version=opset)
    finally:
        model.to(device).train(training)
    return path
