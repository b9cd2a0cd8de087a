"""The trainer: exact resume after a kill or Ctrl-C, divergence stops with the checkpoint
intact."""

import os
import signal
import sys
import warnings

import pytest
import torch

import bertlib.runtime as runtime_module
from bertbook.corpora import wikipedia_articles
from bertlib.core.config import BertConfig
from bertlib.errors import CheckpointError, ConfigError, TrainingDiverged
from bertlib.pretraining.masking import PretrainingCollator
from bertlib.pretraining.models import BertForPreTraining
from bertlib.pretraining.sentence_pairs import sentence_documents, sentence_pairs
from bertlib.runtime import resolve_precision
from bertlib.tokenizer import train_wordpiece
from bertlib.training.optimizer import parameter_groups, warmup_then_linear_decay
from bertlib.training.trainer import (
    SeededBatches,
    Trainer,
    TrainingConfig,
    adamw_and_schedule,
    batch_loader,
    default_loader_workers,
)


@pytest.fixture(scope="module")
def data():
    articles = wikipedia_articles()[:8]
    tokenizer = train_wordpiece([p for a in articles for p in a.paragraphs], 600)
    documents = sentence_documents([a.paragraphs for a in articles],
                                   lambda s: tokenizer.encode(s).ids[1:-1])
    return tokenizer, sentence_pairs(documents, max_seq_length=32, seed=0)


def _trainer(data, output_dir, steps=12, callbacks=(), model=None, **overrides):
    tokenizer, pairs = data
    torch.manual_seed(0)
    model = model or BertForPreTraining(BertConfig(
        vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2,
        num_attention_heads=2, intermediate_size=64, max_position_embeddings=32))
    settings = dict(steps=steps, batch_size=8, learning_rate=1e-3, warmup_steps=2,
                    accumulation=2, precision="fp32", checkpoint_every=4, progress=False)
    settings.update(overrides)
    return Trainer(model, pairs, PretrainingCollator(tokenizer, seed=0),
                   TrainingConfig(**settings), output_dir=output_dir, callbacks=callbacks)


class Killed(Exception):
    """Stands in for a process killed between checkpoints."""


def test_a_killed_run_resumes_on_the_same_loss_curve(data, tmp_path):
    unbroken = [r["loss"] for r in _trainer(data, tmp_path / "a").train().history]

    def kill_at_step_7(record):
        if record["step"] == 7:
            raise Killed

    with pytest.raises(Killed):
        _trainer(data, tmp_path / "b", callbacks=[kill_at_step_7]).train()
    resumed = _trainer(data, tmp_path / "b").train(resume=True)  # from step 4's checkpoint
    assert [r["step"] for r in resumed.history] == list(range(1, 13))
    assert [r["loss"] for r in resumed.history] == unbroken  # bit for bit: dropout included
    assert len(set(unbroken)) > 1 and unbroken[-1] < unbroken[0]


class NaNAfter(torch.nn.Module):
    """Wraps a model and makes its loss NaN from the given call on."""

    def __init__(self, model, calls: int):
        super().__init__()
        self.model, self.calls_left = model, calls

    def forward(self, **batch):
        out = self.model(**batch)
        self.calls_left -= 1
        if self.calls_left < 0:
            out.loss = out.loss * float("nan")
        return out


def test_a_nan_loss_stops_with_a_message_and_keeps_the_last_checkpoint(data, tmp_path):
    inner = _trainer(data, tmp_path / "x").model
    trainer = _trainer(data, tmp_path / "run", model=NaNAfter(inner, calls=11))
    with pytest.raises(TrainingDiverged, match="the loss is nan at step 6"):
        trainer.train()
    saved = torch.load(tmp_path / "run" / "checkpoint.pt", weights_only=False)
    assert saved["state"]["step"] == 4
    assert all(torch.isfinite(t).all() for t in saved["model"].values())


def test_resume_without_a_checkpoint_says_so(data, tmp_path):
    with pytest.raises(CheckpointError, match="no checkpoint to resume from"):
        _trainer(data, tmp_path / "empty").train(resume=True)


