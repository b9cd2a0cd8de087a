"""Masking and the next-sentence data: the original's statistics, on real text."""

import random

import pytest
import torch

from bertbook.corpora import wikipedia_articles
from bertlib.batch import IGNORE_INDEX
from bertlib.errors import InputError
from bertlib.pretraining.masking import (
    MaskingRecipe,
    PretrainingCollator,
    mask_sequence,
    prediction_units,
)
from bertlib.pretraining.sentence_pairs import (
    SentencePair,
    sentence_documents,
    sentence_pairs,
    split_sentences,
    truncate_pair,
)
from bertlib.tokenizer import train_wordpiece


@pytest.fixture(scope="module")
def articles():
    return wikipedia_articles()[:40]


@pytest.fixture(scope="module")
def tokenizer(articles):
    return train_wordpiece([p for a in articles for p in a.paragraphs], 3000)


@pytest.fixture(scope="module")
def pairs(articles, tokenizer):
    documents = sentence_documents([a.paragraphs for a in articles],
                                   lambda s: tokenizer.encode(s).ids[1:-1])
    return sentence_pairs(documents, max_seq_length=128, seed=0)


def test_recipe_statistics_over_many_batches(pairs, tokenizer):
    collator = PretrainingCollator(tokenizer, MaskingRecipe(max_predictions=10**6), seed=0)
    special = torch.tensor(sorted(tokenizer.special_ids))
    candidates = chosen = as_mask = 0
    shown_original = 0
    for start in range(0, 3200, 32):
        batch_pairs = pairs[start % len(pairs):][:32] or pairs[:32]
        batch = collator(batch_pairs)
        originals = torch.where(batch["labels"] != IGNORE_INDEX, batch["labels"],
                                batch["input_ids"])
        is_special = torch.isin(originals, special)
        picked = batch["labels"] != IGNORE_INDEX
        assert not (picked & is_special).any(), "a special token or padding was chosen"
        candidates += int((~is_special).sum())
        chosen += int(picked.sum())
        as_mask += int((batch["input_ids"][picked] == tokenizer.mask_id).sum())
        shown_original += int((batch["input_ids"][picked] == batch["labels"][picked]).sum())
    assert abs(chosen / candidates - 0.15) < 0.003
    assert abs(as_mask / chosen - 0.8) < 0.01
    assert abs(shown_original / chosen - 0.1) < 0.01  # unchanged (plus rare random == original)


def test_cap_on_predictions_per_sequence(pairs, tokenizer):
    batch = PretrainingCollator(tokenizer, MaskingRecipe(max_predictions=5), seed=0)(pairs[:64])
    assert ((batch["labels"] != IGNORE_INDEX).sum(1) <= 5).all()


def test_whole_word_units_and_masking():
    ids = [2, 10, 11, 12, 20, 3]
    continuation = [False, False, True, True, False, False]
    assert prediction_units(ids, {2, 3}, continuation) == [[1, 2, 3], [4]]
    rng = random.Random(0)
    recipe = MaskingRecipe(probability=0.5, whole_word=True)
    for _ in range(50):
        _, labels = mask_sequence(ids, {2, 3}, 4, 30, recipe, rng, continuation)
        word = [labels[i] != IGNORE_INDEX for i in (1, 2, 3)]
        assert all(word) or not any(word), "a word is masked whole or not at all"


def test_random_replacements_are_never_special_tokens():
    rng = random.Random(0)
    recipe = MaskingRecipe(probability=0.99, mask_share=0.0, random_share=1.0,
                           max_predictions=100)
    ids = [2] + list(range(5, 50)) + [3]
    for _ in range(20):
        masked, _ = mask_sequence(ids, {0, 1, 2, 3, 4}, 4, 50, recipe, rng)
        assert not set(masked[1:-1]) & {0, 1, 2, 3, 4}


def test_recipe_rejects_impossible_shares():
    with pytest.raises(ValueError):
        MaskingRecipe(mask_share=0.9, random_share=0.2)
    with pytest.raises(ValueError):
        MaskingRecipe(probability=0)


def test_next_sentence_pairs(pairs):
    random_share = sum(p.is_random_next for p in pairs) / len(pairs)
    assert abs(random_share - 0.5) < 4 * 0.5 / len(pairs) ** 0.5
    assert all(0 < len(p.tokens_a) and 0 < len(p.tokens_b) for p in pairs)
    lengths = [len(p.tokens_a) + len(p.tokens_b) + 3 for p in pairs]
    assert max(lengths) <= 128
    shorter = sum(n < 100 for n in lengths) / len(lengths)
    assert 0.03 < shorter < 0.35, "short_seq_prob makes some pairs short, most full"


