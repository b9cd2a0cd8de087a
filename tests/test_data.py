"""bertlib.data on the real files that gensim ships, plus its errors and cache."""

import builtins
import json

import pytest

from bertlib import data


@pytest.fixture(scope="module")
def articles():
    return data.wikipedia_articles()


def test_the_wikipedia_sample_has_its_106_articles(articles):
    assert len(articles) == 106
    assert articles[0].title == "Anarchism"
    assert articles[0].paragraphs[0].startswith("Anarchism is a political philosophy")


def test_markup_is_gone(articles):
    text = "\n".join(article.text for article in articles)
    for leftover in ["{{", "}}", "[[", "]]", "<ref", "</ref>", "{|", "|}", "File:", "Category:"]:
        assert leftover not in text, f"wiki markup {leftover!r} survived the cleaning"
    assert 400_000 < len(text.split()) < 600_000


def test_apparatus_sections_are_cut():
    wikitext = ("'''Bank''' is a [[financial institution|firm]] that takes deposits from its "
                "many customers.{{cite web|url=x}}<ref>A source.</ref>\n\n"
                "== See also ==\nAll of these words are in a section that should vanish.")
    assert data.wiki_paragraphs(wikitext) == [
        "Bank is a firm that takes deposits from its many customers."]


def test_lee_news_has_300_documents():
    assert len(data.lee_news()) == 300


def test_cache_is_reused(tmp_path, monkeypatch):
    monkeypatch.setenv("BERTLIB_CACHE", str(tmp_path))
    first = data.wikipedia_articles()
    cached = list(tmp_path.glob("wikipedia-sample-*.json"))
    assert len(cached) == 1 and not list(tmp_path.glob("*.tmp"))
    payload = json.loads(cached[0].read_text())
    payload[0]["title"] = "read from the cache"
    cached[0].write_text(json.dumps(payload))
    assert data.wikipedia_articles()[0].title == "read from the cache"
    assert len(first) == 106


def test_missing_package_names_the_install_command():
    with pytest.raises(data.DataUnavailable, match="pip install no-such-package==1.0"):
        data.package_file("no_such_package", "x.txt", "pip install no-such-package==1.0")


def test_missing_file_in_a_package_says_reinstall():
    with pytest.raises(data.DataUnavailable, match="--force-reinstall"):
        data.package_file("gensim", "test/test_data/not-there.txt", data.GENSIM_INSTALL)


def test_wikitext_without_datasets_is_a_clear_error(monkeypatch):
    real_import = builtins.__import__

    def no_datasets(name, *args, **kwargs):
        if name == "datasets":
            raise ImportError("No module named 'datasets'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_datasets)
    with pytest.raises(data.DataUnavailable, match="pip install datasets"):
        data.wikitext103()


def test_wikitext_lines_group_into_articles():
    lines = ["", " = Valkyria = \n", "", " Senjō no Valkyria is a game . \n", " = = Plot = = \n",
             " The story follows a squad . \n", " = Tower = \n", " A tall building . \n"]
    articles = data.articles_from_wikitext_lines(lines)
    assert [a.title for a in articles] == ["Valkyria", "Tower"]
    assert articles[0].paragraphs == ("Senjō no Valkyria is a game .",
                                      "The story follows a squad .")
    assert len(data.articles_from_wikitext_lines(lines, max_articles=1)) == 1


def test_split_is_by_article_and_seeded(articles):
    train, held_out = data.split_articles(articles, held_out=0.1, seed=0)
    assert len(held_out) == 11 and len(train) == 95
    assert not {a.title for a in train} & {a.title for a in held_out}
    assert data.split_articles(articles, 0.1, seed=0)[1] == held_out
    with pytest.raises(ValueError):
        data.split_articles(articles[:1])


def test_unknown_corpus_lists_the_known_ones():
    with pytest.raises(ValueError, match="lee-news"):
        data.load_corpus("books")


def test_simple_words():
    assert data.simple_words("The river's bank, 1860.") == [
        "the", "river's", "bank", ",", "1860", "."]
