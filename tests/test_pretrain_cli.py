"""`python -m bertlib.pretrain`: runs, refuses to overwrite a run, resumes one."""

import subprocess
import sys

import pytest
import torch
from transformers import BertForPreTraining as HFBertForPreTraining


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bertlib.pretrain", *args],
                          capture_output=True, text=True, timeout=600)


def test_cli_trains_refuses_to_overwrite_and_resumes(tmp_path):
    out = tmp_path / "run"
    first = _cli("--size", "smoke", "--out", str(out), "--steps", "6", "--corpus", "lee-news")
    assert first.returncode == 0, first.stderr
    assert "done: 6 steps" in first.stdout
    model, info = HFBertForPreTraining.from_pretrained(out / "model", output_loading_info=True)
    assert not info["missing_keys"] and (out / "model" / "vocab.txt").exists()

    again = _cli("--size", "smoke", "--out", str(out), "--steps", "6", "--corpus", "lee-news")
    assert again.returncode == 2 and "already holds a run; pass --resume" in again.stderr

    resumed = _cli("--size", "smoke", "--out", str(out), "--steps", "6", "--corpus",
                   "lee-news", "--resume")
    assert resumed.returncode == 0 and "done: 6 steps" in resumed.stdout


CPU = torch.device("cpu")
SMOKE_RUN = {"steps": 4, "warmup": 1, "corpus": "lee-news", "eval_every": 4}


def _settings():
    from bertlib.pretrain import SIZES

    return {**SIZES["smoke"], **SMOKE_RUN}


def test_resume_trains_on_the_runs_own_vocabulary(tmp_path, monkeypatch):
    """WordPiece training differs between processes: a resumed run must read its
    vocabulary back, never learn a new one (487 of 4,000 ids moved when it did)."""
    import bertlib.pretrain as pretrain

    first = pretrain.run_pretraining(_settings(), tmp_path, device=CPU, progress=False)
    saved = (tmp_path / "vocabulary" / "vocab.txt").read_text()
    assert saved == (tmp_path / "model" / "vocab.txt").read_text()

    def no_training(*args, **kwargs):
        raise AssertionError("a resumed run trained a new vocabulary")

    monkeypatch.setattr(pretrain, "train_wordpiece", no_training)
    resumed = pretrain.run_pretraining(_settings(), tmp_path, resume=True, device=CPU,
                                       progress=False)
    assert resumed["tokenizer"].vocab == first["tokenizer"].vocab


def test_resume_without_the_vocabulary_is_refused(tmp_path):
    import bertlib.pretrain as pretrain
    from bertlib.errors import CheckpointError

    pretrain.run_pretraining(_settings(), tmp_path, device=CPU, progress=False)
    (tmp_path / "vocabulary" / "vocab.txt").unlink()
    with pytest.raises(CheckpointError, match="no vocabulary/vocab.txt"):
        pretrain.run_pretraining(_settings(), tmp_path, resume=True, device=CPU,
                                 progress=False)


def test_resume_on_other_text_is_refused(tmp_path):
    from bertlib.errors import ConfigError
    from bertlib.pretrain import check_run

    (tmp_path / "checkpoint.pt").write_bytes(b"")
    check_run(tmp_path, {"settings": {"steps": 4}, "model": "M", "text": "aaaa"}, resume=False)
    with pytest.raises(ConfigError, match="text: 'aaaa' then, 'bbbb' now"):
        check_run(tmp_path, {"settings": {"steps": 4}, "model": "M", "text": "bbbb"},
                  resume=True)
