"""Chapter 08's library: task-adaptive pretraining (bertlib.adaptation) and fair comparisons
(bertlib.comparison), on a small made-up corpus so that each test takes seconds."""

import math
import random
import statistics

import pytest
import torch

from bertlib.adaptation import (
    AdaptationRun,
    AdaptationSettings,
    RowMasker,
    pretrain_on_texts,
    steps_to_leave_plateau,
    text_rows,
    unigram_cross_entropy,
)
from bertlib.batch import IGNORE_INDEX
from bertlib.comparison import (
    Comparison,
    clear_win,
    compare_start,
    frozen_probe_accuracy,
    label_draw,
    scratch_like,
    start_from,
    words_only_accuracy,
)
from bertlib.errors import ConfigError, InputError
from bertlib.finetuning import BertForSequenceClassification, FineTuningRecipe
from bertlib.model import BertModel
from bertlib.task_data import TextExample
from bertlib.tokenizer import BertTokenizer, train_wordpiece

TOPICS = {0: ["goal", "match", "league", "striker", "coach"],
          1: ["shares", "profit", "market", "bank", "growth"]}


def sentence(label: int, rng: random.Random) -> str:
    words = rng.choices(TOPICS[label], k=6) + rng.choices(["the", "a", "of", "and"], k=4)
    rng.shuffle(words)
    return " ".join(words)


@pytest.fixture(scope="module")
def texts() -> list[str]:
    rng = random.Random(0)
    return [sentence(i % 2, rng) for i in range(300)]


@pytest.fixture(scope="module")
def tokenizer(texts) -> BertTokenizer:
    return train_wordpiece(texts, 60)


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory, texts, tokenizer) -> AdaptationRun:
    settings = AdaptationSettings(vocab=60, seq=16, batch=8, steps=6, warmup=1, eval_every=2,
                                  precision="fp32", mask_rate=0.4, dropout=0.0)
    return pretrain_on_texts(texts[:250], tmp_path_factory.mktemp("run"), settings,
                             texts[250:], tokenizer, keep_at=(4,),
                             device=torch.device("cpu"), progress=False)


@pytest.fixture(scope="module")
def topic_splits() -> dict[str, list[TextExample]]:
    rng = random.Random(1)
    return {part: [TextExample(sentence(i % 2, rng), i % 2) for i in range(size)]
            for part, size in (("train", 40), ("dev", 20), ("test", 20))}


def test_rows_are_full_and_framed(texts, tokenizer):
    rows = text_rows(tokenizer, texts, 16)
    assert len(rows) > 10
    assert all(len(row) == 16 and row[0] == tokenizer.cls_id and row[-1] == tokenizer.sep_id
               for row in rows)
    assert tokenizer.pad_id not in {i for row in rows for i in row}


def test_too_little_text_is_refused_with_advice(tokenizer):
    with pytest.raises(InputError, match="smaller seq"):
        text_rows(tokenizer, ["goal"], 64)


@pytest.mark.parametrize("change, message", [
    (dict(objective="gpt"), "objective"), (dict(mask_rate=1.0), "mask_rate"),
    (dict(dropout=1.0), "dropout"), (dict(seq=4), "seq"), (dict(eval_every=0), "eval_every"),
])
def test_bad_settings_are_refused(change, message):
    with pytest.raises(ConfigError, match=message):
        AdaptationSettings(**change)


def test_masks_follow_the_rate_and_the_key(texts, tokenizer):
    rows = text_rows(tokenizer, texts, 16)[:40]
    masker = RowMasker(tokenizer, rate=0.4, seed=3)
    masker.reseed("0/1/0")
    first = masker(rows)
    masker.reseed("0/1/0")
    assert torch.equal(masker(rows)["input_ids"], first["input_ids"])
    hidden = first["labels"] != IGNORE_INDEX
    assert abs(hidden.sum() / 40 - 0.4 * 14) < 0.5  # 40% of the 14 pieces, on average
    assert torch.equal(first["labels"][hidden], torch.tensor(rows)[hidden])


def test_unigram_line_matches_a_hand_count():
    rows = [[5, 5, 6]]
    batch = {"labels": torch.tensor([[5, IGNORE_INDEX, 6]])}
    counts = torch.ones(8)
    counts[5] += 2
    counts[6] += 1
    expected = -(math.log(counts[5] / counts.sum()) + math.log(counts[6] / counts.sum())) / 2
    assert unigram_cross_entropy(rows, [batch], 8) == pytest.approx(expected)


