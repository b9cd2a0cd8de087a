"""bertlib.serving.export_onnx: the export onnxruntime's BERT optimiser recognises. Its
fusions are counted on a small model (one attention and one skip layer norm a layer, the
embedding layer norm once), and onnxruntime's logits, before and after fusing, equal eager
torch's at two batch shapes, padding included."""

import collections

import numpy as np
import pytest
import torch

import bertlib
from bertlib.errors import ConfigError
from bertlib.serving import export_onnx

pytest.importorskip("onnxruntime")
import onnxruntime  # noqa: E402
from onnxruntime.transformers.optimizer import optimize_model  # noqa: E402

CONFIG = bertlib.BertConfig(vocab_size=300, hidden_size=64, num_hidden_layers=3,
                            num_attention_heads=4, intermediate_size=128,
                            max_position_embeddings=64)
FUSED = ("Attention", "EmbedLayerNormalization", "SkipLayerNormalization", "BiasGelu")


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    torch.manual_seed(0)
    model = bertlib.BertForSequenceClassification(CONFIG, num_labels=3).eval()
    folder = tmp_path_factory.mktemp("onnx")
    plain = export_onnx(model, folder / "classifier.onnx")
    fused = optimize_model(str(plain), model_type="bert", num_heads=4, hidden_size=64)
    fused.save_model_to_file(str(folder / "fused.onnx"))
    return model, plain, folder / "fused.onnx", fused


def _batch(rows: int, length: int) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(rows * 100 + length)
    ids = torch.randint(5, 300, (rows, length), generator=generator)
    mask = torch.ones_like(ids)
    mask[0, length - 4:] = 0  # padding
    types = (torch.arange(length) >= length // 2).long().expand_as(ids).contiguous()
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}


def test_onnxruntimes_bert_optimiser_fuses_every_layer(exported):
    counts = collections.Counter(node.op_type for node in exported[3].model.graph.node)
    assert {name: counts[name] for name in FUSED} == {
        "Attention": 3, "EmbedLayerNormalization": 1, "SkipLayerNormalization": 6,
        "BiasGelu": 3}


@pytest.mark.parametrize("shape", [(2, 16), (5, 37)])
def test_the_export_and_its_fused_version_give_eager_torchs_logits(exported, shape):
    model, plain, fused, _ = exported
    batch = _batch(*shape)
    with torch.no_grad():
        expected = model(**batch).logits.numpy()
    for path in (plain, fused):
        session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        got = session.run(None, {name: tensor.numpy() for name, tensor in batch.items()})[0]
        np.testing.assert_allclose(got, expected, atol=1e-5)


def test_other_heads_are_sent_to_torch_onnx_export(tmp_path):
    with pytest.raises(ConfigError, match="torch.onnx.export"):
        export_onnx(bertlib.BertForMaskedLM(CONFIG), tmp_path / "x.onnx")
