"""The GPU step's levers, proven on the CPU to change nothing but speed: an all-ones
attention mask left out, torch.compile through the trainer's settings, and a masked LM that
compiles as one graph when the collator gives its fixed slots (`masked_positions`). Their
speed is measured on a GPU by tools/gpu_check.py, not here."""

import functools

import pytest
import torch
import torch._dynamo as dynamo

from bertlib.core.config import BertConfig
from bertlib.pretraining.models import BertForMaskedLM, BertForPreTraining
from bertlib.training.trainer import Trainer, TrainingConfig, without_full_attention_mask

CONFIG = BertConfig(vocab_size=300, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                    intermediate_size=64, max_position_embeddings=16)


def full_rows_batch(rows: int = 4, length: int = 16) -> dict[str, torch.Tensor]:
    """Packed rows, no padding, two hidden pieces a row in fixed slots."""
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(5, CONFIG.vocab_size, (rows, length), generator=generator)
    positions = torch.tensor([[3, 9]] * rows)
    labels = torch.full_like(ids, -100).scatter(1, positions, ids.gather(1, positions))
    return {"input_ids": ids.scatter(1, positions, 4), "attention_mask": torch.ones_like(ids),
            "labels": labels, "masked_positions": positions}


class FixedBatches:
    """A collator that serves the same full-rows batch whatever it is given."""

    def __call__(self, examples) -> dict[str, torch.Tensor]:
        return full_rows_batch()

    def reseed(self, key: str) -> None:
        pass


def test_an_all_ones_mask_is_left_out_and_changes_no_loss():
    batch = full_rows_batch()
    lean = without_full_attention_mask(batch)
    assert "attention_mask" not in lean and set(batch) - set(lean) == {"attention_mask"}
    torch.manual_seed(0)
    model = BertForMaskedLM(CONFIG).eval()
    assert torch.allclose(model(**batch).loss, model(**lean).loss, atol=1e-6)


def test_a_mask_with_padding_is_kept():
    batch = full_rows_batch()
    batch["attention_mask"][0, -3:] = 0
    assert without_full_attention_mask(batch) is batch


def test_the_trainer_counts_the_tokens_of_rows_it_sends_without_a_mask():
    torch.manual_seed(0)
    trainer = Trainer(BertForMaskedLM(CONFIG), list(range(8)), FixedBatches(),
                      TrainingConfig(steps=2, batch_size=4, precision="fp32", progress=False,
                                     log_every=1))
    assert [record["tokens"] for record in trainer.train().history] == [4 * 16, 4 * 16]


def _losses(compile_it: bool, monkeypatch) -> list[float]:
    # The real torch.compile traces the model (graph breaks and all); the eager backend
    # runs the traced graphs without building kernels, which on a CPU would take minutes.
    monkeypatch.setattr(torch, "compile", functools.partial(torch.compile, backend="eager"))
    torch.manual_seed(0)
    trainer = Trainer(BertForMaskedLM(CONFIG), list(range(8)), FixedBatches(),
                      TrainingConfig(steps=3, batch_size=4, precision="fp32", progress=False,
                                     log_every=1, compile=compile_it))
    losses = [record["loss"] for record in trainer.train().history]
    assert isinstance(trainer.forward_model, torch.nn.Module)
    assert (type(trainer.forward_model).__name__ == "OptimizedModule") == compile_it
    return losses


def test_compile_through_the_settings_gives_the_same_losses(monkeypatch):
    dynamo.reset()
    assert _losses(True, monkeypatch) == pytest.approx(_losses(False, monkeypatch), abs=1e-6)


@pytest.mark.parametrize("model_class", [BertForMaskedLM, BertForPreTraining])
@pytest.mark.parametrize("with_mask", [True, False])
def test_the_masked_lm_with_fixed_slots_compiles_as_one_graph(model_class, with_mask):
    batch = full_rows_batch()
    if not with_mask:
        batch = without_full_attention_mask(batch)
    if model_class is BertForPreTraining:
        batch["next_sentence_label"] = torch.zeros(4, dtype=torch.long)
    dynamo.reset()
    explained = dynamo.explain(model_class(CONFIG))(**batch)
    assert explained.graph_break_count == 0, explained.break_reasons


def test_without_fixed_slots_the_masked_lm_breaks_its_graph():
    """The reason the collator gives masked_positions: labels alone make the head gather a
    number of positions only the data knows, and the compiler must stop to ask."""
    batch = full_rows_batch()
    del batch["masked_positions"]
    dynamo.reset()
    assert dynamo.explain(BertForMaskedLM(CONFIG))(**batch).graph_break_count > 0


def test_an_fp16_step_asks_the_device_nothing(monkeypatch):
    """On a T4 the trainer steps in fp16 with a loss scaler; reading the scale back (or
    any number) each step would make the host wait for the GPU. Simulated on the CPU:
    an fp16 scaler that fails if asked for its scale, and tensors that fail if read. The
    AdamW is fused, as the trainer makes it on a GPU: the scaler then hands it the overflow
    flag on the device instead of reading it (an unfused AdamW would be read every step)."""
    adamw = torch.optim.AdamW
    monkeypatch.setattr(torch.optim, "AdamW", lambda *a, **k: adamw(*a, **{**k, "fused": True}))
    torch.manual_seed(0)
    trainer = Trainer(BertForMaskedLM(CONFIG), list(range(8)), FixedBatches(),
                      TrainingConfig(steps=3, batch_size=4, precision="fp32", progress=False))
    trainer.precision = "fp16"  # as resolve_precision says on a GPU below compute 8.0
    trainer.scaler = torch.amp.GradScaler("cpu", enabled=True)

    def no_sync(*args, **kwargs):
        raise AssertionError("the step read a number back from the device")

    monkeypatch.setattr(torch.amp.GradScaler, "get_scale", no_sync)
    monkeypatch.setattr(torch.Tensor, "item", no_sync)
    batches = iter([FixedBatches()([])] * 3)
    values = [trainer._train_step(batches) for _ in range(3)]
    monkeypatch.undo()
    assert trainer.scheduler.last_epoch == 3 and all(v.shape == (3,) for v in values)
