"""The chapters as files: twins in sync, outputs committed, the template followed."""

import re

import nbformat
import pytest

from tools import student, sync
from tools.chapters import ROOT, cell_texts, chapter_sources, read_chapter

CHAPTERS = chapter_sources(ROOT)


def test_there_are_chapters():
    assert [c.stem[:2] for c in CHAPTERS][:2] == ["00", "01"]


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda c: c.stem)
def test_notebook_matches_its_py_twin(chapter):
    notebook = chapter.with_suffix(".ipynb")
    assert notebook.exists(), f"{notebook.name} is missing: run `make sync`"
    assert cell_texts(read_chapter(notebook)) == cell_texts(read_chapter(chapter)), (
        f"{notebook.name} differs from {chapter.name} in code or markdown: run `make sync`")


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda c: c.stem)
def test_committed_outputs_come_from_a_cpu_run(chapter):
    notebook = nbformat.read(chapter.with_suffix(".ipynb"), as_version=4)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert all(cell.execution_count for cell in code), "every cell executed: `make notebooks`"
    printed = "".join(out.get("text", "") for cell in code for out in cell.outputs)
    assert re.search(r"^size: cpu\b", printed, re.M), "outputs must be from a cpu-size run"


def test_colab_cells_and_readme_table_follow_the_slug():
    assert sync.stale_files(ROOT) == {}, "run `make sync`"
    readme = (ROOT / "README.md").read_text()
    for chapter in CHAPTERS:
        assert f"blob/main/chapters/{chapter.stem}.ipynb" in readme


def _exercise_count(chapter) -> int:
    return len(re.findall(r"^# \*\*Exercise \d+\.\d+ ", chapter.read_text(), re.M))


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda c: c.stem)
def test_each_chapter_follows_the_template(chapter):
    text = chapter.read_text()
    assert "# ## What we built" in text
    assert _exercise_count(chapter) >= 3, "each chapter ends with at least 3 exercises"
    assert "SIZES = {" in text and "pick_size(SIZES)" in text


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda c: c.stem)
def test_every_coding_exercise_has_a_check_after_it(chapter):
    cells = read_chapter(chapter).cells
    for index, cell in enumerate(cells):
        if cell.cell_type == "code" and student.SOLUTION[0] in cell.source:
            following = cells[index + 1].source if index + 1 < len(cells) else ""
            assert re.search(r"check_\w+\(", following), (
                f"the solution in cell {index} of {chapter.name} has no check cell after it")
