"""Pretraining heads against transformers: losses, masked logits, checkpoints both ways."""

import pytest
import torch
from transformers import BertConfig as HFConfig
from transformers import BertForMaskedLM as HFBertForMaskedLM
from transformers import BertForPreTraining as HFBertForPreTraining

from bertbook.datasets import minilm_dir
from bertlib.core.config import BertConfig
from bertlib.errors import CheckpointError
from bertlib.pretraining.models import BertForMaskedLM, BertForPreTraining

SMALL = dict(vocab_size=300, hidden_size=48, num_hidden_layers=2, num_attention_heads=4,
             intermediate_size=96, max_position_embeddings=32)


def _inputs(seed: int = 0) -> dict:
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, 300, (3, 16), generator=generator)
    mask = torch.ones_like(ids)
    mask[2, 12:] = 0
    labels = torch.full_like(ids, -100)
    labels[:, 2:5] = ids[:, 2:5]
    labels[0, 9] = ids[0, 9]
    return dict(input_ids=ids, attention_mask=mask, token_type_ids=(ids > 150).long() * mask,
                labels=labels, next_sentence_label=torch.tensor([0, 1, 0]))


@pytest.mark.parametrize("ours_class, reference_class", [
    (BertForPreTraining, HFBertForPreTraining), (BertForMaskedLM, HFBertForMaskedLM)])
def test_losses_and_masked_logits_equal_transformers(tmp_path, ours_class, reference_class):
    torch.manual_seed(0)
    reference = reference_class(HFConfig(**SMALL, attn_implementation="eager")).eval()
    reference.save_pretrained(tmp_path)
    ours = ours_class.from_pretrained(tmp_path)
    assert ours.new_weights == [] and ours.unused_checkpoint_keys == []
    inputs = _inputs()
    if ours_class is BertForMaskedLM:
        inputs.pop("next_sentence_label")
    with torch.no_grad():
        mine, theirs = ours(**inputs), reference(**inputs)
    assert abs(mine.loss.item() - theirs.loss.item()) < 1e-5
    reference_logits = getattr(theirs, "prediction_logits", None)
    if reference_logits is None:
        reference_logits = theirs.logits
    hidden = inputs["labels"] != -100
    assert torch.allclose(mine.mlm_logits, reference_logits[hidden], atol=1e-5)
    assert torch.equal(mine.mlm_labels, inputs["labels"][hidden])
    if ours_class is BertForPreTraining:
        assert torch.allclose(mine.nsp_logits, theirs.seq_relationship_logits, atol=1e-5)


def test_full_logits_without_labels(tmp_path):
    torch.manual_seed(0)
    model = BertForPreTraining(BertConfig(**SMALL)).eval()
    out = model(_inputs()["input_ids"])
    assert out.mlm_logits.shape == (3, 16, 300) and out.loss is None


def test_decoder_is_tied_to_the_embeddings():
    model = BertForPreTraining(BertConfig(**SMALL))
    assert model.cls.predictions.decoder.weight is model.bert.embeddings.word_embeddings.weight


def test_saved_pretraining_model_loads_in_transformers(tmp_path):
    torch.manual_seed(0)
    ours = BertForPreTraining(BertConfig(**SMALL)).eval()
    ours.save_pretrained(tmp_path)
    reference, info = HFBertForPreTraining.from_pretrained(tmp_path, output_loading_info=True,
                                                           attn_implementation="eager")
    assert not info["missing_keys"] and not info["unexpected_keys"]
    inputs = _inputs(1)
    with torch.no_grad():
        assert abs(ours(**inputs).loss.item() - reference.eval()(**inputs).loss.item()) < 1e-5


def test_encoder_only_checkpoint_reports_new_heads():
    model = BertForPreTraining.from_pretrained(minilm_dir())
    assert model.new_weights and all(name.startswith("cls.") for name in model.new_weights)
    assert "cls.predictions.decoder.weight" not in model.new_weights  # tied, not new


def test_a_checkpoint_for_another_shape_is_refused(tmp_path):
    BertForPreTraining(BertConfig(**SMALL)).save_pretrained(tmp_path)
    with pytest.raises(CheckpointError, match="wrong shape"):
        BertForPreTraining.from_pretrained(tmp_path, hidden_size=64)
