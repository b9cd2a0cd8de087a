"""Every head exports to ONNX with both of torch's exporters (the dynamo one with a dynamic
batch and length, and the older TorchScript one, which takes tuples only), and onnxruntime
gives eager torch's numbers at two shapes."""

import warnings

import numpy as np
import onnxruntime
import pytest
import torch

import bertlib

TINY = bertlib.BertConfig(vocab_size=300, hidden_size=32, num_hidden_layers=2,
                          num_attention_heads=4, intermediate_size=64,
                          max_position_embeddings=40)
HEADS = ["BertModel", "BertForPreTraining", "BertForMaskedLM", "BertLMHeadModel",
         "BertForSequenceClassification", "BertForTokenClassification",
         "BertForQuestionAnswering"]
INPUTS = ("input_ids", "attention_mask", "token_type_ids")
SHAPES = [(2, 16), (5, 33)]  # the first is the one traced


def _batch(rows: int, length: int) -> dict[str, torch.Tensor]:
    ids = torch.randint(5, 300, (rows, length), generator=torch.Generator().manual_seed(rows))
    mask = torch.ones_like(ids)
    mask[0, length - 3:] = 0  # padding, so the exported mask path is exercised
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": (ids % 2) * mask}


def _model(name: str) -> torch.nn.Module:
    torch.manual_seed(0)
    return getattr(bertlib, name)(TINY).eval()


def _assert_runtime_matches_eager(path, model: torch.nn.Module) -> None:
    session = onnxruntime.InferenceSession(str(path))
    for rows, length in SHAPES:
        batch = _batch(rows, length)
        got = session.run(None, {key: batch[key].numpy() for key in INPUTS})
        with torch.no_grad():
            expected = model(**batch).to_tuple()
        assert len(got) == len(expected)
        for value, reference in zip(got, expected, strict=True):
            np.testing.assert_allclose(value, reference.numpy(), atol=2e-5, rtol=1e-4)


@pytest.mark.slow  # each export takes about 2 s
@pytest.mark.parametrize("name", HEADS)
def test_the_dynamo_exporter_exports_every_head(name, tmp_path):
    model = _model(name)
    rows, length = torch.export.Dim("rows", max=64), torch.export.Dim("length", max=40)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = torch.onnx.export(model, (), kwargs=_batch(*SHAPES[0]), dynamo=True,
                                    output_names=model(**_batch(*SHAPES[0])).keys(),
                                    dynamic_shapes={key: {0: rows, 1: length}
                                                    for key in INPUTS}, verbose=False)
    program.save(tmp_path / "model.onnx")
    _assert_runtime_matches_eager(tmp_path / "model.onnx", model)


@pytest.mark.slow
@pytest.mark.parametrize("name", HEADS)
def test_the_torchscript_exporter_exports_every_head(name, tmp_path):
    model = _model(name)
    batch = _batch(*SHAPES[0])
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, tuple(batch[key] for key in INPUTS), tmp_path / "model.onnx",
                          dynamo=False, input_names=list(INPUTS),
                          output_names=model(**batch).keys(),
                          dynamic_axes={key: {0: "rows", 1: "length"} for key in INPUTS})
    _assert_runtime_matches_eager(tmp_path / "model.onnx", model)
