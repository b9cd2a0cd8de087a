"""Data parallelism: two gloo processes under torchrun reach the weights of one process
with the same global batch."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from bertlib.errors import BertlibError
from bertlib.training.distributed import DataParallelTrainer, switch_off_dropout
from bertlib.training.trainer import TrainingConfig

pytestmark = pytest.mark.slow  # torchrun with two processes

HELPERS = Path(__file__).parent / "helpers"


def _fine_tune(processes: int, out) -> dict:
    launcher = ([sys.executable, "-m", "torch.distributed.run", "--standalone",
                 "--nproc_per_node", str(processes)] if processes > 1 else [sys.executable])
    command = [*launcher, "-m", "bertbook.ddp", "--steps", "3", "--batch-size", "8",
               "--examples", "32", "--max-length", "32", "--no-dropout", "--out", str(out)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads((out / "run.json").read_text())


def test_two_processes_reach_the_weights_of_one(tmp_path):
    one = _fine_tune(1, tmp_path / "one")
    two = _fine_tune(2, tmp_path / "two")
    assert (one["world_size"], two["world_size"]) == (1, 2)
    assert two["losses"] == pytest.approx(one["losses"], abs=1e-5)  # the global batch's loss
    first, second = (load_file(tmp_path / name / "model.safetensors") for name in ("one", "two"))
    assert first.keys() == second.keys()
    for name in first:
        torch.testing.assert_close(first[name], second[name], atol=1e-5, rtol=0)
    untouched = _untrained_classifier_weight()
    assert not torch.allclose(first["classifier.weight"], untouched)  # training did happen


def _untrained_classifier_weight() -> torch.Tensor:
    from bertbook.datasets import minilm_dir
    from bertlib.finetuning.models import BertForSequenceClassification

    torch.manual_seed(0)
    return BertForSequenceClassification.from_pretrained(minilm_dir(), num_labels=2
                                                         ).classifier.weight


def test_the_data_parallel_trainer_needs_torchrun():
    model = torch.nn.Linear(2, 2)
    with pytest.raises(BertlibError, match="torchrun"):
        DataParallelTrainer(model, [0] * 8, None, TrainingConfig(steps=1, batch_size=4),
                            torch.device("cpu"))


def test_switch_off_dropout_reaches_attention_too():
    from bertlib.core.config import BertConfig
    from bertlib.pretraining.models import BertForMaskedLM

    model = switch_off_dropout(BertForMaskedLM(BertConfig(
        vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=32)))
    rates = [m.p for m in model.modules() if isinstance(m, torch.nn.Dropout)]
    rates += [m.dropout for m in model.modules() if isinstance(getattr(m, "dropout", None),
                                                               float)]
    assert rates and all(rate == 0.0 for rate in rates)


@pytest.mark.parametrize("gpus, backend, device", [(1, "gloo", "cpu"), (2, "nccl", "cuda:1")])
def test_nccl_only_when_every_local_rank_has_a_gpu(monkeypatch, gpus, backend, device):
    """Two processes on a one-GPU runtime (Colab) must talk over gloo: NCCL would send
    rank 1 to cuda:1, which does not exist. Simulated: CUDA present, `gpus` devices."""
    from bertlib.training import distributed

    chosen = {}
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: gpus)
    monkeypatch.setattr(torch.cuda, "set_device", lambda device: None)
    monkeypatch.setattr(distributed.dist, "init_process_group",
                        lambda backend, **options: chosen.update(backend=backend))
    monkeypatch.setattr(distributed.dist, "get_rank", lambda: 1)
    monkeypatch.setattr(distributed.dist, "get_world_size", lambda: 2)
    rank, world, where = distributed.start_process_group()
    assert (rank, world, chosen["backend"], str(where)) == (1, 2, backend, device)


def _pretrain(out, *flags: str) -> None:
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone",
               "--nproc_per_node", "2", str(HELPERS / "ddp_pretrain.py"), "--out", str(out),
               *flags]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_resumed_two_process_run_continues_as_an_unbroken_one(tmp_path):
    """Each rank masks with its own collator and drops out with its own RNG: restoring
    rank 0's state on every rank would change rank 1's masks and the losses after it."""
    _pretrain(tmp_path / "whole")
    _pretrain(tmp_path / "broken", "--stop-after", "2")
    _pretrain(tmp_path / "broken", "--resume")
    whole = json.loads((tmp_path / "whole" / "losses.json").read_text())
    resumed = json.loads((tmp_path / "broken" / "losses-resumed.json").read_text())
    assert [resumed[step] for step in ("3", "4")] == pytest.approx(
        [whole[step] for step in ("3", "4")], abs=1e-6)
    assert (tmp_path / "broken" / "rank1-of-2.pt").is_file()


def test_accumulating_micro_batches_exchange_gradients_once_per_step(tmp_path):
    """DDP's no_sync on all but the last micro-batch: two micro-batches per step cost as
    many gradient exchanges as one (without it, twice as many)."""
    _pretrain(tmp_path / "one", "--accumulation", "1")
    _pretrain(tmp_path / "two", "--accumulation", "2")
    once, twice = (json.loads((tmp_path / name / "exchanges.json").read_text())
                   for name in ("one", "two"))
    assert once > 0 and twice == once
