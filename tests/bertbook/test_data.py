"""bertbook.corpora and bertbook.datasets on the real files that installed packages ship,
plus their errors and cache."""

import builtins
import json
import sys
import types

import pytest

from bertbook import benchmarks, corpora, datasets, package_data
from bertlib import errors
from bertlib.finetuning import examples as labelled_examples


@pytest.fixture(scope="module")
def articles():
    return corpora.wikipedia_articles()


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
    assert corpora.wiki_paragraphs(wikitext) == [
        "Bank is a firm that takes deposits from its many customers."]


def test_lee_news_has_300_documents():
    assert len(corpora.lee_news()) == 300


def test_cache_is_reused(tmp_path, monkeypatch):
    monkeypatch.setenv("BERTLIB_CACHE", str(tmp_path))
    first = corpora.wikipedia_articles()
    cached = list(tmp_path.glob("wikipedia-sample-*.json"))
    assert len(cached) == 1 and not list(tmp_path.glob("*.tmp"))
    payload = json.loads(cached[0].read_text())
    payload[0]["title"] = "read from the cache"
    cached[0].write_text(json.dumps(payload))
    assert corpora.wikipedia_articles()[0].title == "read from the cache"
    assert len(first) == 106


def test_missing_package_names_the_install_command():
    with pytest.raises(errors.DataUnavailable, match="pip install no-such-package==1.0"):
        package_data.package_file("no_such_package", "x.txt", "pip install no-such-package==1.0")


def test_missing_file_in_a_package_says_reinstall():
    with pytest.raises(errors.DataUnavailable, match="--force-reinstall"):
        package_data.package_file("gensim", "test/test_data/not-there.txt", corpora.GENSIM_INSTALL)


