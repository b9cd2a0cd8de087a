"""Chapter 09: hub checkpoints with legacy names, layer states, sense separation, attention
statistics and linear probes."""

import re
import shutil
from types import SimpleNamespace

import pytest
import torch
from safetensors.torch import save_file

from bertbook.datasets import bank_senses, minilm_dir
from bertlib.analysis.probing import (
    attention_statistics,
    fit_linear_probe,
    layer_states,
    nearest_centroid_accuracy,
    word_vectors,
)
from bertlib.core.checkpoints import read_state_dict
from bertlib.core.encoder import BertModel
from bertlib.core.hub import convert_checkpoint, hub_checkpoint, modern_names
from bertlib.errors import DataUnavailable
from bertlib.tokenizer import BertTokenizer


@pytest.fixture(scope="module")
def minilm():
    return BertModel.from_pretrained(minilm_dir()), BertTokenizer.from_pretrained(minilm_dir())


def test_modern_names_renames_only_layernorm_suffixes():
    state = {"bert.embeddings.LayerNorm.gamma": 1, "a.LayerNorm.beta": 2, "gamma.weight": 3}
    assert modern_names(state) == {"bert.embeddings.LayerNorm.weight": 1,
                                   "a.LayerNorm.bias": 2, "gamma.weight": 3}


def test_a_legacy_checkpoint_converts_to_the_same_model(tmp_path, minilm):
    legacy = tmp_path / "legacy"
    legacy.mkdir()
    old = {re.sub(r"LayerNorm\.weight$", "LayerNorm.gamma",
                  re.sub(r"LayerNorm\.bias$", "LayerNorm.beta", key)): tensor
           for key, tensor in read_state_dict(minilm_dir()).items()}
    save_file(old, legacy / "model.safetensors")
    for name in ("config.json", "vocab.txt"):
        shutil.copyfile(minilm_dir() / name, legacy / name)
    converted = BertModel.from_pretrained(convert_checkpoint(legacy, tmp_path / "new"))
    for ours, theirs in zip(converted.state_dict().values(), minilm[0].state_dict().values()):
        assert torch.equal(ours, theirs)


def test_no_hub_is_a_clear_error(monkeypatch, tmp_path):
    import huggingface_hub

    def offline(*args, **kwargs):
        raise OSError("no route to host")

    monkeypatch.setattr(huggingface_hub, "snapshot_download", offline)
    with pytest.raises(DataUnavailable, match="minilm_dir"):
        hub_checkpoint("bert-base-uncased", tmp_path)


def test_layer_states_end_with_the_models_output(minilm):
    model, tokenizer = minilm
    batch = tokenizer(["The river bank flooded.", "A bank loan."])
    states = layer_states(model, batch)
    assert len(states) == model.config.num_hidden_layers + 1
    with torch.no_grad():
        last = model(**batch).last_hidden_state
    torch.testing.assert_close(states[-1], last)


def test_word_vectors_explain_bad_words(minilm):
    model, tokenizer = minilm
    vectors = word_vectors(model, tokenizer, ["the bank", "a river bank here"], "bank")
    assert vectors.shape == (model.config.num_hidden_layers + 1, 2, model.config.hidden_size)
    with pytest.raises(ValueError, match="single piece"):
        word_vectors(model, tokenizer, ["unaffable"], "unaffable")
    with pytest.raises(ValueError, match="does not occur"):
        word_vectors(model, tokenizer, ["the bank", "no such word"], "bank")


def test_nearest_centroid_accuracy_by_hand():
    vectors = torch.tensor([[1.0, 0.1], [1.0, -0.1], [0.1, 1.0], [-0.1, 1.0]])
    assert nearest_centroid_accuracy(vectors, ["a", "a", "b", "b"]) == 1.0
    # swap one label: that vector is nearer the other class's remaining member
    assert nearest_centroid_accuracy(vectors, ["a", "b", "a", "b"]) == 0.0


def test_attention_statistics_by_hand():
    # one layer, one head, [CLS] x y [SEP] [PAD]: each real token attends fully to one place
    weights = torch.zeros(1, 1, 1, 5, 5)
    weights[0, 0, 0, 0, 0] = 1.0  # [CLS] -> itself
    weights[0, 0, 0, 1, 0] = 1.0  # x -> [CLS] (also its previous token)
    weights[0, 0, 0, 2, 3] = 1.0  # y -> [SEP] (also its next token)
    weights[0, 0, 0, 3, 2] = 1.0  # [SEP] -> y (its previous token)
    weights[0, 0, 0, 4, 4] = 1.0  # padding: never counted
    fake = SimpleNamespace(eval=lambda: lambda **kw: SimpleNamespace(attentions=(weights[:, 0],)))
    batch = {"input_ids": torch.tensor([[101, 7, 8, 102, 0]]),
             "attention_mask": torch.tensor([[1, 1, 1, 1, 0]])}
    stats = attention_statistics(fake, batch, cls_id=101, sep_id=102)
    assert stats["[CLS]"].item() == pytest.approx(2 / 4)
    assert stats["[SEP]"].item() == pytest.approx(1 / 4)
    assert stats["previous token"].item() == pytest.approx(2 / 3)  # x, y, [SEP] have one
    assert stats["next token"].item() == pytest.approx(1 / 3)  # [CLS], x, y have one


def test_a_linear_probe_learns_a_linear_rule():
    torch.manual_seed(0)
    vectors = torch.randn(200, 5) * 3 + 10
    labels = (vectors[:, 0] > vectors[:, 1]).long()
    probe = fit_linear_probe(vectors, labels)
    with torch.no_grad():
        assert (probe(vectors).argmax(-1) == labels).float().mean() > 0.97


def test_bank_senses_are_balanced_and_use_the_word():
    examples = bank_senses()
    assert len(examples) == 48
    assert sorted({e.sense for e in examples}) == ["money", "river"]
    assert sum(e.sense == "money" for e in examples) == 24
    assert all(re.search(r"\bbank\b", e.sentence) for e in examples)


def test_minimal_pairs_are_held_out_together():
    twins = torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.0, 1.0], [1.0, 1.0], [1.0, 1.0]])
    senses = ["a", "b", "a", "b", "a", "b"]
    # identical twins of opposite senses: one of each pair is right, whatever the rest
    assert nearest_centroid_accuracy(twins, senses, groups=[0, 0, 1, 1, 2, 2]) == 0.5
    # left out alone, each one's twin pulls it to the wrong side
    assert nearest_centroid_accuracy(twins, senses) < 0.5