def test_resume_with_another_length_is_refused(data, tmp_path):
    _trainer(data, tmp_path / "r", steps=4).train()
    with pytest.raises(ValueError, match="made for 4 steps"):
        _trainer(data, tmp_path / "r", steps=8).train(resume=True)


@pytest.mark.filterwarnings("ignore:this CPU has no fast bf16")  # bf16 on purpose
def test_bf16_autocast_trains_on_cpu(data, tmp_path):
    trainer = _trainer(data, None, steps=3, precision="bf16", checkpoint_every=0)
    history = trainer.train().history
    assert all(torch.isfinite(torch.tensor(r["loss"])) for r in history)


def test_no_weight_decay_on_biases_and_layernorm():
    model = BertForPreTraining(BertConfig.preset("bert-tiny", vocab_size=100))
    decayed, undecayed = parameter_groups(model, 0.01)
    names = {id(p): n for n, p in model.named_parameters()}
    assert all(not names[id(p)].endswith("bias") and "LayerNorm" not in names[id(p)]
               for p in decayed["params"])
    assert undecayed["weight_decay"] == 0.0 and decayed["weight_decay"] == 0.01
    assert any("LayerNorm.weight" in names[id(p)] for p in undecayed["params"])


def test_schedule_and_precision_choices():
    assert [warmup_then_linear_decay(s, 2, 6) for s in range(7)] == [
        0, 0.5, 1, 0.75, 0.5, 0.25, 0]
    assert resolve_precision("auto", torch.device("cpu")) == "fp32"  # bf16 only by name
    with pytest.raises(ValueError, match="CUDA"):
        resolve_precision("fp16", torch.device("cpu"))
    with pytest.raises(ValueError, match="warmup_steps"):
        TrainingConfig(steps=5, warmup_steps=5)


def test_too_small_a_dataset_is_a_clear_error(data):
    tokenizer, pairs = data
    model = BertForPreTraining(BertConfig.preset("bert-tiny", vocab_size=tokenizer.vocab_size))
    with pytest.raises(ValueError, match="fewer than one batch"):
        Trainer(model, pairs[:3], PretrainingCollator(tokenizer), TrainingConfig(steps=2))


@pytest.mark.parametrize("fast", [True, False])
def test_bf16_on_a_cpu_warns_only_where_it_is_slow(monkeypatch, fast):
    """Without oneDNN's bf16 (no AVX-512) bf16 products fall back to a loop tens of times
    slower than fp32: asking for bf16 there is kept, with a warning that says what to do."""
    monkeypatch.setattr(runtime_module, "cpu_has_fast_bf16", lambda: fast)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert resolve_precision("bf16", torch.device("cpu")) == "bf16"
    messages = [str(w.message) for w in caught]
    if fast:
        assert messages == []
    else:
        assert len(messages) == 1 and "precision='fp32'" in messages[0]


@pytest.mark.parametrize("capability, expected", [((7, 5), "fp16"), ((8, 0), "bf16"),
                                                  ((9, 0), "bf16")])
def test_auto_precision_follows_the_gpus_compute_capability(monkeypatch, capability, expected):
    """A T4 (7.5) reports bf16 as supported but only emulates it: auto must pick fp16 there."""
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *args, **kwargs: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability)
    assert resolve_precision("auto", torch.device("cuda")) == expected


def test_resume_reads_the_checkpoint_onto_the_cpu_first(data, tmp_path, monkeypatch):
    """On a GPU, loading with map_location=cuda put the saved CUDA RNG states on the GPU,
    and set_rng_state_all refused them. Simulated: CUDA 'present' with CPU byte tensors as
    its RNG states, and a trainer whose device is not the CPU (meta, which holds no data:
    anything loaded straight onto it could not be copied into the model)."""
    states = [torch.zeros(16, dtype=torch.uint8)]
    restored = []

    def set_states(new_states):
        if not all(s.device.type == "cpu" and s.dtype == torch.uint8 for s in new_states):
            raise TypeError("RNG state must be a torch.ByteTensor")
        restored.extend(new_states)

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_rng_state_all", lambda: states)
    monkeypatch.setattr(torch.cuda, "set_rng_state_all", set_states)
    _trainer(data, tmp_path, steps=4).train()
    resumed = _trainer(data, tmp_path, steps=4)
    resumed.device = torch.device("meta")
    resumed.load_checkpoint()
    assert resumed.state.step == 4 and len(restored) == 1


