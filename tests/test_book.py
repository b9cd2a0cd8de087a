"""The book package: size selection, the environment report, the library map; and
bertlib.runtime: device choice and seeding."""

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
    assert rows["BertModel"].module == "bertlib.model"
    assert rows["BertModel"].chapter == "chapters/04_encoder.py"
    assert rows["BertTokenizer"].chapter == "chapters/02_tokens.py"
    assert rows["BertForSequenceClassification"].module == "bertlib.finetuning"
    assert rows["BertlibError"].chapter == library_map.HAND_WRITTEN
    assert "_check_values" not in rows  # private names stay out of the map


def test_library_table_lists_modules_under_their_chapter():
    table = library_map.library_table()
    assert "| 04_encoder | `bertlib.model` |" in table
    assert "`BertModel`" in table and "`BertForMaskedLM`" in table


def test_a_run_folder_is_replaced_by_a_rerun(tmp_path, monkeypatch):
    from bertbook.runs import RUNS_VARIABLE, run_folder

    monkeypatch.setenv(RUNS_VARIABLE, str(tmp_path))
    first = run_folder("ch06-smoke")
    (first / "checkpoint.pt").write_bytes(b"old")
    again = run_folder("ch06-smoke")
    assert again == tmp_path / "ch06-smoke" and list(again.iterdir()) == []
    with pytest.raises(ValueError, match="one folder name"):
        run_folder("../elsewhere")
