"""bertlib's attention, config and BertModel against transformers, on real weights."""

import json

import pytest
import torch
import torch.nn.functional as F
from transformers import BertConfig as HFConfig
from transformers import BertForPreTraining as HFBertForPreTraining
from transformers import BertModel as HFBertModel

from bertbook.datasets import minilm_dir
from bertlib.core.attention import BertSelfAttention, key_padding_mask, scaled_dot_product
from bertlib.core.config import PRESETS, BertConfig
from bertlib.core.encoder import BertModel, parameter_count
from bertlib.errors import CheckpointError, ConfigError, InputError
from bertlib.tokenizer import BertTokenizer

SENTENCES = ["The bank raised its interest rates again.",
             "She sat on the bank of the river and watched the water.",
             "Anarchism is a political philosophy.",
             "Short."]


@pytest.fixture(scope="module")
def batch():
    return BertTokenizer.from_pretrained(minilm_dir())(SENTENCES)


@pytest.fixture(scope="module")
def minilm():
    return BertModel.from_pretrained(minilm_dir())


def _max_differences(ours, theirs, batch):
    with torch.no_grad():
        a, b = ours(**batch), theirs(**batch)
    real = batch["attention_mask"].bool()
    return ((a.last_hidden_state - b.last_hidden_state)[real].abs().max().item(),
            (a.pooler_output - b.pooler_output).abs().max().item())


def test_real_minilm_matches_transformers(minilm, batch):
    reference = HFBertModel.from_pretrained(str(minilm_dir()), attn_implementation="eager")
    assert (batch["attention_mask"] == 0).any(), "the batch must contain padding"
    hidden, pooled = _max_differences(minilm, reference.eval(), batch)
    assert hidden < 1e-5 and pooled < 1e-5
    assert minilm.unused_checkpoint_keys == []


def test_random_bert_base_matches_transformers(tmp_path):
    torch.manual_seed(0)
    reference = HFBertModel(HFConfig(attn_implementation="eager")).eval()
    reference.save_pretrained(tmp_path)
    ours = BertModel.from_pretrained(tmp_path)
    ids = torch.randint(1000, 30522, (2, 24))
    mask = torch.ones_like(ids)
    mask[1, 10:] = 0
    batch = {"input_ids": ids, "attention_mask": mask, "token_type_ids": (ids % 2)}
    hidden, pooled = _max_differences(ours, reference, batch)
    assert hidden < 1e-5 and pooled < 1e-5


def test_saved_model_loads_in_transformers(minilm, batch, tmp_path):
    minilm.save_pretrained(tmp_path)
    assert json.loads((tmp_path / "config.json").read_text())["model_type"] == "bert"
    reloaded, info = HFBertModel.from_pretrained(tmp_path, output_loading_info=True,
                                                 attn_implementation="eager")
    assert not info["missing_keys"] and not info["unexpected_keys"]
    assert max(_max_differences(minilm, reloaded.eval(), batch)) < 1e-5


def test_loads_a_bin_checkpoint_with_bert_prefix_and_reports_heads(tmp_path):
    torch.manual_seed(0)
    config = HFConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2,
                      num_attention_heads=2, intermediate_size=64, max_position_embeddings=40,
                      attn_implementation="eager")
    reference = HFBertForPreTraining(config).eval()
    config.save_pretrained(tmp_path)  # the older format: a pickled state dict, bert.-prefixed
    torch.save(reference.state_dict(), tmp_path / "pytorch_model.bin")
    ours = BertModel.from_pretrained(tmp_path)
    assert ours.unused_checkpoint_keys and all(k.startswith("cls.")
                                               for k in ours.unused_checkpoint_keys)
    ids = torch.randint(0, 100, (2, 9))
    with torch.no_grad():
        expected = reference.bert(ids).last_hidden_state
    assert torch.allclose(ours(ids).last_hidden_state, expected, atol=1e-5)


def test_mismatched_checkpoint_lists_every_problem(tmp_path):
    small = BertModel(BertConfig.preset("bert-tiny", vocab_size=50))
    small.save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    config.update(num_hidden_layers=3, hidden_size=256, num_attention_heads=4)
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError) as error:
        BertModel.from_pretrained(tmp_path)
    message = str(error.value)
    assert "missing: encoder.layer.2.attention.self.query.weight" in message
    assert "wrong shape: embeddings.word_embeddings.weight: checkpoint (50, 128), " \
           "model (50, 256)" in message


def test_folder_without_weights_is_a_clear_error(tmp_path):
    BertConfig.preset("bert-tiny").to_json(tmp_path)
    with pytest.raises(CheckpointError, match="neither model.safetensors nor pytorch_model.bin"):
        BertModel.from_pretrained(tmp_path)


