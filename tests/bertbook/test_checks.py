"""The exercise checks: they pass right answers and explain wrong ones."""

import dataclasses
from collections import Counter

import pytest
import torch

from bertbook import checks
from bertlib.core.config import BertConfig
from bertlib.finetuning.models import BertForSequenceClassification
from bertlib.pretraining.masking import MaskingRecipe


def test_a_stub_is_told_to_write_code():
    def unigram_accuracy(train_ids, test_ids):
        raise NotImplementedError

    with pytest.raises(checks.CheckFailed, match="still the stub"):
        checks.check_unigram_accuracy(unigram_accuracy)


def test_a_wrong_answer_names_the_case_and_a_hint():
    def unigram_accuracy(train_ids, test_ids):  # guesses from the test ids: a classic slip
        guess = Counter(test_ids).most_common(1)[0][0]
        return sum(t == guess for t in test_ids) / len(test_ids)

    with pytest.raises(checks.CheckFailed) as error:
        checks.check_unigram_accuracy(unigram_accuracy)
    message = str(error.value)
    assert message.startswith("case 1: unigram_accuracy([5, 5, 7], [5, 7, 7, 7]) returned 0.75")
    assert "expected 0.25" in message and "training ids" in message


def test_a_missing_error_is_reported():
    def offsets_for(reading, width):
        half = width // 2
        if reading == "left":
            return tuple(range(-width, 0))
        if reading == "right":
            return tuple(range(1, width + 1))
        return tuple(range(-half, 0)) + tuple(range(1, half + 1))

    with pytest.raises(checks.CheckFailed, match="should raise ValueError"):
        checks.check_reading_offsets(offsets_for)


def test_a_right_answer_passes(capsys):
    def run_minutes(parameters, tokens, peak_flops, utilisation):
        return 6 * parameters * tokens / (peak_flops * utilisation) / 60

    assert checks.check_run_minutes(run_minutes) is None  # printed once, not echoed again
    assert capsys.readouterr().out == "✓ run_minutes: all 4 checks passed\n"


def test_a_float_subclass_that_equals_everything_fails():
    class AlwaysEqual(float):
        def __eq__(self, other):
            return True

    with pytest.raises(checks.CheckFailed, match="of type AlwaysEqual, not float"):
        checks.check_run_minutes(lambda parameters, tokens, peak, share: AlwaysEqual(1.0))


def test_checks_cannot_be_replaced_from_an_answer_cell():
    with pytest.raises(AttributeError, match="read-only"):
        checks.check_shuffled = lambda shuffled: None
    with pytest.raises(AttributeError, match="read-only"):
        del checks.check_run_minutes


def test_the_run_cost_check_catches_the_forward_only_count():
    def run_minutes(parameters, tokens, peak_flops, utilisation):
        return 2 * parameters * tokens / (peak_flops * utilisation) / 60

    with pytest.raises(checks.CheckFailed, match="case 1.*6,000 operations"):
        checks.check_run_minutes(run_minutes)


@pytest.mark.parametrize("slip, message", [
    ("in place", "changed the list it was given"),
    ("global seed", "moved the random module's own generator"),
])
def test_the_shuffle_check_catches_the_classic_slips(slip, message):
    import random

    def shuffled(items, seed):
        if slip == "in place":
            random.Random(seed).shuffle(items)
            return items
        random.seed(seed)
        copy = list(items)
        random.shuffle(copy)
        return copy

    with pytest.raises(checks.CheckFailed, match=message):
        checks.check_shuffled(shuffled)


