"""`python -m bertlib.pretrain`: runs, refuses to overwrite a run, resumes one."""

import subprocess
import sys

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
