"""The one pretraining road (bertlib.pretraining.run.pretrain) on texts, as chapter 08 uses it
for task-adaptive pretraining, and the fair comparisons (bertbook.comparison), on a small
made-up corpus so that each test takes seconds."""

import dataclasses
import json
import math
import random
import statistics

import pytest
import torch
import transformers

from bertbook import comparison
from bertbook.comparison import (
    Comparison,
    accuracy_on,
    clear_win,
    compare_start,
    frozen_probe_accuracy,
    label_draw,
    models_trained,
    scratch_like,
    start_from,
    steps_to_leave_plateau,
    words_only_accuracy,
)
from bertlib.batch import IGNORE_INDEX
from bertlib.core.encoder import BertModel
from bertlib.errors import ConfigError, InputError
from bertlib.finetuning.examples import TextExample
from bertlib.finetuning.models import BertForSequenceClassification
from bertlib.finetuning.run import FineTuningRecipe
from bertlib.pretraining.masking import MaskingRecipe, PretrainingCollator
from bertlib.pretraining.run import (
    PretrainingResult,
    PretrainingRun,
    packed_rows,
    pretrain,
    unigram_baselines,
)
from bertlib.tokenizer import BertTokenizer, train_wordpiece
from bertlib.training.trainer import TrainingConfig, TrainingState

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


def tiny(steps: int = 6, objective: str = "mlm", rate: float = 0.4, dropout: float = 0.0,
         **training) -> PretrainingRun:
    training = dict(dict(steps=steps, batch_size=8, warmup_steps=1, eval_every=2,
                         precision="fp32", progress=False), **training)
    return PretrainingRun(vocab_size=60, max_seq_length=16, objective=objective,
                          masking=MaskingRecipe(probability=rate, max_predictions=16),
                          dropout=dropout, training=TrainingConfig(**training))


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory, texts, tokenizer) -> PretrainingResult:
    return pretrain(texts[:250], tiny(), tmp_path_factory.mktemp("run"), texts[250:],
                    tokenizer, keep_at=(4,), device=torch.device("cpu"))


@pytest.fixture(scope="module")
def topic_splits() -> dict[str, list[TextExample]]:
    rng = random.Random(1)
    return {part: [TextExample(sentence(i % 2, rng), i % 2) for i in range(size)]
            for part, size in (("train", 40), ("dev", 20), ("test", 20))}


def _documents(texts):
    return [[text] for text in texts]


def test_rows_are_full_and_framed(texts, tokenizer):
    rows = packed_rows(tokenizer, _documents(texts), 16)
    assert len(rows) > 10
    assert all(len(row) == 16 and row[0] == tokenizer.cls_id and row[-1] == tokenizer.sep_id
               for row in rows)
    assert tokenizer.pad_id not in {i for row in rows for i in row}


def test_too_little_text_is_refused_with_advice(tokenizer):
    with pytest.raises(InputError, match="smaller max_seq_length"):
        packed_rows(tokenizer, [["goal"]], 64)


@pytest.mark.parametrize("change, message", [
    (dict(dropout=1.0), "dropout"), (dict(max_seq_length=4), "max_seq_length"),
])
def test_bad_runs_are_refused(change, message):
    with pytest.raises(ConfigError, match=message):
        PretrainingRun(**change)


def test_an_unknown_objective_is_refused_before_any_work(tmp_path, texts):
    with pytest.raises(ConfigError, match="objective must be one of"):
        pretrain(texts, tiny(objective="gpt"), tmp_path, texts)
    assert not any(tmp_path.iterdir())


def test_one_string_is_refused_with_advice(tmp_path, texts):
    with pytest.raises(InputError, match=r"wrap it: \[text\]"):
        pretrain("goal match league", tiny(), tmp_path, texts)


def test_masks_follow_the_rate_and_the_key(texts, tokenizer):
    rows = packed_rows(tokenizer, _documents(texts), 16)[:40]
    masker = PretrainingCollator(tokenizer, MaskingRecipe(0.4, max_predictions=16), seed=3,
                                 next_sentence=False)
    masker.reseed("0/1/0")
    first = masker(rows)
    masker.reseed("0/1/0")
    assert torch.equal(masker(rows)["input_ids"], first["input_ids"])
    hidden = first["labels"] != IGNORE_INDEX
    assert abs(hidden.sum() / 40 - 0.4 * 14) < 0.5  # 40% of the 14 pieces, on average
    assert torch.equal(first["labels"][hidden], torch.tensor(rows)[hidden])


class _Vocabulary:  # the two things unigram_baselines asks of a tokenizer
    vocab_size, special_ids = 8, {0}


def test_the_unigram_yardstick_matches_a_hand_count():
    batch = {"labels": torch.tensor([[5, IGNORE_INDEX, 6]])}
    counts = torch.ones(8)
    counts[0] = 0  # a special token is never hidden: no share for it
    counts[5] += 2
    counts[6] += 1
    share = counts / counts.sum()
    cross_entropy = -(math.log(share[5]) + math.log(share[6])) / 2
    found = unigram_baselines([[0, 5, 5, 6, 0]], [batch], _Vocabulary())
    assert found["unigram_cross_entropy"] == pytest.approx(cross_entropy)
    assert found["unigram_perplexity"] == pytest.approx(math.exp(cross_entropy))
    assert found["most_frequent"] == pytest.approx(0.5)  # 5 is the commonest; one of two
    assert found["unigram"] == pytest.approx(float(share[5] + share[6]) / 2)


