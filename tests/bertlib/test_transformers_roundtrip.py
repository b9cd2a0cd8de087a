"""Checkpoint folders move both ways between bertlib and transformers, for every head.

bertlib -> transformers: a folder that bertlib saves loads with transformers' own
`AutoModelFor...from_pretrained(folder)`, no extra arguments, and gives the same outputs
to 1e-5. transformers -> bertlib: a folder that transformers saves loads with bertlib's
`from_pretrained` and gives the same outputs. The tokenizer's folder loads in AutoTokenizer.
"""

import pytest
import torch
import transformers
from transformers.utils import logging as transformers_logging

import bertlib
from bertbook.datasets import minilm_dir

transformers_logging.set_verbosity_error()
transformers_logging.disable_progress_bar()

TINY = dict(vocab_size=300, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
            intermediate_size=64, max_position_embeddings=40)

# bertlib class -> (transformers Auto class, extra config, how to read transformers' output)
HEADS = {
    "BertModel": ("AutoModel", {}, lambda out: [out.last_hidden_state, out.pooler_output]),
    "BertForPreTraining": ("AutoModelForPreTraining", {},
                           lambda out: [out.prediction_logits, out.seq_relationship_logits]),
    "BertForMaskedLM": ("AutoModelForMaskedLM", {}, lambda out: [out.logits]),
    "BertLMHeadModel": ("AutoModelForCausalLM", {"is_decoder": True},
                        lambda out: [out.logits[:, :-1]]),
    "BertForSequenceClassification": ("AutoModelForSequenceClassification", {"num_labels": 3},
                                      lambda out: [out.logits]),
    "BertForTokenClassification": ("AutoModelForTokenClassification", {"num_labels": 5},
                                   lambda out: [out.logits]),
    "BertForQuestionAnswering": ("AutoModelForQuestionAnswering", {},
                                 lambda out: [torch.stack([out.start_logits, out.end_logits],
                                                          -1)]),
}


def _bertlib_outputs(name: str, out) -> list[torch.Tensor]:
    if name == "BertModel":
        return [out.last_hidden_state, out.pooler_output]
    if name == "BertForPreTraining":
        return [out.mlm_logits, out.nsp_logits]
    if name in ("BertForMaskedLM", "BertLMHeadModel"):
        return [out.mlm_logits]
    return [out.logits]


@pytest.fixture(scope="module")
def batch():
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(5, TINY["vocab_size"], (3, 12), generator=generator)
    mask = torch.ones_like(ids)
    mask[1, 8:] = 0  # padding, so the masks are exercised too
    return dict(input_ids=ids, attention_mask=mask, token_type_ids=(ids % 2) * mask)


def _assert_close(ours: list[torch.Tensor], theirs: list[torch.Tensor], mask: torch.Tensor):
    for mine, reference in zip(ours, theirs, strict=True):
        assert mine.shape == reference.shape
        if mine.dim() >= 2 and mine.shape[:2] == mask.shape:  # per token: skip padding
            mine, reference = mine[mask.bool()], reference[mask.bool()]
        elif mine.dim() >= 2 and mine.shape[1] == mask.shape[1] - 1:  # next-token scores
            mine, reference = mine[mask[:, 1:].bool()], reference[mask[:, 1:].bool()]
        assert (mine - reference).abs().max() < 1e-5


@pytest.mark.parametrize("name", HEADS)
def test_a_bertlib_folder_loads_in_transformers_auto_classes(name, batch, tmp_path):
    auto_name, extra, read = HEADS[name]
    torch.manual_seed(0)
    ours = getattr(bertlib, name)(bertlib.BertConfig(**TINY).with_overrides(**extra)).eval()
    ours.save_pretrained(tmp_path)
    theirs = getattr(transformers, auto_name).from_pretrained(tmp_path).eval()
    assert type(theirs).__name__ == name
    with torch.no_grad():
        _assert_close(_bertlib_outputs(name, ours(**batch)), read(theirs(**batch)),
                      batch["attention_mask"])


@pytest.mark.parametrize("name", HEADS)
def test_a_transformers_folder_loads_in_bertlib(name, batch, tmp_path):
    auto_name, extra, read = HEADS[name]
    torch.manual_seed(0)
    config = transformers.BertConfig(**TINY, **extra)
    theirs = getattr(transformers, auto_name).from_config(config).eval()
    theirs.save_pretrained(tmp_path)
    ours = getattr(bertlib, name).from_pretrained(tmp_path)
    assert not ours.training and ours.new_weights == []
    with torch.no_grad():
        _assert_close(_bertlib_outputs(name, ours(**batch)), read(theirs(**batch)),
                      batch["attention_mask"])


def test_label_names_travel_in_config_json(tmp_path):
    config = bertlib.BertConfig(**TINY, id2label={0: "rotten", 1: "fresh", 2: "mixed"})
    bertlib.BertForSequenceClassification(config).save_pretrained(tmp_path)
    theirs = transformers.AutoConfig.from_pretrained(tmp_path)
    assert theirs.id2label == {0: "rotten", 1: "fresh", 2: "mixed"} and theirs.num_labels == 3
    again = bertlib.BertForSequenceClassification.from_pretrained(tmp_path)
    assert again.config.id2label == config.id2label and again.num_labels == 3


def test_from_pretrained_means_the_same_for_every_class(tmp_path):
    bertlib.BertModel(bertlib.BertConfig(**TINY)).save_pretrained(tmp_path)
    for name in HEADS:
        model = getattr(bertlib, name).from_pretrained(tmp_path, hidden_dropout_prob=0.0)
        assert model.config.hidden_dropout_prob == 0.0 and not model.training, name
    with pytest.raises(bertlib.ConfigError, match="no field 'hiden_dropout_prob'"):
        bertlib.BertModel.from_pretrained(tmp_path, hiden_dropout_prob=0.0)
    model = bertlib.BertForTokenClassification.from_pretrained(tmp_path, num_labels=7)
    assert model.classifier.out_features == 7 and len(model.config.id2label) == 7


def test_the_tokenizer_folder_loads_in_auto_tokenizer(tmp_path):
    ours = bertlib.BertTokenizer.from_pretrained(minilm_dir(), max_length=64)
    ours.save_pretrained(tmp_path)
    theirs = transformers.AutoTokenizer.from_pretrained(tmp_path)
    assert theirs.model_max_length == 64
    text = "The unaffable bankers of Düsseldorf didn't lend a penny."
    assert theirs(text, "A second, paired sentence.")["input_ids"] == ours.encode(
        text, "A second, paired sentence.").ids
    again = bertlib.BertTokenizer.from_pretrained(tmp_path)
    assert again.max_length == 64 and again.vocab == ours.vocab
