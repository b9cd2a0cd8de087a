"""Every head's output reads like transformers' (by name, key and position, loss first) and
travels through torch.export with a dynamic batch and sequence length."""

import pytest
import torch

from bertlib.core.config import BertConfig
from bertlib.core.encoder import BertModel
from bertlib.finetuning.models import (
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertForTokenClassification,
    TaskOutput,
)
from bertlib.pretraining.models import BertForMaskedLM, BertForPreTraining

SMALL = BertConfig(vocab_size=300, hidden_size=48, num_hidden_layers=2, num_attention_heads=4,
                   intermediate_size=96, max_position_embeddings=64)
HEADS = [BertModel, BertForPreTraining, BertForMaskedLM, BertForSequenceClassification,
         BertForTokenClassification, BertForQuestionAnswering]


def _batch(rows: int, length: int) -> dict[str, torch.Tensor]:
    ids = torch.randint(5, 300, (rows, length), generator=torch.Generator().manual_seed(rows))
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids)}


def test_an_output_reads_by_name_key_and_position_with_the_loss_first():
    out = TaskOutput(loss=torch.tensor(0.5), logits=torch.ones(2, 3))
    assert out[0] is out.loss and out["logits"] is out.logits and out[1] is out.logits
    loss, logits = out
    assert loss is out.loss and len(out) == 2 and out.keys() == ["loss", "logits"]
    without_loss = TaskOutput(loss=None, logits=torch.ones(2, 3))
    assert without_loss[0] is without_loss.logits and len(without_loss) == 1
    with pytest.raises(KeyError, match="no 'loss'"):
        without_loss["loss"]


@pytest.mark.slow  # torch.export traces each head (a few seconds each)
@pytest.mark.parametrize("head", HEADS, ids=lambda head: head.__name__)
def test_every_head_exports_with_dynamic_batch_and_length(head):
    model = head(SMALL).eval()
    rows, length = torch.export.Dim("rows", min=1, max=64), torch.export.Dim("length", min=2,
                                                                              max=64)
    shapes = {"input_ids": {0: rows, 1: length}, "attention_mask": {0: rows, 1: length}}
    exported = torch.export.export(model, (), _batch(2, 16), dynamic_shapes=shapes)
    for size in [(2, 16), (5, 40)]:
        batch = _batch(*size)
        with torch.no_grad():
            expected = model(**batch)
        got = exported.module()(**batch)
        for mine, theirs in zip(got, expected, strict=True):
            torch.testing.assert_close(mine, theirs)
