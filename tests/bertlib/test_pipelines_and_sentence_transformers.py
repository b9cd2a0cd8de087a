"""A folder bertlib saves works in transformers' pipelines and in sentence-transformers, and
they give the numbers bertlib gives on the same text."""

import shutil

import pytest
import torch
import transformers
from sentence_transformers import SentenceTransformer
from transformers.utils import logging as transformers_logging

import bertlib
from bertbook.datasets import minilm_dir

transformers_logging.set_verbosity_error()
transformers_logging.disable_progress_bar()

TEXT = "the bank of the river was muddy after the rain ."


@pytest.fixture(scope="module")
def tokenizer() -> bertlib.BertTokenizer:
    return bertlib.BertTokenizer.from_pretrained(minilm_dir(), max_length=32)


def _saved(head: type, tokenizer, folder, **config) -> torch.nn.Module:
    """A small random head with MiniLM's vocabulary, saved with its tokenizer."""
    torch.manual_seed(0)
    model = head(bertlib.BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32,
                                    num_hidden_layers=2, num_attention_heads=4,
                                    intermediate_size=64, max_position_embeddings=64, **config))
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return model.eval()


def test_fill_mask_ranks_the_pieces_as_bertlib_does(tokenizer, tmp_path):
    model = _saved(bertlib.BertForMaskedLM, tokenizer, tmp_path)
    text = TEXT.replace("river", "[MASK]")
    guesses = transformers.pipeline("fill-mask", model=str(tmp_path), top_k=5)(text)
    batch = tokenizer([text])
    where = batch["input_ids"][0].tolist().index(tokenizer.mask_id)
    with torch.no_grad():
        scores = model(**batch).mlm_logits[0, where].softmax(-1)
    assert [guess["token"] for guess in guesses] == scores.topk(5).indices.tolist()
    assert guesses[0]["score"] == pytest.approx(float(scores.max()), abs=1e-5)


def test_text_classification_scores_as_bertlib_does(tokenizer, tmp_path):
    model = _saved(bertlib.BertForSequenceClassification, tokenizer, tmp_path, num_labels=3)
    classify = transformers.pipeline("text-classification", model=str(tmp_path), top_k=None)
    scored = classify([TEXT])[0]  # one list of label scores per text
    with torch.no_grad():
        expected = model(**tokenizer([TEXT])).logits[0].softmax(-1)
    by_label = {entry["label"]: entry["score"] for entry in scored}
    assert by_label == pytest.approx({model.config.id2label[i]: float(p)
                                      for i, p in enumerate(expected)}, abs=1e-5)


def test_token_classification_labels_tokens_as_bertlib_does(tokenizer, tmp_path):
    model = _saved(bertlib.BertForTokenClassification, tokenizer, tmp_path, num_labels=4)
    tagged = transformers.pipeline("token-classification", model=str(tmp_path))(TEXT)
    batch = tokenizer([TEXT])
    with torch.no_grad():
        labels = model(**batch).logits[0].argmax(-1).tolist()
    expected = [(index, model.config.id2label[label]) for index, label in enumerate(labels)
                if 0 < index < len(labels) - 1 and model.config.id2label[label] != "O"]
    assert expected and [(entity["index"], entity["entity"]) for entity in tagged] == expected


def test_feature_extraction_gives_bertlib_vectors(tokenizer, tmp_path):
    model = _saved(bertlib.BertModel, tokenizer, tmp_path)
    vectors = transformers.pipeline("feature-extraction", model=str(tmp_path),
                                    return_tensors=True)(TEXT)
    with torch.no_grad():
        expected = model(**tokenizer([TEXT])).last_hidden_state
    torch.testing.assert_close(vectors, expected, atol=1e-5, rtol=1e-4)


def test_sentence_transformers_reads_minilm_resaved_by_bertlib(tmp_path):
    resaved = tmp_path / "minilm"
    shutil.copytree(minilm_dir(), resaved)
    (resaved / "model.safetensors").unlink()
    bertlib.BertModel.from_pretrained(minilm_dir()).save_pretrained(resaved)
    sentences = [TEXT, "money was deposited at the bank", "a quiet walk by the water"]
    original = SentenceTransformer(str(minilm_dir()), device="cpu").encode(
        sentences, convert_to_tensor=True)
    again = SentenceTransformer(str(resaved), device="cpu").encode(
        sentences, convert_to_tensor=True)
    cosine = torch.nn.functional.cosine_similarity(original, again)
    assert float(cosine.min()) > 1 - 1e-6
