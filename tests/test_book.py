"""bertlib.book: size selection, device choice, seeding, the environment report."""

import pytest
import torch

from bertlib import book

SIZES = {"smoke": {"n": 1}, "cpu": {"n": 2}, "gpu": {"n": 3}}


def test_env_var_chooses_the_size(monkeypatch):
    monkeypatch.setenv("BERT_BOOK_SIZE", "CPU ")
    assert book.pick_size(SIZES) == ("cpu", {"n": 2})


def test_default_follows_cuda(monkeypatch):
    monkeypatch.delenv("BERT_BOOK_SIZE", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert book.book_size() == "gpu"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert book.book_size() == "cpu"


def test_unknown_size_lists_the_valid_ones(monkeypatch):
    monkeypatch.setenv("BERT_BOOK_SIZE", "huge")
    with pytest.raises(book.BookSizeError) as error:
        book.pick_size(SIZES)
    message = str(error.value)
    assert "'huge'" in message and all(f"'{name}'" in message for name in book.SIZE_NAMES)


def test_size_table_must_have_every_size(monkeypatch):
    monkeypatch.setenv("BERT_BOOK_SIZE", "smoke")
    with pytest.raises(book.BookSizeError, match="missing \\['gpu'\\]"):
        book.pick_size({"smoke": {}, "cpu": {}})


def test_pick_size_returns_a_copy(monkeypatch):
    monkeypatch.setenv("BERT_BOOK_SIZE", "smoke")
    _, settings = book.pick_size(SIZES)
    settings["n"] = 99
    assert SIZES["smoke"]["n"] == 1


def test_device_prefers_cuda_then_mps(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert book.best_device().type == "cuda"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
    assert book.best_device().type == "mps"
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    assert book.best_device().type == "cpu"


def test_seed_everything_repeats_torch_and_its_generator():
    generator = book.seed_everything(3)
    first = (torch.rand(4), torch.rand(2, generator=generator))
    generator = book.seed_everything(3)
    assert torch.equal(first[0], torch.rand(4))
    assert torch.equal(first[1], torch.rand(2, generator=generator))


def test_environment_report_names_the_fix(monkeypatch):
    real_find_spec = book.importlib.util.find_spec
    monkeypatch.setattr(book.importlib.util, "find_spec",
                        lambda name: None if name == "gensim" else real_find_spec(name))
    report = book.check_environment()
    assert not report.ok
    assert "pip install gensim==4.4.0" in str(report)


def test_library_map_names_each_module_source():
    rows = {module: source for module, source, _ in book.library_map()}
    assert rows["bertlib.book"] == "written by hand"
    assert rows["bertlib.data"] == ("chapters/01_reading_one_way.py, chapters/02_tokens.py, "
                                    "chapters/05_masking.py, chapters/07_fine_tuning.py, "
                                    "chapters/08_inside_bert.py")
    assert rows["bertlib.model"] == "chapters/04_encoder.py"
