"""Real text for the book, read offline from installed packages (sources in data/README.md).

Reading a corpus is the book's plumbing, not BERT's, so it lives here and the chapters call
it. The main corpus is the sample of the English Wikipedia that gensim ships with its tests,
in raw wiki markup. Markup is not prose, so a real MediaWiki parser (mwparserfromhell)
removes templates, `<ref>` footnotes, tables, comments and links to files and categories,
keeps the visible text of ordinary links, stops at the apparatus sections ("See also",
"References", ...) and drops fragments under eight words (captions, list items). Where
malformed markup makes the parser keep a stretch as text, that paragraph is parsed again
alone. The cleaned articles are cached as JSON in a git-ignored folder, so the markup is
parsed once per machine. On an online machine (Colab) WikiText-103 is also available.
Articles are split into training and held-out sets whole, so no held-out sentence has a
neighbour from its own article in training.
"""

import bz2
import hashlib
import random
import re
import xml.etree.ElementTree as ElementTree
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from bertbook.package_data import cache_dir, cached_rows, package_file
from bertlib.errors import DataUnavailable, InputError

__all__ = [
    "Article",
    "wiki_paragraphs",
    "WIKI_SAMPLE",
    "LEE_NEWS",
    "GENSIM_INSTALL",
    "CLEANER_VERSION",
    "wiki_pages",
    "wikipedia_articles",
    "lee_news",
    "WIKITEXT_HUB",
    "wikitext103",
    "articles_from_wikitext_lines",
    "CORPORA",
    "load_corpus",
    "split_articles",
    "simple_words",
]


@dataclass(frozen=True)
class Article:
    """A document: its title and its paragraphs of plain prose."""

    title: str
    paragraphs: tuple[str, ...]

    @property
    def text(self) -> str:
        """The paragraphs joined by blank lines, as the word counters and tokenizers read it."""
        return "\n\n".join(self.paragraphs)


_DROPPED_TAGS = {"ref", "references", "table", "gallery", "math", "chem", "code", "pre",
                 "syntaxhighlight", "source", "timeline", "score", "imagemap", "hiero",
                 "div", "noinclude", "includeonly", "poem"}
_END_SECTIONS = {"see also", "references", "external links", "notes", "further reading",
                 "bibliography", "sources", "footnotes", "citations"}
_MIN_PARAGRAPH_WORDS = 8


_LEFTOVER_MARKUP = re.compile(r"\{\{|\}\}|\[\[|\]\]|</?ref|\{\||\|\}|\|-|bgcolor=")


def wiki_paragraphs(wikitext: str) -> list[str]:
    """The prose paragraphs of one article's wiki markup, parsed with mwparserfromhell.

    Malformed markup elsewhere in a page can make the parser keep a stretch as plain text;
    such a paragraph is parsed once more on its own, and dropped if markup still remains.
    """
    paragraphs = []
    for paragraph in _parse_paragraphs(wikitext):
        if _LEFTOVER_MARKUP.search(paragraph):
            reparsed = _parse_paragraphs(paragraph)
            paragraphs += [p for p in reparsed if not _LEFTOVER_MARKUP.search(p)]
        else:
            paragraphs.append(paragraph)
    return paragraphs


def _parse_paragraphs(wikitext: str) -> list[str]:
    """One pass of the parser: drop what is not running text, keep paragraphs of prose.
    mwparserfromhell is imported here, so that reading a cached corpus does not need it."""
    import mwparserfromhell

    code = mwparserfromhell.parse(wikitext)
    for heading in code.filter_headings(recursive=False):
        if heading.title.strip_code().strip().lower() in _END_SECTIONS:
            del code.nodes[code.index(heading):]
            break
    unwanted = [*code.filter_templates(recursive=False), *code.filter_comments()]
    unwanted += [tag for tag in code.filter_tags() if str(tag.tag).lower() in _DROPPED_TAGS]
    unwanted += [link for link in code.filter_wikilinks() if ":" in str(link.title)]
    for node in unwanted:
        try:
            code.remove(node)
        except ValueError:
            pass  # it sat inside a node removed before it, and went with that one
    for heading in code.filter_headings():
        code.replace(heading, "\n\n")
    plain = code.strip_code(normalize=True, collapse=True)
    paragraphs = (" ".join(block.split()) for block in re.split(r"\n\s*\n", plain))
    return [p for p in paragraphs if len(p.split()) >= _MIN_PARAGRAPH_WORDS]


WIKI_SAMPLE = "test/test_data/enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"
LEE_NEWS = "test/test_data/lee_background.cor"
GENSIM_INSTALL = "pip install gensim==4.4.0"
CLEANER_VERSION = 2