def test_hub_readers_without_datasets_say_how_to_get_it(monkeypatch):
    real_import = builtins.__import__

    def no_datasets(name, *args, **kwargs):
        if name == "datasets":
            raise ImportError("No module named 'datasets'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_datasets)
    readers = (corpora.wikitext103, benchmarks.conll2003, benchmarks.squad,
               lambda: benchmarks.glue_task("sst2"))
    for load in readers:
        with pytest.raises(errors.DataUnavailable, match="pip install datasets"):
            load()


def test_wikitext_lines_group_into_articles():
    lines = ["", " = Valkyria = \n", "", " Senjō no Valkyria is a game . \n", " = = Plot = = \n",
             " The story follows a squad . \n", " = Tower = \n", " A tall building . \n"]
    articles = corpora.articles_from_wikitext_lines(lines)
    assert [a.title for a in articles] == ["Valkyria", "Tower"]
    assert articles[0].paragraphs == ("Senjō no Valkyria is a game .",
                                      "The story follows a squad .")
    assert len(corpora.articles_from_wikitext_lines(lines, max_articles=1)) == 1


def test_wikitext_tokenisation_marks_are_undone():
    lines = [" = Tower = \n", " It is 1 @,@ 250 ft tall , a well @-@ known 3 @.@ 5 km walk . \n"]
    (article,) = corpora.articles_from_wikitext_lines(lines)
    assert article.paragraphs == ("It is 1,250 ft tall , a well-known 3.5 km walk .",)


def test_split_is_by_article_and_seeded(articles):
    train, held_out = corpora.split_articles(articles, held_out=0.1, seed=0)
    assert len(held_out) == 11 and len(train) == 95
    assert not {a.title for a in train} & {a.title for a in held_out}
    assert corpora.split_articles(articles, 0.1, seed=0)[1] == held_out
    with pytest.raises(ValueError):
        corpora.split_articles(articles[:1])


def test_unknown_corpus_lists_the_known_ones():
    with pytest.raises(ValueError, match="lee-news"):
        corpora.load_corpus("books")


def test_simple_words():
    assert corpora.simple_words("The river's bank, 1860.") == [
        "the", "river's", "bank", ",", "1860", "."]


# ---- chapter 07's task data ---------------------------------------------------------

def test_split_of_is_stable_and_about_80_10_10():
    assert datasets.split_of("aankhen") == datasets.split_of("aankhen")
    shares = [datasets.split_of(f"group-{n}") for n in range(5000)]
    assert 0.08 < shares.count("test") / 5000 < 0.12
    assert 0.08 < shares.count("dev") / 5000 < 0.12


def test_rotten_tomatoes_splits_are_disjoint_and_labelled():
    splits = datasets.rotten_tomatoes()
    texts = {name: {e.text for e in examples} for name, examples in splits.items()}
    assert not (texts["train"] & texts["test"]) and not (texts["dev"] & texts["test"])
    total = sum(len(examples) for examples in splits.values())
    assert 12_500 < total < 12_808  # 12,808 fresh/rotten rows, repeated snippets kept once
    assert {e.label for e in splits["train"]} == {0, 1}
    assert 0.6 < len(splits["train"]) / total < 0.9


def test_bbc_news_headline_pairs_and_topics():
    articles = datasets.bbc_news()
    assert 2_000 < len(articles) <= 2_225  # repeated stories kept once
    assert {a.topic for a in articles} == set(datasets.BBC_TOPICS)
    pairs = datasets.headline_pairs(articles)
    by_headline = {a.headline: a for a in articles}
    by_lead = {a.paragraphs[0]: a for a in articles}
    for example in pairs["test"]:
        own, other = by_headline[example.text], by_lead[example.pair]
        assert (own is other) == bool(example.label)
        assert own.topic == other.topic  # distractors come from the same desk
    assert sum(e.label for e in pairs["train"]) * 2 == len(pairs["train"])
    topics = datasets.news_topics(articles)
    assert sum(len(v) for v in topics.values()) == len(articles)


def test_wikipedia_links_are_spans_of_the_clean_text():
    paragraphs = datasets.wikipedia_links()
    assert len(paragraphs) > 4_000 and sum(len(p.links) for p in paragraphs) > 15_000
    for paragraph in paragraphs:
        assert "[[" not in paragraph.text
        assert not any(fence in paragraph.text for fence in "\ue000\ue001\ue002")
        for start, end, target in paragraph.links:
            assert 0 <= start < end <= len(paragraph.text)
            assert paragraph.text[start:end].strip() and target.strip()


def test_links_keep_their_visible_text_and_target():
    (paragraph,) = datasets.linked_paragraphs(
        "t", "A [[financial institution|firm]] in [[paris]] and its branches lent money to "
             "farmers. [[File:Bank.jpg|thumb|a [[bank]]]]")
    assert paragraph.text.startswith("A firm in paris and")
    assert [(paragraph.text[s:e], t) for s, e, t in paragraph.links][:2] == [
        ("firm", "Financial institution"), ("paris", "Paris")]


def test_glue_rows_become_examples():
    rows = [{"sentence1": "A cat sat.", "sentence2": "A cat was sitting.", "label": 1}]
    assert benchmarks.glue_examples(rows, "mrpc") == [
        labelled_examples.TextExample("A cat sat.", 1, "A cat was sitting.")]
    with pytest.raises(ValueError, match="unknown GLUE task"):
        benchmarks.glue_task("squad")


def test_conll_rows_become_tagged_words():
    rows = [{"tokens": ["EU", "rejects", "German", "call"], "ner_tags": [3, 0, 7, 0]},
            {"tokens": [], "ner_tags": []},  # the hub keeps the sentence separators
            {"tokens": ["-DOCSTART-"], "ner_tags": [0]}]  # and the document markers
    (words,) = benchmarks.conll_words(rows)
    assert words == labelled_examples.TaggedWords(("EU", "rejects", "German", "call"), (3, 0, 7, 0))
    assert [datasets.CONLL_TAGS[t] for t in words.tags] == ["B-ORG", "O", "B-MISC", "O"]


def test_squad_rows_become_span_questions():
    context = "Normans gave their name to Normandy, a region in France."
    rows = [{"question": "In what country is Normandy?", "context": context,
             "answers": {"text": ["France", "France"], "answer_start": [49, 49]}}]
    (question,) = benchmarks.squad_questions(rows)
    assert [context[s:e] for s, e in question.answers] == ["France", "France"]


def test_hub_datasets_offline_name_the_dataset(monkeypatch):
    def offline(*args, **kwargs):
        raise ConnectionError("Couldn't reach 'rajpurkar/squad' on the Hub")

    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=offline))
    with pytest.raises(errors.DataUnavailable, match="could not load 'rajpurkar/squad'"):
        benchmarks.squad()


