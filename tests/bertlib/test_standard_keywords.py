"""Every head takes transformers' standard keywords with transformers' meaning:
inputs_embeds, output_attentions, output_hidden_states and return_dict. Checked against
transformers' own model holding the same weights, so "the same meaning" is measured."""

import pytest
import torch
import transformers
from transformers.utils import logging as transformers_logging

import bertlib

transformers_logging.set_verbosity_error()
transformers_logging.disable_progress_bar()

TINY = dict(vocab_size=300, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
            intermediate_size=64, max_position_embeddings=40)
# bertlib head -> (transformers Auto class, config fields it needs)
HEADS = {
    "BertModel": ("AutoModel", {}),
    "BertForPreTraining": ("AutoModelForPreTraining", {}),
    "BertForMaskedLM": ("AutoModelForMaskedLM", {}),
    "BertLMHeadModel": ("AutoModelForCausalLM", {"is_decoder": True}),
    "BertForSequenceClassification": ("AutoModelForSequenceClassification", {"num_labels": 3}),
    "BertForTokenClassification": ("AutoModelForTokenClassification", {"num_labels": 5}),
    "BertForQuestionAnswering": ("AutoModelForQuestionAnswering", {}),
}


@pytest.fixture(scope="module")
def batch() -> dict[str, torch.Tensor]:
    ids = torch.randint(5, TINY["vocab_size"], (3, 12), generator=torch.Generator().manual_seed(0))
    mask = torch.ones_like(ids)
    mask[1, 8:] = 0
    return dict(input_ids=ids, attention_mask=mask, token_type_ids=(ids % 2) * mask)


def _pair(name: str, folder) -> tuple[torch.nn.Module, torch.nn.Module]:
    """A random bertlib head, and transformers' model loaded from its saved folder (eager
    attention: transformers' fused kernel returns no weights)."""
    auto_name, extra = HEADS[name]
    torch.manual_seed(0)
    ours = getattr(bertlib, name)(bertlib.BertConfig(**TINY).with_overrides(**extra)).eval()
    ours.save_pretrained(folder)
    theirs = getattr(transformers, auto_name).from_pretrained(folder, attn_implementation="eager")
    return ours, theirs.eval()


def _real_tokens(tensor: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The rows of real tokens (padding's values differ between libraries and mean nothing)."""
    return tensor[mask.bool()] if tensor.shape[:2] == mask.shape else tensor


@pytest.mark.parametrize("name", HEADS)
def test_hidden_states_and_attentions_are_transformers(name, batch, tmp_path):
    ours, theirs = _pair(name, tmp_path)
    keywords = dict(output_hidden_states=True, output_attentions=True)
    with torch.no_grad():
        mine, reference = ours(**batch, **keywords), theirs(**batch, **keywords)
    assert len(mine.hidden_states) == TINY["num_hidden_layers"] + 1
    assert len(mine.attentions) == TINY["num_hidden_layers"]
    for ours_state, their_state in zip(mine.hidden_states, reference.hidden_states, strict=True):
        torch.testing.assert_close(_real_tokens(ours_state, batch["attention_mask"]),
                                   _real_tokens(their_state, batch["attention_mask"]))
    for ours_weights, their_weights in zip(mine.attentions, reference.attentions, strict=True):
        torch.testing.assert_close(ours_weights, their_weights)


@pytest.mark.parametrize("name", HEADS)
def test_inputs_embeds_stand_in_for_the_ids(name, batch):
    auto_name, extra = HEADS[name]
    model = getattr(bertlib, name)(bertlib.BertConfig(**TINY).with_overrides(**extra)).eval()
    ids = batch["input_ids"]
    rest = {key: value for key, value in batch.items() if key != "input_ids"}
    vectors = model.get_input_embeddings()(ids)
    with torch.no_grad():
        from_ids, from_vectors = model(**batch), model(inputs_embeds=vectors, **rest)
    scores = "last_hidden_state" if name == "BertModel" else (
        "mlm_logits" if "LM" in name or "PreTraining" in name else "logits")
    torch.testing.assert_close(from_vectors[scores], from_ids[scores])


@pytest.mark.parametrize("name", HEADS)
def test_return_dict_false_gives_the_plain_tuple(name, batch):
    auto_name, extra = HEADS[name]
    model = getattr(bertlib, name)(bertlib.BertConfig(**TINY).with_overrides(**extra)).eval()
    with torch.no_grad():
        as_output, as_tuple = model(**batch), model(**batch, return_dict=False)
    assert type(as_tuple) is tuple and len(as_tuple) == len(as_output)
    for value, expected in zip(as_tuple, as_output, strict=True):
        torch.testing.assert_close(value, expected)


def test_labels_and_keywords_together_keep_the_loss_first(batch):
    model = bertlib.BertForSequenceClassification(bertlib.BertConfig(**TINY), num_labels=3)
    out = model(**batch, labels=torch.tensor([0, 1, 2]), output_hidden_states=True,
                return_dict=False)
    assert out[0].dim() == 0 and out[1].shape == (3, 3) and len(out[2]) == 3


def test_ids_and_vectors_are_one_or_the_other(batch):
    model = bertlib.BertModel(bertlib.BertConfig(**TINY))
    vectors = model.get_input_embeddings()(batch["input_ids"])
    with pytest.raises(bertlib.InputError, match="one of the two"):
        model(batch["input_ids"], inputs_embeds=vectors)
    with pytest.raises(bertlib.InputError, match="one of the two"):
        model(attention_mask=batch["attention_mask"])
    with pytest.raises(bertlib.InputError, match=r"\(batch, seq, 32\)"):
        model(inputs_embeds=vectors[..., :16])
    with pytest.raises(bertlib.InputError, match="attention_mask has shape"):
        model(inputs_embeds=vectors, attention_mask=batch["attention_mask"][:, :5])
