"""`python -m bertbook.pretrain`: runs, refuses to overwrite a run, resumes one."""

import subprocess
import sys

import pytest
import torch
from transformers import BertForPreTraining as HFBertForPreTraining

pytestmark = pytest.mark.slow  # pretraining runs on the book's corpus


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bertbook.pretrain", *args],
                          capture_output=True, text=True, timeout=600)


def test_cli_trains_refuses_to_overwrite_and_resumes(tmp_path):
    out = tmp_path / "run"
    first = _cli("--size", "smoke", "--out", str(out), "--steps", "6", "--corpus", "lee-news",
               "--objective", "mlm+nsp")  # the paper's two heads; smoke has one
    assert first.returncode == 0, first.stderr
    assert "done: 6 steps" in first.stdout
    model, info = HFBertForPreTraining.from_pretrained(out / "model", output_loading_info=True)
    assert not info["missing_keys"] and (out / "model" / "vocab.txt").exists()

    again = _cli("--size", "smoke", "--out", str(out), "--steps", "6", "--corpus", "lee-news",
                 "--objective", "mlm+nsp")
    assert again.returncode == 2 and "already holds a run; pass --resume" in again.stderr

    resumed = _cli("--size", "smoke", "--out", str(out), "--steps", "6", "--corpus",
                   "lee-news", "--objective", "mlm+nsp", "--resume")
    assert resumed.returncode == 0 and "done: 6 steps" in resumed.stdout


CPU = torch.device("cpu")
SMOKE_RUN = {"steps": 4, "warmup_steps": 1, "corpus": "lee-news", "eval_every": 4}


def _smoke_run(folder, resume=False):
    """The smoke size cut to 4 steps, through the one road, as the CLI runs it."""
    from bertbook.pretrain import SIZES, book_documents, run_for
    from bertlib.pretraining.run import pretrain

    settings = {**SIZES["smoke"], **SMOKE_RUN}
    train, held_out = book_documents(settings)
    return pretrain(train, run_for(settings, progress=False), folder, held_out,
                    resume=resume, device=CPU)


def test_resume_trains_on_the_runs_own_vocabulary(tmp_path, monkeypatch):
    """WordPiece training differs between processes: a resumed run must read its
    vocabulary back, never learn a new one (487 of 4,000 ids moved when it did)."""
    import bertlib.pretraining.run

    first = _smoke_run(tmp_path)
    saved = (tmp_path / "vocabulary" / "vocab.txt").read_text()
    assert saved == (tmp_path / "model" / "vocab.txt").read_text()

    def no_training(*args, **kwargs):
        raise AssertionError("a resumed run trained a new vocabulary")

    monkeypatch.setattr(bertlib.pretraining.run, "train_wordpiece", no_training)
    resumed = _smoke_run(tmp_path, resume=True)
    assert resumed.tokenizer.vocab == first.tokenizer.vocab


def test_resume_without_the_vocabulary_is_refused(tmp_path):
    from bertlib.errors import CheckpointError

    _smoke_run(tmp_path)
    (tmp_path / "vocabulary" / "vocab.txt").unlink()
    with pytest.raises(CheckpointError, match="no vocabulary/vocab.txt"):
        _smoke_run(tmp_path, resume=True)


def test_chapter_06s_finished_model_is_reused_not_replaced(tmp_path, monkeypatch):
    """Chapter 08 asks for chapter 06's model: a finished run in the default runs/ (which a
    new run of the same name replaces) must be handed over as it is, not wiped and
    pretrained again."""
    from bertbook.pretrain import chapter_06_model

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("BERT_BOOK_RUNS", raising=False)
    model = tmp_path / "runs" / "ch06-smoke" / "model"
    model.mkdir(parents=True)
    (model / "config.json").write_text("{}")
    assert chapter_06_model("smoke").resolve() == model.resolve()
    assert (model / "config.json").read_text() == "{}"