def test_a_run_leaves_a_curve_a_loadable_folder_and_its_kept_step(tiny_run):
    assert [p["step"] for p in tiny_run.curve] == [2, 4, 6]
    assert tiny_run.curve[-1]["tokens"] == 6 * 8 * 16
    assert set(tiny_run.kept) == {4}
    model = BertForSequenceClassification.from_pretrained(tiny_run.folder, num_labels=3)
    assert model.config.hidden_dropout_prob == 0.0
    saved = json.loads((tiny_run.folder / "run.json").read_text())
    assert saved == json.loads(json.dumps(tiny_run.run.description()))
    assert saved["masking"]["probability"] == 0.4
    assert BertTokenizer.from_pretrained(tiny_run.kept[4]).vocab_size == 60
    assert tiny_run.baselines["unigram_cross_entropy"] > tiny_run.curve[-1]["loss"] - 3


def test_a_left_to_right_run_saves_a_causal_encoder(tmp_path, texts, tokenizer):
    run = pretrain(texts[:100], tiny(steps=2, objective="left-to-right", warmup_steps=0),
                   tmp_path, texts[250:], tokenizer, device=torch.device("cpu"))
    assert BertModel.from_pretrained(run.folder).config.is_decoder


def test_keep_at_must_name_an_evaluated_step(tmp_path, texts, tokenizer):
    with pytest.raises(ConfigError, match="keep_at"):
        pretrain(texts, tiny(), tmp_path, texts, tokenizer, keep_at=(3,))


def test_the_plateau_exit_is_the_first_step_a_nat_under_the_unigram_line(tiny_run):
    curve = [dict(step=1, loss=5.5), dict(step=2, loss=4.9), dict(step=3, loss=4.0)]
    run = dataclasses.replace(tiny_run, state=TrainingState(evaluations=curve),
                              baselines={"unigram_cross_entropy": 6.0})
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


def test_the_chosen_dev_run_is_reused_as_the_first_test_run(tiny_run, topic_splits,
                                                            monkeypatch):
    """One model fewer to train, and the same scores as training that run again."""
    recipe = FineTuningRecipe(epochs=1, batch_size=4, min_steps=2, precision="fp32")
    start = start_from(tiny_run.folder)
    trained = []
    real = comparison.fine_tuned_classifier

    def counted(*args, **kwargs):
        trained.append(args[2].learning_rate)
        return real(*args, **kwargs)

    monkeypatch.setattr(comparison, "fine_tuned_classifier", counted)
    result = compare_start(start, topic_splits, 2, recipe, [1e-3, 3e-3], draws=2, seeds=1,
                           max_length=16)
    assert len(trained) == models_trained(2, 2, 1) == 3
    again = real(start, label_draw(topic_splits["train"], 2, 0),
                 FineTuningRecipe(**{**vars(recipe), "learning_rate": result.learning_rate}),
                 2, 16, torch.device("cpu"))
    assert result.scores[0] == accuracy_on(again, start, topic_splits["test"], 16,
                                           torch.device("cpu"))


def test_the_frozen_probe_scores_a_share(tiny_run, topic_splits):
    encoder = BertModel.from_pretrained(tiny_run.folder)
    tokenizer = BertTokenizer.from_pretrained(tiny_run.folder)
    score = frozen_probe_accuracy(encoder, tokenizer, topic_splits["train"],
                                  topic_splits["test"], max_length=16)
    assert 0 <= score <= 1 and abs(score * 20 - round(score * 20)) < 1e-4  # a share of 20


def test_resuming_on_another_vocabulary_of_the_same_size_is_refused(tmp_path, texts):
    """Another run's vocab.txt in the run folder would map ids to other pieces, silently."""
    run = tiny(steps=4, checkpoint_every=2)
    pretrain(texts[:200], run, tmp_path, texts[250:], device=torch.device("cpu"))
    vocab = tmp_path / "vocabulary" / "vocab.txt"
    pieces = vocab.read_text().splitlines()
    pieces[-1], pieces[-2] = pieces[-2], pieces[-1]  # two ordinary pieces trade ids
    vocab.write_text("\n".join(pieces) + "\n")
    with pytest.raises(ConfigError, match="vocabulary: '[0-9a-f]+' then, '[0-9a-f]+' now"):
        pretrain(texts[:200], run, tmp_path, texts[250:], resume=True,
                 device=torch.device("cpu"))


def test_the_saved_tokenizer_cuts_texts_where_the_model_positions_end(tiny_run):
    """transformers' pipelines truncate at the saved tokenizer's model_max_length: a longer
    one than the position table makes a long text crash the model instead of being cut."""
    folder = tiny_run.folder
    positions = json.loads((folder / "config.json").read_text())["max_position_embeddings"]
    saved = json.loads((folder / "tokenizer_config.json").read_text())["model_max_length"]
    assert saved <= positions
    long_text = " ".join(["[MASK]"] + ["goal match league"] * 3 * positions)
    fill = transformers.pipeline("fill-mask", model=str(folder), top_k=2,
                                 tokenizer_kwargs={"truncation": True})
    assert len(fill(long_text)) == 2
    assert len(BertTokenizer.from_pretrained(folder).encode(long_text).ids) <= positions