@pytest.mark.filterwarnings("ignore:this CPU has no fast bf16")  # bf16 on purpose
def test_a_checkpoint_resumed_in_another_precision_is_refused(data, tmp_path):
    _trainer(data, tmp_path, steps=4).train()
    with pytest.raises(CheckpointError, match="trained in fp32, this run resolves to bf16"):
        _trainer(data, tmp_path, steps=4, precision="bf16").train(resume=True)


def test_a_step_the_scaler_skips_leaves_the_weights_and_moves_the_schedule(data, tmp_path):
    """fp16 skips the optimizer step when a gradient overflows. The weights must not move;
    the learning-rate schedule follows the steps taken all the same, since asking the
    scaler whether it skipped would make the host wait for the GPU every step (a few
    skips, early on, move the schedule a few steps out of thousands). Simulated on the
    CPU: an enabled scaler and a gradient made infinite by a hook."""
    trainer = _trainer(data, tmp_path, steps=4, accumulation=1)
    trainer.scaler = torch.amp.GradScaler("cpu", init_scale=2.0**8)
    weight = trainer.model.bert.embeddings.word_embeddings.weight
    before = weight.detach().clone()
    handle = weight.register_hook(lambda grad: torch.full_like(grad, float("inf")))
    seen = []

    def after_each_step(record: dict) -> None:
        seen.append((trainer.scheduler.last_epoch, trainer.scaler.get_scale(),
                     torch.equal(weight.detach(), before)))
        handle.remove()  # only the first step overflows

    trainer.callbacks.append(after_each_step)
    trainer.train()
    assert seen[0] == (1, 2.0**7, True)  # skipped: scale halved, weights untouched
    assert seen[1][0] == 2 and not seen[1][2]  # the next step was taken


def test_worker_processes_build_the_batches_one_process_would(data, tmp_path):
    """Batches built ahead by two DataLoader workers, killed and resumed, give the loss
    curve of the single-process run bit for bit: a batch depends on its place alone."""
    alone = [r["loss"] for r in _trainer(data, tmp_path / "a", steps=8).train().history]

    def kill_at_step_6(record):
        if record["step"] == 6:
            raise Killed

    with pytest.raises(Killed):
        _trainer(data, tmp_path / "b", steps=8, loader_workers=2,
                 callbacks=[kill_at_step_6]).train()
    resumed = _trainer(data, tmp_path / "b", steps=8, loader_workers=2).train(resume=True)
    assert [r["loss"] for r in resumed.history] == alone


def test_the_loop_reads_numbers_back_only_when_it_logs(data, monkeypatch):
    """Reading a value back makes the host wait for the GPU. Counted here on the CPU: the
    Trainer's own reads (tolist, item, float, bool of a tensor; not the data's, which are
    built on the host) over 12 steps that log every 4th. Before, it read every step: 12."""
    reads = []

    def counted(method):
        def read(tensor, *args):
            if isinstance(sys._getframe(1).f_locals.get("self"), Trainer):
                reads.append(method)
            return original[method](tensor, *args)
        return read

    original = {name: getattr(torch.Tensor, name)
                for name in ("tolist", "item", "__float__", "__bool__", "__int__")}
    trainer = _trainer(data, None, steps=12, log_every=4, checkpoint_every=0)
    for name in original:
        monkeypatch.setattr(torch.Tensor, name, counted(name))
    trainer.train()
    assert reads == ["tolist"] * 3