def test_fused_and_explicit_paths_give_the_same_hidden_states(minilm, batch):
    with torch.no_grad():
        fused = minilm(**batch)
        explicit = minilm(**batch, output_attentions=True)
    assert fused.attentions is None
    real = batch["attention_mask"].bool()  # padding positions' outputs are never used
    assert torch.allclose(fused.last_hidden_state[real], explicit.last_hidden_state[real],
                          atol=1e-5)
    assert len(explicit.attentions) == 6
    batch_size, seq = batch["input_ids"].shape
    assert all(a.shape == (batch_size, 12, seq, seq) for a in explicit.attentions)
    assert torch.allclose(explicit.attentions[0].sum(-1), torch.ones(batch_size, 12, seq))


def test_attention_weights_match_transformers(minilm, batch):
    reference = HFBertModel.from_pretrained(str(minilm_dir()), attn_implementation="eager")
    with torch.no_grad():
        ours = minilm(**batch, output_attentions=True).attentions
        theirs = reference.eval()(**batch, output_attentions=True).attentions
    real = batch["attention_mask"].bool()[:, None, :, None]
    for a, b in zip(ours, theirs, strict=True):
        assert ((a - b).abs() * real).max() < 1e-5


def test_explicit_attention_equals_sdpa_with_padding():
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 3, 7, 8) for _ in range(3))
    mask = key_padding_mask(torch.tensor([[1] * 7, [1] * 4 + [0] * 3]))
    explicit, weights = scaled_dot_product(q, k, v, mask)
    assert torch.allclose(explicit, F.scaled_dot_product_attention(q, k, v, attn_mask=mask),
                          atol=1e-6)
    assert weights[1, :, :, 4:].abs().max() == 0


def test_heads_must_divide_the_hidden_size():
    with pytest.raises(ConfigError, match="divisible"):
        BertConfig(hidden_size=10, num_attention_heads=3)


@pytest.mark.parametrize("bad, message", [
    (torch.tensor([101, 102]), "2-D tensor"),
    (torch.zeros(1, 600, dtype=torch.long), "600 tokens long"),
    (torch.tensor([[101, 40000]]), "must lie in 0..30521"),
    (torch.ones(1, 3), "must be torch.int64"),
    (torch.ones(1, 3, dtype=torch.int16), r"torch.int64 \(long\) or torch.int32, not torch.int16"),
    (torch.zeros(0, 5, dtype=torch.long), r"the batch is empty \(shape \(0, 5\)\)"),
    (torch.zeros(2, 0, dtype=torch.long), r"the batch is empty \(shape \(2, 0\)\)"),
])
def test_bad_input_is_explained(minilm, bad, message):
    with pytest.raises(InputError, match=message):
        minilm(bad)


def test_mask_shape_must_match(minilm):
    with pytest.raises(InputError, match="attention_mask has shape"):
        minilm(torch.tensor([[101, 2000, 102]]), attention_mask=torch.ones(1, 4))


def test_parameter_counts():
    for name in PRESETS:
        config = BertConfig.preset(name)
        with torch.device("meta"):
            model = BertModel(config)
        assert sum(p.numel() for p in model.parameters()) == parameter_count(config)
    assert parameter_count(BertConfig.preset("bert-base")) == 109_482_240
    assert parameter_count(HFConfigAsOurs()) == 109_482_240


def HFConfigAsOurs() -> BertConfig:  # noqa: N802 - reads as a constructor
    """transformers' default config, read through our from_json."""
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        HFConfig().save_pretrained(folder)
        return BertConfig.from_json(folder)


def test_config_json_round_trip(tmp_path):
    config = BertConfig.preset("bert-mini", vocab_size=8000)
    assert BertConfig.from_json(config.to_json(tmp_path)) == config


@pytest.mark.parametrize("field, value, message", [
    ("model_type", "roberta", "not BERT"),
    ("position_embedding_type", "relative_key", "absolute"),
])
def test_unsupported_config_json_is_refused(tmp_path, field, value, message):
    (tmp_path / "config.json").write_text(json.dumps({field: value}))
    with pytest.raises(ConfigError, match=message):
        BertConfig.from_json(tmp_path)


def test_unknown_preset_lists_the_known():
    with pytest.raises(ConfigError, match="bert-tiny"):
        BertConfig.preset("bert-huge")


def test_attention_takes_its_sizes_and_dropout_from_the_config():
    config = BertConfig(hidden_size=32, num_attention_heads=4, attention_probs_dropout_prob=0.5)
    attention = BertSelfAttention(config)
    assert (attention.num_heads, attention.head_size, attention.dropout.p) == (4, 8, 0.5)
    hidden = torch.randn(1, 6, 32)
    torch.manual_seed(0)
    dropped = attention.train()(hidden)[0]
    kept = attention.eval()(hidden)[0]
    assert not torch.allclose(dropped, kept)
    attention.dropout.p = 0.0  # what switching dropout off for a comparison does
    assert torch.allclose(attention.train()(hidden)[0], kept, atol=1e-6)