def test_true_next_segments_continue_the_text(articles, tokenizer):
    documents = sentence_documents([a.paragraphs for a in articles[:5]],
                                   lambda s: tokenizer.encode(s).ids[1:-1])
    flat = [tuple(t for sentence in doc for t in sentence) for doc in documents]
    checked = 0
    for pair in sentence_pairs(documents, max_seq_length=128, seed=3):
        if pair.is_random_next:
            continue
        # truncation may trim A's end or B's start, so B follows A, perhaps after a gap
        assert any(_b_follows_a(doc, pair.tokens_a, pair.tokens_b) for doc in flat)
        checked += 1
    assert checked > 20


def _start(haystack: tuple, needle: tuple, begin: int = 0) -> int | None:
    return next((i for i in range(begin, len(haystack))
                 if haystack[i:i + len(needle)] == needle), None)


def _b_follows_a(document: tuple, a: tuple, b: tuple) -> bool:
    """B occurs somewhere after an occurrence of A (a short B may also occur before it)."""
    start_a = _start(document, a)
    return start_a is not None and _start(document, b, start_a + len(a)) is not None


def test_truncation_takes_from_the_longer_segment():
    a, b = list(range(10)), list(range(100, 103))
    truncate_pair(a, b, 8, random.Random(0))
    assert len(a) + len(b) == 8 and b == [100, 101, 102]
    assert a == list(range(a[0], a[0] + 5)), "tokens leave from the ends, never the middle"
    fronts = set()
    for seed in range(20):
        a = list(range(10))
        truncate_pair(a, [], 5, random.Random(seed))
        fronts.add(a[0])
    assert len(fronts) > 1, "sometimes the front is cut, sometimes the back"


def test_collator_batches_and_reproducibility(pairs, tokenizer):
    pair = SentencePair((10, 11), (12,), True)
    batch = PretrainingCollator(tokenizer, seed=0)([pair, pairs[0]])
    assert batch["token_type_ids"][0, :5].tolist() == [0, 0, 0, 0, 1]
    assert batch["attention_mask"][0].sum() == 6 and batch["next_sentence_label"][0] == 1
    first = PretrainingCollator(tokenizer, seed=7)
    second = PretrainingCollator(tokenizer, seed=7)
    first(pairs[8:16])  # draws that a reseed must forget
    first.reseed("0/3/0"), second.reseed("0/3/0")
    assert all(torch.equal(x, y) for x, y in zip(first(pairs[:8]).values(),
                                                 second(pairs[:8]).values()))
    first.reseed("0/3/0"), second.reseed("0/4/0")  # another batch of the run: other masks
    assert not torch.equal(first(pairs[:8])["labels"], second(pairs[:8])["labels"])
    with pytest.raises(ValueError):
        first([])


def test_sentence_splitting():
    assert split_sentences("It rained. Then it stopped! Did it? yes. \"Quoted\" text.") == [
        "It rained.", "Then it stopped!", "Did it? yes.", "\"Quoted\" text."]


def test_pairs_need_two_documents():
    with pytest.raises(ValueError, match="two documents"):
        sentence_pairs([[[1, 2], [3]]])


def test_a_random_second_segment_never_comes_from_the_first_ones_document():
    """Each token id names its document (id // 100), so a random B shows where it came
    from: never A's own document, and from many others across the pairs."""
    documents = [[[100 * d + s, 100 * d + s + 50] for s in range(4)] for d in range(30)]
    pairs = [pair for seed in range(5) for pair in sentence_pairs(documents, 16, seed=seed)]
    random_pairs = [pair for pair in pairs if pair.is_random_next]
    sources = {(pair.tokens_a[0] // 100, pair.tokens_b[0] // 100) for pair in random_pairs}
    assert random_pairs and all(a != b for a, b in sources)
    assert len({b for _, b in sources}) > 10
    assert all(len({t // 100 for t in pair.tokens_b}) == 1 for pair in random_pairs)


def test_a_document_given_as_one_string_is_refused_not_read_letter_by_letter():
    with pytest.raises(InputError, match=r"wrap it: \[text\]"):
        sentence_documents(["The bank. The river."], str.split)
