"""`make book`: renders the committed notebooks by default; a bad size is refused before
anything is deleted; re-execution announces each chapter's expected time."""

import nbformat

from tools.authoring import build_book
from tools.chapters import ROOT, chapter_sources


def test_a_bad_size_is_refused_and_the_last_build_kept(tmp_path, monkeypatch, capsys):
    source = tmp_path / "book-src"
    (source / "chapters").mkdir(parents=True)
    kept = source / "chapters" / "00_preface.ipynb"
    kept.write_text("the previous build")
    monkeypatch.setattr(build_book, "SOURCE", source)
    monkeypatch.setenv("BERT_BOOK_SIZE", "laptop")
    for argv in ([], ["--execute"]):
        assert build_book.main(argv) == 2
        assert "'laptop' is not a size of this book" in capsys.readouterr().err
        assert kept.read_text() == "the previous build"


def test_expected_times_come_from_the_committed_run(capsys):
    minutes = {chapter.stem: build_book.last_run_minutes(chapter)
               for chapter in chapter_sources(ROOT)}
    assert all(value is not None and value > 0 for value in minutes.values()), minutes
    build_book.print_expected_times(chapter_sources(ROOT))
    printed = capsys.readouterr().out
    assert "07_fine_tuning" in printed and "total" in printed


def test_the_book_folds_solutions_and_drops_hidden_tests():
    notebook = nbformat.read(ROOT / "chapters" / "00_preface.ipynb", as_version=4)
    shown = build_book.for_readers(notebook)
    text = "\n".join(cell.source for cell in shown.cells)
    assert "BEGIN SOLUTION" not in text and "HIDDEN TESTS" not in text
    toggles = [c for c in shown.cells if c.source.startswith("````{admonition} Solution")]
    assert len(toggles) == 3  # two code answers and a written one
    assert toggles[0].source.count("```python") == 1 and "def run_minutes(" in toggles[0].source
    assert ":class: dropdown" in toggles[0].source  # collapsed until the reader opens it
    tests = next(c for c in shown.cells if "check_run_minutes(run_minutes)" in c.source)
    assert tests.outputs, "the check's output stays"


def test_executing_keeps_kernel_noise_out_of_the_build_log(tmp_path, capfd):
    """The kernel's start-up warning and the profiler's USDT lines go to a log file beside
    the executed notebook; the cells' own output stays in the notebook."""
    chapter = tmp_path / "99_tiny.py"
    chapter.write_text("# %%\nimport torch\nfrom torch.profiler import profile\n\n"
                       "with profile():\n    torch.ones(2).sum()\nprint('cell output')\n")
    target = tmp_path / "99_tiny.ipynb"
    build_book.execute_chapter(chapter, target)
    shown = "".join(capfd.readouterr())
    assert "USDT" not in shown and "without encryption" not in shown
    assert "USDT" in target.with_suffix(".kernel.log").read_text()
    assert "cell output" in target.read_text()
