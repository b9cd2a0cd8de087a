"""The gpu size keeps its time budget: each chapter's own estimate, computed by the cells
at its top, fits 30 minutes on a Colab T4 (45 for chapter 06's pretraining). And no claim is
asserted at the gpu size, where no run has been seen yet."""

from pathlib import Path

import pytest

from bertbook.budget import (
    GPU_BUDGET_MINUTES,
    PRETRAINING_BUDGET_MINUTES,
    Work,
    budget_report,
    minutes_on,
    training_work,
)
from bertbook.measure import DATASHEET_TFLOPS
from bertlib.core.config import BertConfig
from tools.chapters import ROOT, chapter_sources, read_chapter

pytestmark = pytest.mark.slow  # each chapter's first cells, executed

T4 = DATASHEET_TFLOPS["T4"] * 1e12


def top_of(chapter: Path, monkeypatch) -> dict:
    """Run the chapter's code cells (at the smoke size) through the one that prints its
    budget; return their namespace."""
    monkeypatch.setenv("BERT_BOOK_SIZE", "smoke")
    monkeypatch.chdir(chapter.parent)
    namespace: dict = {}
    for cell in read_chapter(chapter).cells:
        if cell.cell_type == "code":
            exec(compile(cell.source, f"{chapter.name} cell", "exec"), namespace)
            if "budget_report(" in cell.source:
                return namespace
    raise AssertionError(f"{chapter.name} prints no budget_report near its top")


@pytest.mark.parametrize("chapter", [c for c in chapter_sources(ROOT)
                                     if not c.name.startswith("00")],
                         ids=lambda c: c.stem)
def test_each_chapter_fits_its_gpu_budget(chapter, monkeypatch, capsys):
    namespace = top_of(chapter, monkeypatch)
    work = namespace.get("GPU_WORK", [])
    budget = PRETRAINING_BUDGET_MINUTES if chapter.name.startswith("06") else GPU_BUDGET_MINUTES
    assert minutes_on(work, T4) <= budget, budget_report(work)
    assert "at the gpu size" in capsys.readouterr().out
    gpu = namespace["SIZES"]["gpu"]
    assert not gpu.get("assert_claims", False), "no gpu run has shown the claims yet"


def test_the_estimate_is_flops_over_the_assumed_rate():
    config = BertConfig.preset("bert-base", vocab_size=30522)
    work = [training_work("a run", config, tokens=1e9, max_seq_length=128)]
    per_token = 3 * 2 * (12 * (4 * 768**2 + 2 * 768 * 3072) + 12 * 2 * 128 * 768
                         + 0.15 * (768**2 + 768 * 30522))
    assert work[0].flops == pytest.approx(1e9 * per_token)
    assert minutes_on(work, 100e12) == pytest.approx(work[0].flops / (100e12 * 0.15) / 60)
    assert minutes_on([Work("two", 2 * 9e15)], T4) == pytest.approx(
        2 * minutes_on([Work("one", 9e15)], T4))
    report = budget_report(work)
    assert "T4" in report and "A100" in report and "15%" in report