def test_a_run_leaves_a_curve_a_loadable_folder_and_its_kept_step(tiny_run):
    assert [p["step"] for p in tiny_run.curve] == [2, 4, 6]
    assert tiny_run.curve[-1]["tokens"] == 6 * 8 * 16
    assert set(tiny_run.kept) == {4}
    model = BertForSequenceClassification.from_pretrained(tiny_run.folder, num_labels=3)
    assert model.config.hidden_dropout_prob == 0.0
    assert (tiny_run.folder / "curve.json").is_file()
    assert BertTokenizer.from_pretrained(tiny_run.kept[4]).vocab_size == 60


def test_a_left_to_right_run_saves_a_causal_encoder(tmp_path, texts, tokenizer):
    settings = AdaptationSettings(vocab=60, seq=16, batch=8, steps=2, warmup=0, eval_every=2,
                                  precision="fp32", objective="left-to-right")
    run = pretrain_on_texts(texts[:100], tmp_path, settings, texts[250:], tokenizer,
                            device=torch.device("cpu"), progress=False)
    assert BertModel.from_pretrained(run.folder).config.is_decoder


def test_keep_at_must_name_an_evaluated_step(tmp_path, texts, tokenizer):
    settings = AdaptationSettings(steps=6, warmup=1, eval_every=2)
    with pytest.raises(ConfigError, match="keep_at"):
        pretrain_on_texts(texts, tmp_path, settings, texts, tokenizer, keep_at=(3,))


def test_the_plateau_exit_is_the_first_step_a_nat_under_the_unigram_line(tiny_run):
    run = AdaptationRun(tiny_run.folder, tiny_run.settings,
                        [dict(step=1, loss=5.5), dict(step=2, loss=4.9), dict(step=3, loss=4.0)],
                        unigram_loss=6.0, train_tokens=0, kept={})
    assert steps_to_leave_plateau(run) == 2
    assert steps_to_leave_plateau(run, nats_below_unigram=3.0) is None


def test_label_draws_are_balanced_repeatable_and_refuse_too_many(topic_splits):
    draw = label_draw(topic_splits["train"], 3, draw=1)
    assert sorted(e.label for e in draw) == [0, 0, 0, 1, 1, 1]
    assert draw == label_draw(topic_splits["train"], 3, draw=1)
    assert draw != label_draw(topic_splits["train"], 3, draw=2)
    with pytest.raises(InputError, match="fewer than 50"):
        label_draw(topic_splits["train"], 50, draw=0)


def test_a_clear_win_needs_a_gap_larger_than_both_spreads():
    assert clear_win(Comparison(1e-3, {}, [0.9, 0.9]), Comparison(1e-3, {}, [0.5, 0.6]))
    assert not clear_win(Comparison(1e-3, {}, [0.9, 0.5]), Comparison(1e-3, {}, [0.5, 0.5]))
    result = Comparison(1e-3, {}, [0.5, 0.7])
    assert result.mean == pytest.approx(0.6)
    assert result.sd == pytest.approx(statistics.stdev([0.5, 0.7]))


def test_words_alone_separate_words_that_differ(topic_splits):
    assert words_only_accuracy(topic_splits["train"], topic_splits["test"]) == 1.0


def test_the_comparison_chooses_its_rate_on_dev_and_scores_every_draw_and_seed(
        tiny_run, topic_splits):
    recipe = FineTuningRecipe(epochs=1, batch_size=4, min_steps=2, precision="fp32")
    result = compare_start(start_from(tiny_run.folder), topic_splits, 2, recipe,
                           [1e-3, 3e-3], draws=2, seeds=2, max_length=16)
    assert set(result.dev) == {1e-3, 3e-3}
    assert result.learning_rate == max(result.dev, key=result.dev.get)
    assert len(result.scores) == 4 and all(0 <= s <= 1 for s in result.scores)
    scratch = scratch_like(tiny_run.folder).build(2)
    trained = start_from(tiny_run.folder).build(2)
    name = "bert.encoder.layer.0.attention.self.query.weight"
    assert not torch.equal(scratch.state_dict()[name], trained.state_dict()[name])


def test_the_frozen_probe_scores_a_share(tiny_run, topic_splits):
    encoder = BertModel.from_pretrained(tiny_run.folder)
    tokenizer = BertTokenizer.from_pretrained(tiny_run.folder)
    score = frozen_probe_accuracy(encoder, tokenizer, topic_splits["train"],
                                  topic_splits["test"], max_length=16)
    assert 0 <= score <= 1 and abs(score * 20 - round(score * 20)) < 1e-4  # a share of 20
