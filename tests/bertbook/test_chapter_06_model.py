"""Chapters 07 and 08 find chapter 06's model: the reader's finished run first, else the
shipped copy of the committed run (cpu size, current recipe only), else a run made now."""

from pathlib import Path

import pytest

import bertbook.pretrain as book_pretrain
from bertbook.runs import shipped_run
from bertlib.pretraining.models import BertForMaskedLM


def _shipped(size: str):
    return shipped_run(f"ch06-{size}", book_pretrain.run_for(book_pretrain.SIZES[size])
                       .description())


def test_the_shipped_copy_is_of_the_current_cpu_recipe_and_loads():
    folder = _shipped("cpu")
    assert folder is not None, ("bertbook/resources/ch06-cpu is from another recipe: copy "
                                "chapters/runs/ch06-cpu/model there after re-running chapter 06")
    model = BertForMaskedLM.from_pretrained(folder)
    assert model.config.vocab_size == book_pretrain.SIZES["cpu"]["vocab_size"]


def test_a_copy_from_another_recipe_is_never_used(monkeypatch):
    cpu = {**book_pretrain.SIZES["cpu"], "mask_probability": 0.15}
    changed = {**book_pretrain.SIZES, "cpu": cpu}
    monkeypatch.setattr(book_pretrain, "SIZES", changed)
    assert _shipped("cpu") is None
    monkeypatch.setattr(book_pretrain, "finished_run", lambda name: None)
    monkeypatch.setattr(book_pretrain, "pretrain", lambda *args, **kwargs: None)
    monkeypatch.setattr(book_pretrain, "run_folder", lambda name: Path("elsewhere") / name)
    assert book_pretrain.chapter_06_model("cpu") == Path("elsewhere/ch06-cpu/model")


def test_sizes_without_a_copy_have_none():
    assert _shipped("smoke") is None


def test_the_readers_finished_run_comes_before_the_copy(tmp_path, monkeypatch):
    monkeypatch.setattr(book_pretrain, "finished_run", lambda name: tmp_path / name)
    assert book_pretrain.chapter_06_model("cpu") == tmp_path / "ch06-cpu"


def test_without_a_run_the_copy_is_used_and_said(monkeypatch, capsys):
    monkeypatch.setattr(book_pretrain, "finished_run", lambda name: None)
    monkeypatch.setattr(book_pretrain, "pretrain", pytest.fail)  # nothing is trained
    assert book_pretrain.chapter_06_model("cpu") == _shipped("cpu")
    assert "shipped with the book" in capsys.readouterr().out
