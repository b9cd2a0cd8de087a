"""Chapter 07's text baselines, on features written by hand."""

from __future__ import annotations

from bertbook.baselines import (
    dictionary_tagger,
    majority_rate,
    string_match_rate,
    string_match_span,
    tagging_baseline,
    word_keys,
)
from bertbook.task_suite import TaskSuite
from bertlib.finetuning.run import evaluate_classification, evaluate_span_qa, evaluate_tagging

IGNORE = -100


def tagged(pieces: list[list[int]], tags: list[int]) -> dict:
    """A tagging feature: [CLS]=101, the words' pieces, [SEP]=102; tags on first pieces."""
    ids, labels = [101], [IGNORE]
    for word, tag in zip(pieces, tags):
        ids += word
        labels += [tag] + [IGNORE] * (len(word) - 1)
    return {"input_ids": [*ids, 102], "labels": [*labels, IGNORE]}


def test_words_are_read_back_from_their_pieces():
    feature = tagged([[7], [8, 9], [10]], [0, 1, 0])
    assert word_keys(feature) == [(7,), (8, 9), (10,)]


def test_the_dictionary_tags_a_word_as_it_was_tagged_most_often_and_unknown_words_o():
    train = [tagged([[5], [6]], [1, 0]), tagged([[5], [6]], [1, 0]), tagged([[5]], [0])]
    tagger = dictionary_tagger(train)
    assert tagger(tagged([[5], [6], [99]], [0, 0, 0])) == [1, 0, 0]


def test_the_tagging_baseline_scores_mentions():
    train = [tagged([[5], [6], [7]], [1, 2, 0])]
    test = [tagged([[5], [6], [7]], [1, 2, 0]), tagged([[7], [8]], [0, 1])]
    # one of two gold mentions found, the one predicted is right: F1 = 2/3
    assert abs(tagging_baseline(train, test) - 2 / 3) < 1e-9


def test_string_matching_finds_the_longest_run_of_the_question_in_the_paragraph():
    question, paragraph = [30, 31], [40, 30, 41, 30, 31, 42]
    feature = {"input_ids": [101, *question, 102, *paragraph, 102],
               "token_type_ids": [0] * 4 + [1] * 7}
    assert string_match_span(feature) == (4 + 3, 4 + 4)
    nothing = {"input_ids": [101, 50, 102, 40, 41, 102], "token_type_ids": [0] * 3 + [1] * 3}
    assert string_match_span(nothing) == (3, 3)


def test_the_majority_rate_is_the_share_of_the_most_frequent_label():
    assert majority_rate([{"labels": 1}, {"labels": 0}, {"labels": 1}, {"labels": 1}]) == 0.75


def test_the_string_match_rate_counts_matches_that_are_gold_answers():
    feature = {"input_ids": [101, 30, 102, 40, 30, 102], "token_type_ids": [0] * 3 + [1] * 3}
    right, wrong = {**feature, "answers": [(4, 4)]}, {**feature, "answers": [(3, 3)]}
    assert string_match_rate([right, wrong, right]) == 2 / 3


def test_the_suite_picks_the_baseline_by_how_the_task_is_scored():
    labelled = [{"labels": 1}, {"labels": 1}, {"labels": 0}]
    words = [tagged([[5], [6]], [1, 0])]
    question = {"input_ids": [101, 30, 102, 40, 30, 102], "token_type_ids": [0] * 3 + [1] * 3,
                "answers": [(4, 4)]}
    tasks = {name: ({"train": data, "test": data}, lambda tokenizer, examples, n: examples,
                    None, {}, evaluate, 8)
             for name, data, evaluate in [("classify", labelled, evaluate_classification),
                                          ("tag", words, evaluate_tagging),
                                          ("qa", [question], evaluate_span_qa)]}
    suite = TaskSuite(tasks, {"start": (None, None, None)}, None, None, eval_cap=None)
    assert suite.baseline("start", "classify") == 2 / 3
    assert suite.baseline("start", "tag") == 1.0  # the dictionary saw these very words
    assert suite.baseline("start", "qa") == 1.0
