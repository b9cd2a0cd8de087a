"""Chapter 10's levers: packing keeps documents apart, checkpointing and FLOP counts are
right, the paper's budget adds up; and BertModel's new inputs fail with clear errors."""

import math

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from bertbook.measure import (
    PretrainingBudget,
    datasheet_peak_flops,
    interleaved_timings,
    training_flops_per_token,
    training_step,
)
from bertlib.core.config import BertConfig
from bertlib.core.encoder import BertModel
from bertlib.errors import InputError
from bertlib.pretraining.models import BertForMaskedLM
from bertlib.training.packing import (
    first_fit_decreasing,
    pack_documents,
    positions_within_documents,
)

TINY = BertConfig(vocab_size=120, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                  intermediate_size=64, max_position_embeddings=32,
                  hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


def test_first_fit_decreasing_fills_rows_longest_first():
    assert first_fit_decreasing([3, 7, 5, 2], capacity=8) == [[1], [2, 0], [3]]
    assert first_fit_decreasing([4, 4, 4, 4], capacity=8) == [[0, 1], [2, 3]]
    with pytest.raises(ValueError, match="truncate"):
        first_fit_decreasing([9], capacity=8)


def test_positions_restart_at_every_document():
    documents = torch.tensor([[1, 1, 1, 2, 2, 0, 0], [1, 2, 2, 2, 3, 3, 3]])
    assert positions_within_documents(documents).tolist() == [[0, 1, 2, 0, 1, 0, 1],
                                                              [0, 0, 1, 2, 0, 1, 2]]


def test_a_packed_document_comes_out_as_it_does_alone():
    torch.manual_seed(0)
    model = BertModel(TINY).eval()
    documents = [([5, 6, 7, 8, 9], [-100] * 5), ([10, 11, 12], [-100] * 3),
                 ([13, 14, 15, 16], [-100] * 4)]
    packed = pack_documents(documents, max_seq_length=12)
    assert packed["input_ids"].shape == (1, 12)  # 5 + 4 + 3 tokens fill one row
    with torch.no_grad():
        together = model(packed["input_ids"], packed["attention_mask"],
                         position_ids=packed["position_ids"]).last_hidden_state[0]
        for ids, _ in documents:
            start = packed["input_ids"][0].tolist().index(ids[0])
            alone = model(torch.tensor([ids])).last_hidden_state[0]
            torch.testing.assert_close(together[start:start + len(ids)], alone,
                                       atol=1e-5, rtol=1e-5)


def test_packed_labels_follow_their_tokens_and_padding_sees_only_padding():
    packed = pack_documents([([5, 6], [-100, 6]), ([7], [7])], max_seq_length=4, pad_id=0)
    assert packed["input_ids"].tolist() == [[5, 6, 7, 0]]
    assert packed["labels"].tolist() == [[-100, 6, 7, -100]]
    assert packed["attention_mask"][0, 3].tolist() == [False, False, False, True]
    assert packed["attention_mask"][0, 0].tolist() == [True, True, False, False]


def test_gradient_checkpointing_gives_the_same_gradients():
    torch.manual_seed(0)
    ids = torch.randint(5, 120, (2, 16))
    labels = torch.where(torch.rand(2, 16) < 0.3, ids, torch.full_like(ids, -100))
    labels[0, 0] = ids[0, 0]
    grads = []
    for checkpointing in (False, True):
        torch.manual_seed(1)
        model = BertForMaskedLM(TINY).train()
        model.bert.encoder.gradient_checkpointing = checkpointing
        model(ids, labels=labels).loss.backward()
        grads.append(torch.cat([p.grad.flatten() for p in model.parameters()]))
    torch.testing.assert_close(grads[0], grads[1])


@pytest.mark.parametrize("preset, seq", [("bert-tiny", 32), ("bert-base", 128)])
def test_flops_formula_matches_pytorchs_counter(preset, seq):
    config = BertConfig.preset(preset)
    model = BertForMaskedLM(config)
    ids = torch.randint(1000, 30000, (1, seq))
    labels = torch.full_like(ids, -100)
    labels[0, ::4] = ids[0, ::4]  # a quarter of the positions are predicted
    with FlopCounterMode(display=False) as counter:
        model(ids, labels=labels).loss.backward()
    assert counter.get_total_flops() / seq == pytest.approx(
        training_flops_per_token(config, seq, predicted_share=0.25), rel=1e-3)


def test_the_papers_budget():
    budget = PretrainingBudget()
    assert budget.tokens() == pytest.approx(256 * 1_000_000 * (0.9 * 128 + 0.1 * 512))
    base = BertConfig.preset("bert-base")
    rate = 10_000.0  # tokens per second at length 128
    at_128_only = PretrainingBudget(phases=((1.0, 128),))
    assert at_128_only.hours(base, rate, 128) == pytest.approx(256e6 * 128 / rate / 3600)
    assert budget.hours(base, rate, 128) > budget.tokens() / rate / 3600  # 512 is slower


def test_interleaved_timings_alternate_the_order():
    calls = []
    steps = {"a": lambda: calls.append("a"), "b": lambda: calls.append("b")}
    seconds = interleaved_timings(steps, repeats=3, warmup_calls=1)
    assert calls == ["a", "b", "a", "b", "b", "a", "a", "b"]
    assert [len(v) for v in seconds.values()] == [3, 3]


def test_a_wrong_attention_mask_shape_says_what_is_expected():
    model = BertModel(TINY)
    ids = torch.randint(5, 120, (2, 6))
    with pytest.raises(InputError, match=r"\(batch, seq, seq\)"):
        model(ids, torch.ones(2, 6, 5))
    with pytest.raises(InputError, match="position_ids"):
        model(ids, position_ids=torch.zeros(2, 5, dtype=torch.long))


@pytest.mark.parametrize("name, tflops", [
    ("NVIDIA L4", 121.0), ("NVIDIA L40S", None), ("Tesla T4", 65.0),
    ("NVIDIA A100-SXM4-80GB", 312.0), ("NVIDIA H100 PCIe", 756.0),
    ("NVIDIA H100 80GB HBM3", 989.0), ("NVIDIA GeForce RTX 4090", None)])
def test_datasheet_peaks_match_whole_names(monkeypatch, name, tflops):
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: name)
    peak = datasheet_peak_flops(torch.device("cuda"))
    assert peak == (None if tflops is None else tflops * 1e12)


def _masked_batch(seed: int) -> dict[str, torch.Tensor]:
    """Four rows of 16 random ids, a quarter of them to predict."""
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, 60, (4, 16), generator=generator)
    labels = torch.where(torch.rand(4, 16, generator=generator) < 0.25, ids, -100)
    labels[:, 0] = ids[:, 0]  # at least one target per row
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": labels}


def test_steps_over_several_batches_share_one_optimizer():
    """Chapter 10's packing lever made an AdamW per batch (86 of them, ~70 GiB at the gpu
    size); steps given one optimizer must all update through it."""
    model = BertForMaskedLM(BertConfig.preset("bert-tiny", vocab_size=60))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    batches = [_masked_batch(seed) for seed in (0, 1)]
    for batch in batches:
        training_step(model, batch, optimizer=optimizer)()
    steps_taken = [int(optimizer.state[p]["step"]) for p in model.parameters()
                   if p in optimizer.state]
    assert steps_taken and set(steps_taken) == {2}


def test_an_fp16_step_scales_its_loss():
    model = BertForMaskedLM(BertConfig.preset("bert-tiny", vocab_size=60))
    step = training_step(model, _masked_batch(0), precision="fp16")
    assert math.isfinite(step())