def test_the_new_core_checks_catch_their_classic_slips():
    with pytest.raises(checks.CheckFailed, match="four times the bytes"):
        checks.check_attention_weights_bytes(lambda batch, heads, length, size:
                                             batch * heads * length * 3 * size)
    with pytest.raises(checks.CheckFailed, match="not every other row"):
        checks.check_rank_rows(lambda order, batch, size, rank, world:
                               order[batch * size:][rank::world][:size // world])
    with pytest.raises(checks.CheckFailed, match="sums would give"):
        checks.check_averaged_gradients(lambda ranks: [sum(v) for v in zip(*ranks)])


def test_the_head_split_check_passes_a_right_answer_and_catches_a_reshape_across_positions():
    import torch

    def split_heads(x, heads):
        batch, seq, hidden = x.shape
        return x.view(batch, seq, heads, hidden // heads).transpose(1, 2)

    def merge_heads(x):
        batch, heads, seq, size = x.shape
        return x.transpose(1, 2).reshape(batch, seq, heads * size)

    checks.check_split_merge_heads(split_heads, merge_heads)

    def reshaped(x, heads):  # the right shape, the wrong numbers: a classic slip
        batch, seq, hidden = x.shape
        return x.reshape(batch, heads, seq, hidden // heads)

    with pytest.raises(checks.CheckFailed, match="head 0 of position 1"):
        checks.check_split_merge_heads(reshaped, merge_heads)
    assert torch.equal(merge_heads(split_heads(torch.ones(1, 2, 4), 2)), torch.ones(1, 2, 4))


def test_the_masking_check_catches_an_unscored_kept_token():
    def apply_masking(ids, chosen, draws, random_ids, mask_id):
        masked, labels = list(ids), [-100] * len(ids)
        for position, draw, random_id in zip(chosen, draws, random_ids):
            if draw < 0.8:
                masked[position], labels[position] = mask_id, ids[position]
            elif draw < 0.9:
                masked[position], labels[position] = random_id, ids[position]
        return masked, labels

    with pytest.raises(checks.CheckFailed, match="case 3: .* still predicted"):
        checks.check_apply_masking(apply_masking)


def _pooled_masked_lm_loss(logits, labels):
    scored = labels != -100
    picked = torch.log_softmax(logits[scored], -1).gather(1, labels[scored][:, None])
    return -picked.sum() / scored.sum().clamp(min=1)


def test_the_masked_lm_loss_check_passes_a_right_answer(capsys):
    checks.check_masked_lm_loss(_pooled_masked_lm_loss)
    assert "all 5 checks passed" in capsys.readouterr().out


@pytest.mark.parametrize("wrong, message", [
    (lambda logits, labels: torch.nn.functional.cross_entropy(
        logits.flatten(0, 1), labels.flatten(), ignore_index=-100), "case 5: .* not NaN"),
    (lambda logits, labels: _pooled_masked_lm_loss(logits, labels) * (labels != -100).sum()
     / labels.numel(), "case 2: .* labelled -100"),
    (lambda logits, labels: torch.stack([_pooled_masked_lm_loss(row[None], row_labels[None])
                                         for row, row_labels in zip(logits, labels)]).mean(),
     "case 4: .* not the mean of each row's mean"),
    (lambda logits, labels: torch.tensor(_pooled_masked_lm_loss(logits, labels).item()),
     "no gradient"),
], ids=["ignore_index-NaN", "all-positions", "mean-of-rows", "item"])
def test_the_masked_lm_loss_check_catches_the_classic_slips(wrong, message):
    with pytest.raises(checks.CheckFailed, match=message):
        checks.check_masked_lm_loss(wrong)


def _best_span_by_loops(start_scores, end_scores, max_answer_length):
    pairs = [(s, e) for s in range(len(start_scores))
             for e in range(s, min(len(end_scores), s + max_answer_length))]
    return max(pairs, key=lambda pair: (start_scores[pair[0]] + end_scores[pair[1]],
                                        -pair[0], -pair[1]))


def test_the_best_span_check_passes_a_right_answer(capsys):
    checks.check_best_answer_span(_best_span_by_loops)
    assert "all 5 checks passed" in capsys.readouterr().out


@pytest.mark.parametrize("wrong, message", [
    (lambda starts, ends, longest: (starts.index(max(starts)), ends.index(max(ends))),
     "case 2: .* before the start"),
    (lambda starts, ends, longest: _best_span_by_loops(starts, ends, len(ends)),
     "case 3: .* too long"),
], ids=["two-argmaxes", "no-length-limit"])
def test_the_best_span_check_catches_the_classic_slips(wrong, message):
    with pytest.raises(checks.CheckFailed, match=message):
        checks.check_best_answer_span(wrong)


def _sentence_logits(hidden, pooler_weight, pooler_bias, classifier_weight, classifier_bias):
    pooled = torch.tanh(hidden[:, 0] @ pooler_weight.T + pooler_bias)
    return pooled @ classifier_weight.T + classifier_bias


def test_the_sentence_head_check_passes_bertlibs_own_head(capsys):
    """The check's hand-worked answers agree with the library's pooler and classifier."""
    model = BertForSequenceClassification(BertConfig.preset("bert-tiny", vocab_size=50),
                                          num_labels=3).eval()
    ids = torch.randint(0, 50, (2, 6), generator=torch.Generator().manual_seed(0))
    hidden = model.bert(ids).last_hidden_state
    pooler, classifier = model.bert.pooler.dense, model.classifier
    mine = _sentence_logits(hidden, pooler.weight, pooler.bias, classifier.weight,
                            classifier.bias)
    torch.testing.assert_close(mine, model(ids).logits)
    checks.check_sentence_logits(_sentence_logits)
    assert "all 4 checks passed" in capsys.readouterr().out


@pytest.mark.parametrize("wrong, message", [
    (lambda h, wp, bp, wc, bc: torch.tanh(h.mean(1) @ wp.T + bp) @ wc.T + bc, "case 1: .*"),
    (lambda h, wp, bp, wc, bc: (h[:, 0] @ wp.T + bp) @ wc.T + bc, "case 1: .*tanh"),
    (lambda h, wp, bp, wc, bc: torch.tanh(h[:, 0] @ wp + bp) @ wc.T + bc,
     "case 3: .*\\[out, in\\]"),
    (lambda h, wp, bp, wc, bc: torch.tanh(h[:, 0] @ wp.T + bp) @ wc.T, "case 2: .*bias"),
], ids=["mean-of-positions", "no-tanh", "weight-not-transposed", "no-classifier-bias"])
def test_the_sentence_head_check_catches_the_classic_slips(wrong, message):
    with pytest.raises(checks.CheckFailed, match=message):
        checks.check_sentence_logits(wrong)


def test_the_all_mask_check_passes_a_right_answer(capsys):
    checks.check_all_mask(lambda recipe: dataclasses.replace(recipe, mask_share=1.0,
                                                             random_share=0.0))
    assert "all 2 checks passed" in capsys.readouterr().out


@pytest.mark.parametrize("wrong, message", [
    (lambda recipe: recipe, "case 1: .* none is replaced"),
    (lambda recipe: MaskingRecipe(mask_share=1.0, random_share=0.0), "case 2: .* keep how many"),
    (lambda recipe: {"mask_share": 1.0, "random_share": 0.0}, "expected a MaskingRecipe"),
], ids=["unchanged", "defaults", "not-a-recipe"])
def test_the_all_mask_check_catches_a_changed_or_missing_recipe(wrong, message):
    with pytest.raises(checks.CheckFailed, match=message):
        checks.check_all_mask(wrong)


def test_every_check_is_in_the_modules_public_names():
    defined = {name for name, value in vars(checks).items()
               if name.startswith("check_") and getattr(value, "__module__", "") == checks.__name__}
    assert defined - set(checks.__all__) == set()
