"""The book package: size selection, the environment report, the library map; and
bertlib.runtime: device choice and seeding."""

import os
import sys
from pathlib import Path

import pytest
import torch

from bertbook import environment, library_map, sizes
from bertlib import runtime

SIZES = {"smoke": {"n": 1}, "cpu": {"n": 2}, "gpu": {"n": 3}}


def test_env_var_chooses_the_size(monkeypatch):
    monkeypatch.setenv("BERT_BOOK_SIZE", "CPU ")
    assert sizes.pick_size(SIZES) == ("cpu", {"n": 2})


def test_default_follows_cuda(monkeypatch):
    monkeypatch.delenv("BERT_BOOK_SIZE", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert sizes.book_size() == "gpu"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert sizes.book_size() == "cpu"


def test_unknown_size_lists_the_valid_ones(monkeypatch):
    monkeypatch.setenv("BERT_BOOK_SIZE", "huge")
    with pytest.raises(sizes.BookSizeError) as error:
        sizes.pick_size(SIZES)
    message = str(error.value)
    assert "'huge'" in message and all(f"'{name}'" in message for name in sizes.SIZE_NAMES)


def test_size_table_must_have_every_size(monkeypatch):
    monkeypatch.setenv("BERT_BOOK_SIZE", "smoke")
    with pytest.raises(sizes.BookSizeError, match="missing \\['gpu'\\]"):
        sizes.pick_size({"smoke": {}, "cpu": {}})


def test_pick_size_returns_a_copy(monkeypatch):
    monkeypatch.setenv("BERT_BOOK_SIZE", "smoke")
    _, settings = sizes.pick_size(SIZES)
    settings["n"] = 99
    assert SIZES["smoke"]["n"] == 1


def test_device_prefers_cuda_then_mps(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert runtime.best_device().type == "cuda"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
    assert runtime.best_device().type == "mps"
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    assert runtime.best_device().type == "cpu"


def test_seed_everything_repeats_torch_and_its_generator():
    generator = runtime.seed_everything(3)
    first = (torch.rand(4), torch.rand(2, generator=generator))
    generator = runtime.seed_everything(3)
    assert torch.equal(first[0], torch.rand(4))
    assert torch.equal(first[1], torch.rand(2, generator=generator))


def test_environment_report_names_the_fix(monkeypatch):
    real_find_spec = environment.importlib.util.find_spec
    monkeypatch.setattr(environment.importlib.util, "find_spec",
                        lambda name: None if name == "gensim" else real_find_spec(name))
    report = environment.check_environment()
    assert not report.ok
    assert "pip install gensim==4.4.0" in str(report)


def test_library_map_names_each_public_name_its_module_and_chapter():
    rows = {row.name: row for row in library_map.library_map()}
    assert rows["BertModel"].module == "bertlib.core.encoder"
    assert rows["BertModel"].chapter == "chapters/04_encoder.py"
    assert rows["BertTokenizer"].chapter == "chapters/02_tokens.py"
    assert rows["BertForSequenceClassification"].module == "bertlib.finetuning.models"
    assert rows["BertlibError"].chapter == library_map.HAND_WRITTEN
    assert "_attention_mask" not in rows  # private names stay out of the map


def test_library_table_lists_modules_under_their_chapter():
    table = library_map.library_table()
    assert "| 04_encoder | `bertlib.core.encoder` |" in table
    assert "`BertModel`" in table and "`BertForMaskedLM`" in table


def test_a_run_folder_is_replaced_by_a_rerun(tmp_path, monkeypatch):
    from bertbook.runs import RUNS_VARIABLE, run_folder

    monkeypatch.delenv(RUNS_VARIABLE, raising=False)
    monkeypatch.chdir(tmp_path)
    first = run_folder("ch06-smoke")
    (first / "checkpoint.pt").write_bytes(b"old")
    again = run_folder("ch06-smoke")
    assert again == Path("runs/ch06-smoke") and list(again.iterdir()) == []
    with pytest.raises(ValueError, match="one folder name"):
        run_folder("../elsewhere")


def test_a_persistent_runs_folder_keeps_a_run_to_resume(tmp_path, monkeypatch):
    from bertbook.runs import RUNS_VARIABLE, finished_run, has_checkpoint, run_folder

    monkeypatch.setenv(RUNS_VARIABLE, str(tmp_path))
    first = run_folder("ch06-gpu")
    (first / "checkpoint.pt").write_bytes(b"after a disconnect")
    assert has_checkpoint(run_folder("ch06-gpu")) and finished_run("ch06-gpu") is None
    (first / "model").mkdir()
    (first / "model" / "config.json").write_text("{}")
    assert finished_run("ch06-gpu") == tmp_path / "ch06-gpu" / "model"


def test_drive_is_offered_on_colab_only(tmp_path, monkeypatch):
    """Simulated Colab: a fake google.colab whose drive.mount records the call."""
    import types

    from bertbook.runs import CACHE_VARIABLE, RUNS_VARIABLE, use_drive

    monkeypatch.delenv(RUNS_VARIABLE, raising=False)
    monkeypatch.delenv(CACHE_VARIABLE, raising=False)
    assert use_drive() is None and RUNS_VARIABLE not in os.environ  # not on Colab
    mounted = []
    colab = types.ModuleType("google.colab")
    colab.drive = types.SimpleNamespace(mount=mounted.append)
    monkeypatch.setitem(sys.modules, "google.colab", colab)
    assert use_drive(wanted=False) is None and not mounted
    root = use_drive(folder=str(tmp_path / "MyDrive" / "book"))
    assert mounted == ["/content/drive"] and root == tmp_path / "MyDrive" / "book"
    assert os.environ[RUNS_VARIABLE] == str(root / "runs")
    assert os.environ[CACHE_VARIABLE] == str(root / "cache")


def test_steps_scale_cuts_training_lengths_and_claims(monkeypatch):
    table = {"smoke": {}, "cpu": {}, "gpu": dict(
        steps=20000, warmup_steps=2000, eval_every=2000, epochs=3, batch_size=128,
        assert_claims=True,
        pretrain=dict(steps=2500, warmup_steps=250, lr=5e-4))}
    monkeypatch.setenv("BERT_BOOK_SIZE", "gpu")
    monkeypatch.setenv("BERT_BOOK_STEPS", "0.02")
    _, cut = sizes.pick_size(table)
    assert cut == dict(steps=400, warmup_steps=40, eval_every=40, epochs=0.06, batch_size=128,
                       assert_claims=False, pretrain=dict(steps=50, warmup_steps=5, lr=5e-4))
    assert sizes.scaled(dict(steps=10, warmup_steps=5), 0.01) == dict(steps=1, warmup_steps=0)
    monkeypatch.setenv("BERT_BOOK_STEPS", "2")
    with pytest.raises(sizes.BookSizeError, match="must be a number in \\(0, 1\\]"):
        sizes.pick_size(table)
    monkeypatch.delenv("BERT_BOOK_STEPS")
    assert sizes.pick_size(table)[1] == table["gpu"]


def test_a_claim_prints_its_verdict_and_asserts_only_where_shown(capsys):
    from bertbook.claims import claim

    assert claim(True, "pretraining helps", assert_it=True) is None  # no echo under a cell
    claim(False, "left-to-right wins", assert_it=False)
    assert capsys.readouterr().out.splitlines() == [
        "claim holds: pretraining helps",
        "claim does NOT hold at this size: left-to-right wins"]
    with pytest.raises(AssertionError, match="claim failed: left-to-right wins"):
        claim(False, "left-to-right wins", assert_it=True)