def test_a_gpu_gets_workers_and_pinned_memory_a_cpu_neither(data, monkeypatch):
    monkeypatch.setattr("os.cpu_count", lambda: 2)  # a Colab GPU runtime
    assert default_loader_workers(torch.device("cuda", 0)) == 2
    assert default_loader_workers(torch.device("cpu")) == 0
    tokenizer, pairs = data
    batches = SeededBatches(pairs, PretrainingCollator(tokenizer), 8, seed=0)
    on_gpu = batch_loader(batches, 0, 4, torch.device("cuda", 0), workers=2)
    on_cpu = batch_loader(batches, 0, 4, torch.device("cpu"), workers=0)
    assert on_gpu.pin_memory and on_gpu.num_workers == 2 and not on_cpu.pin_memory
    assert list(on_cpu.sampler) == [0, 1, 2, 3]


def test_a_collator_without_reseed_is_refused_with_advice(data):
    tokenizer, pairs = data

    def pad_only(examples):
        return PretrainingCollator(tokenizer)(examples)

    with pytest.raises(ConfigError, match="has no reseed\\(key\\) method"):
        Trainer(BertForPreTraining(BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32,
                                              num_hidden_layers=1, num_attention_heads=2,
                                              intermediate_size=64)),
                pairs, pad_only, TrainingConfig(steps=2, batch_size=8))


def _send_at(step: int, signals: int = 1):
    """A callback that sends this process Ctrl-C (SIGINT) at a step, as a user would."""
    def callback(record):
        if record["step"] == step:
            for _ in range(signals):
                os.kill(os.getpid(), signal.SIGINT)
    return callback


def test_ctrl_c_saves_the_step_in_hand_and_resumes_to_the_same_weights(data, tmp_path, capsys):
    unbroken = _trainer(data, tmp_path / "a")
    unbroken.train()
    with pytest.raises(KeyboardInterrupt, match="stopped at step 6"):
        _trainer(data, tmp_path / "b", callbacks=[_send_at(6)]).train()  # no checkpoint at 6
    said = capsys.readouterr().err
    assert "SIGINT at step 6: saved" in said and "resume=True" in said
    assert torch.load(tmp_path / "b" / "checkpoint.pt", weights_only=False)["state"]["step"] == 6
    resumed = _trainer(data, tmp_path / "b")
    history = resumed.train(resume=True).history
    assert [r["step"] for r in history] == list(range(1, 13))
    expected = unbroken.model.state_dict()
    assert all(torch.equal(t, expected[name]) for name, t in resumed.model.state_dict().items())
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # handlers restored


def test_a_second_ctrl_c_stops_at_once(data, tmp_path):
    with pytest.raises(KeyboardInterrupt, match="a second SIGINT: stopped at once"):
        _trainer(data, tmp_path / "c", callbacks=[_send_at(6, signals=2)]).train()
    saved = torch.load(tmp_path / "c" / "checkpoint.pt", weights_only=False)
    assert saved["state"]["step"] == 4  # the last regular checkpoint, nothing more


def test_the_cpu_update_is_fused_and_matches_the_per_tensor_loop():
    """adamw_and_schedule takes torch's fused AdamW on the CPU (benchmarks/adamw_step.py
    measures why); it must move the weights as the plain loop does."""
    torch.manual_seed(0)
    model = BertForPreTraining(BertConfig.preset("bert-tiny", vocab_size=500))
    looped = BertForPreTraining(model.config)
    looped.load_state_dict(model.state_dict())
    config = TrainingConfig(steps=4, warmup_steps=1, learning_rate=1e-3, progress=False)
    optimizer, _ = adamw_and_schedule(model, config)
    assert optimizer.defaults["fused"]
    reference = torch.optim.AdamW(parameter_groups(looped, config.weight_decay),
                                  lr=config.learning_rate, betas=tuple(config.adam_betas),
                                  eps=config.adam_eps, fused=False)
    for group in optimizer.param_groups:  # the schedule's warm-up would start it at 0
        group["lr"] = config.learning_rate
    for _ in range(3):
        gradients = [torch.randn_like(p) for p in model.parameters()]
        for net, opt in ((model, optimizer), (looped, reference)):
            for parameter, gradient in zip(net.parameters(), gradients):
                parameter.grad = gradient.clone()
            opt.step()
    for (name, ours), theirs in zip(model.named_parameters(), looped.parameters()):
        torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-6, msg=name)