def wiki_pages(path: Path) -> list[tuple[str, str]]:
    """(title, wikitext) of each main-namespace, non-redirect page in a MediaWiki dump."""
    pages = []
    with bz2.open(path) as stream:
        for _, element in ElementTree.iterparse(stream):
            if not element.tag.endswith("}page"):
                continue
            fields = {child.tag.rsplit("}", 1)[-1]: child.text or "" for child in element.iter()}
            if fields["ns"] == "0" and not fields["text"].lstrip().upper().startswith("#REDIRECT"):
                pages.append((fields["title"], fields["text"]))
            element.clear()
    return pages


def wikipedia_articles() -> list[Article]:
    """The 106 Wikipedia articles of gensim's test data, as clean prose (cached)."""
    source = package_file("gensim", WIKI_SAMPLE, GENSIM_INSTALL)
    key = hashlib.sha256(f"{source.stat().st_size}:{CLEANER_VERSION}".encode()).hexdigest()
    cached = cache_dir() / f"wikipedia-sample-{key[:12]}.json"

    def build() -> list[dict]:
        articles = [{"title": title, "paragraphs": wiki_paragraphs(text)}
                    for title, text in wiki_pages(source)]
        return [article for article in articles if article["paragraphs"]]

    rows = cached_rows(cached, build, {"title", "paragraphs"})
    return [Article(row["title"], tuple(row["paragraphs"])) for row in rows]


def lee_news() -> list[Article]:
    """The 300 short news documents of gensim's Lee corpus (one document per line)."""
    source = package_file("gensim", LEE_NEWS, GENSIM_INSTALL)
    lines = source.read_text(encoding="utf-8", errors="replace").splitlines()
    return [Article(f"lee-{n:03d}", (line.strip(),)) for n, line in enumerate(lines)
            if line.strip()]


# A pinned revision: the text a reader gets does not change under the book. `make
# gpu-check` asks the hub whether it is still there.
WIKITEXT_HUB = ("Salesforce/wikitext", "b08601e04326c79dfdd32d625aee71d232d685c3")


def wikitext103(split: str = "train", max_articles: int | None = None) -> list[Article]:
    """WikiText-103 articles, downloaded with `datasets` (needs internet, e.g. on Colab)."""
    try:
        from datasets import load_dataset
    except ImportError as error:
        raise DataUnavailable("WikiText-103 is read with the `datasets` library. Install it "
                              "with:  pip install datasets   (and be online)") from error
    name, revision = WIKITEXT_HUB
    rows = load_dataset(name, "wikitext-103-raw-v1", split=split, revision=revision)
    return articles_from_wikitext_lines((row["text"] for row in rows), max_articles)


def articles_from_wikitext_lines(lines: Iterable[str],
                                 max_articles: int | None = None) -> list[Article]:
    """Group WikiText's lines into articles: ' = Title = ' opens one, ' = = ' are sections.
    WikiText's tokenisation marks are undone: '1 @,@ 000' is '1,000', 'well @-@ known'
    'well-known'."""
    articles: list[Article] = []
    title, paragraphs = None, []
    for line in lines:
        stripped = re.sub(r" @([-,.])@ ", r"\1", line.strip())
        is_title = re.fullmatch(r"= [^=].* =", stripped) is not None
        if is_title:
            if title is not None and paragraphs:
                articles.append(Article(title, tuple(paragraphs)))
                if max_articles is not None and len(articles) >= max_articles:
                    return articles
            title, paragraphs = stripped.strip("= ").strip(), []
        elif stripped and not stripped.startswith("=") and title is not None:
            paragraphs.append(stripped)
    if title is not None and paragraphs:
        articles.append(Article(title, tuple(paragraphs)))
    return articles[:max_articles] if max_articles is not None else articles


CORPORA = {"wikipedia": wikipedia_articles, "lee-news": lee_news, "wikitext-103": wikitext103}


def load_corpus(name: str, max_articles: int | None = None) -> list[Article]:
    """A corpus by name: 'wikipedia' and 'lee-news' offline, 'wikitext-103' online."""
    if name not in CORPORA:
        raise InputError(f"unknown corpus {name!r}; choose one of {sorted(CORPORA)}")
    if name == "wikitext-103":
        return wikitext103(max_articles=max_articles)
    articles = CORPORA[name]()
    return articles[:max_articles] if max_articles is not None else articles


def split_articles(articles: list[Article], held_out: float = 0.1,
                   seed: int = 0) -> tuple[list[Article], list[Article]]:
    """Shuffle articles with a fixed seed and hold out a fraction (at least one) of them."""
    if not 0 < held_out < 1 or len(articles) < 2:
        raise InputError("need at least 2 articles and 0 < held_out < 1 to split")
    order = list(articles)
    random.Random(seed).shuffle(order)
    n_held_out = max(1, round(held_out * len(order)))
    return order[n_held_out:], order[:n_held_out]


def simple_words(text: str) -> list[str]:
    """Lower-cased words and single punctuation marks: the crude tokens of chapter 01.

    Chapter 02 replaces this with WordPiece; here it keeps the experiment about context.
    """
    return re.findall(r"[a-z0-9]+(?:'[a-z]+)?|[^\sa-z0-9]", text.lower())
