"""bertlib.tokenizer against transformers' BertTokenizerFast on the real uncased vocab."""

import pytest
from transformers import BertTokenizerFast

from bertbook.corpora import wikipedia_articles
from bertbook.datasets import minilm_dir
from bertlib.errors import TokenizerError
from bertlib.tokenizer import (
    SPECIAL_TOKENS,
    BertTokenizer,
    basic_tokenize,
    teaching_tokenize,
    train_wordpiece,
    wordpiece,
)


@pytest.fixture(scope="module")
def paragraphs():
    return [p for article in wikipedia_articles() for p in article.paragraphs]


@pytest.fixture(scope="module")
def ours():
    return BertTokenizer.from_pretrained(minilm_dir(), max_length=1_000_000)


@pytest.fixture(scope="module")
def reference():
    return BertTokenizerFast.from_pretrained(str(minilm_dir()))


def test_special_ids_of_the_real_vocab(ours):
    assert ours.vocab_size == 30522
    assert (ours.pad_id, ours.unk_id, ours.cls_id, ours.sep_id, ours.mask_id) == (
        0, 100, 101, 102, 103)


def test_ids_equal_transformers_over_the_whole_corpus(ours, reference, paragraphs):
    theirs = reference(paragraphs, truncation=False, verbose=False)["input_ids"]
    mismatched = [i for i, text in enumerate(paragraphs) if ours.encode(text).ids != theirs[i]]
    assert len(paragraphs) > 4000 and mismatched == []


# Special tokens typed into a text, as users write fill-mask prompts.
TEXTS_WITH_SPECIALS = ["the capital of france is [MASK].", "[CLS] one [SEP] two",
                       "Paris[MASK]London and [UNK]", "padding [PAD][PAD] here"]


def test_special_tokens_written_in_a_text_are_recognised_as_transformers_does(ours,
                                                                               reference):
    for text in TEXTS_WITH_SPECIALS:
        assert ours.encode(text).ids == reference(text)["input_ids"], text
    assert ours.mask_id in ours.encode(TEXTS_WITH_SPECIALS[0]).ids


def test_a_folder_saved_by_transformers_5_loads_with_the_same_ids(reference, paragraphs,
                                                                   tmp_path):
    reference.save_pretrained(str(tmp_path))
    assert not (tmp_path / "vocab.txt").exists()  # transformers 5 writes tokenizer.json only
    loaded = BertTokenizer.from_pretrained(tmp_path)
    for text in [*paragraphs[:300], *TEXTS_WITH_SPECIALS]:
        assert loaded.encode(text).ids == reference(text)["input_ids"]


def test_a_folder_with_no_vocabulary_says_what_is_missing(tmp_path):
    with pytest.raises(TokenizerError, match="no vocab.txt or tokenizer.json"):
        BertTokenizer.from_pretrained(tmp_path)


def test_teaching_version_equals_the_fast_one(ours, paragraphs):
    vocab = ours.vocab
    assert all(teaching_tokenize(text, vocab) == ours.tokenize(text) for text in paragraphs)


def test_pairs_and_truncation_equal_transformers(reference, paragraphs):
    short = BertTokenizer.from_pretrained(minilm_dir(), max_length=32)
    for first, second in zip(paragraphs[:200:2], paragraphs[1:200:2]):
        expected = reference(first, second, truncation="longest_first", max_length=32)
        encoded = short.encode(first, second)
        assert encoded.ids == expected["input_ids"]
        assert encoded.type_ids == expected["token_type_ids"]


def test_batches_are_padded_with_a_mask(reference):
    tokenizer = BertTokenizer.from_pretrained(minilm_dir())
    texts = ["A short one.", "A rather longer sentence, with a comma."]
    ours = tokenizer(texts)
    theirs = reference(texts, padding=True, return_tensors="pt")
    for name in ("input_ids", "token_type_ids", "attention_mask"):
        assert ours[name].tolist() == theirs[name].tolist()


def test_wordpiece_is_greedy_longest_first():
    vocab = {"un", "##aff", "##able", "##a", "##ff"}
    assert wordpiece("unaffable", vocab) == ["un", "##aff", "##able"]
    assert wordpiece("unknown", vocab) == ["[UNK]"]
    assert wordpiece("u" * 101, {"u", "##u"}) == ["[UNK]"]  # longer than 100 characters


def test_basic_tokenize_strips_accents_and_splits_punctuation():
    assert basic_tokenize("Düsseldorf's $5\tcafé!") == ["dusseldorf", "'", "s", "$", "5",
                                                        "cafe", "!"]


@pytest.mark.parametrize("text", ["", "   ", "\n"])
def test_empty_text_is_refused(text):
    tokenizer = BertTokenizer.from_pretrained(minilm_dir())
    with pytest.raises(TokenizerError, match="empty"):
        tokenizer.encode(text)
    with pytest.raises(TokenizerError, match="empty"):
        tokenizer.encode("fine", text)


def test_too_long_text_is_refused_without_truncation_and_cut_with_it():
    tokenizer = BertTokenizer.from_pretrained(minilm_dir(), max_length=64)
    long_text = "bank " * 10_000
    with pytest.raises(TokenizerError, match="10002 tokens long, more than max_length=64"):
        tokenizer.encode(long_text, truncation=False)
    assert len(tokenizer.encode(long_text).ids) == 64


def test_vocab_without_special_tokens_is_refused():
    with pytest.raises(TokenizerError, match=r"lacks the special tokens \['\[MASK\]'\]"):
        BertTokenizer({token: i for i, token in enumerate(["[PAD]", "[UNK]", "[CLS]",
                                                            "[SEP]", "a"])})


def test_non_string_input_is_refused():
    tokenizer = BertTokenizer.from_pretrained(minilm_dir())
    with pytest.raises(TokenizerError, match="must be a string"):
        tokenizer.encode(123)


def test_trained_vocab_puts_special_tokens_first_and_round_trips(tmp_path, paragraphs):
    learned = train_wordpiece(paragraphs[:300], vocab_size=500)
    assert [learned.vocab[t] for t in SPECIAL_TOKENS] == [0, 1, 2, 3, 4]
    assert 400 < learned.vocab_size <= 500
    reloaded = BertTokenizer.from_pretrained(learned.save_pretrained(tmp_path))
    assert reloaded.vocab == learned.vocab
    hf = BertTokenizerFast.from_pretrained(str(tmp_path))
    text = paragraphs[400]
    assert hf(text)["input_ids"] == reloaded.encode(text).ids