def test_the_paper_benchmarks_are_chapter_07_tasks_with_squad_three_times_as_long(monkeypatch):
    read = []
    monkeypatch.setattr(benchmarks, "glue_task", lambda task: read.append(task) or {})
    monkeypatch.setattr(benchmarks, "conll2003", lambda: read.append("conll") or {})
    monkeypatch.setattr(benchmarks, "squad", lambda: read.append("squad") or {})
    tasks = benchmarks.paper_benchmark_tasks(64)
    assert read == ["sst2", "mrpc", "conll", "squad"]
    assert {name: task[-1] for name, task in tasks.items()} == {
        "SST-2": 64, "MRPC": 64, "CoNLL-2003": 64, "SQuAD v1.1": 192}
    assert tasks["CoNLL-2003"][3] == {"num_labels": len(datasets.CONLL_TAGS)}
    assert all(len(task) == 6 for task in tasks.values())


def test_a_bundled_copy_of_a_package_file_is_used_where_the_bundle_is_named(tmp_path,
                                                                            monkeypatch):
    """The device bundle (tools/device_bundle.py): a machine without the data packages
    reads their files from BERT_BOOK_PACKAGE_DATA; a file the bundle lacks still comes from
    the package, and without the variable nothing changes."""
    from bertbook.corpora import GENSIM_INSTALL, LEE_NEWS, WIKI_SAMPLE
    from bertbook.package_data import package_file

    installed = package_file("gensim", LEE_NEWS, GENSIM_INSTALL)
    copy = tmp_path / "gensim" / LEE_NEWS
    copy.parent.mkdir(parents=True)
    copy.write_text("one bundled document\n")
    monkeypatch.setenv("BERT_BOOK_PACKAGE_DATA", str(tmp_path))
    assert package_file("gensim", LEE_NEWS, GENSIM_INSTALL) == copy
    assert package_file("gensim", WIKI_SAMPLE, GENSIM_INSTALL).parent.parent.parent.name \
        == "gensim"
    monkeypatch.delenv("BERT_BOOK_PACKAGE_DATA")
    assert package_file("gensim", LEE_NEWS, GENSIM_INSTALL) == installed


def test_a_read_only_cache_still_serves_the_rows(tmp_path, monkeypatch):
    """A grading sandbox shows the checkout read-only: the text is built and served, not
    kept, and no error stops the student's chapter (chapter 05 lost two honest answers so)."""
    from bertbook.package_data import cache_dir, cached_rows

    monkeypatch.setenv("BERTLIB_CACHE", str(tmp_path / "not-yet"))
    monkeypatch.setattr(package_data.Path, "mkdir", _read_only)
    assert cache_dir() == tmp_path / "not-yet"  # no error, though nothing could be made
    monkeypatch.undo()
    monkeypatch.setattr(package_data, "write_atomically", _read_only)  # as root, too
    rows = cached_rows(tmp_path / "rows.json", lambda: [{"a": 1}], {"a"})
    assert rows == [{"a": 1}] and not (tmp_path / "rows.json").exists()


def _read_only(*args, **kwargs):
    raise OSError(30, "Read-only file system")
