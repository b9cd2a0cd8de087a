"""The chapters as files: twins in sync, outputs committed, the template followed."""

import re

import nbformat
import pytest

from tools.authoring import sync
from tools.chapters import ROOT, cell_texts, chapter_sources, read_chapter
from tools.grading import exercises

CHAPTERS = chapter_sources(ROOT)


def test_there_are_chapters():
    assert [c.stem[:2] for c in CHAPTERS][:2] == ["00", "01"]


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda c: c.stem)
def test_notebook_matches_its_py_twin(chapter):
    notebook = chapter.with_suffix(".ipynb")
    assert notebook.exists(), f"{notebook.name} is missing: run `make sync`"
    assert cell_texts(read_chapter(notebook)) == cell_texts(read_chapter(chapter)), (
        f"{notebook.name} differs from {chapter.name} in code or markdown: run `make sync`")
    assert _graded_metadata(read_chapter(notebook)) == _graded_metadata(read_chapter(chapter)), (
        f"{notebook.name} and {chapter.name} differ in nbgrader metadata or tags: `make sync`")


def _graded_metadata(notebook) -> list:
    return [(cell.metadata.get("nbgrader"), cell.metadata.get("tags")) for cell in notebook.cells]


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda c: c.stem)
def test_nbval_reads_cell_tags_not_comments(chapter):
    """A reader sees code, not test markers: nbval's instructions are cell tags."""
    assert not re.search(r"^# ?NBVAL_", chapter.read_text(), re.M)


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
    # Chapter 06's sizes are also the presets of its command line, so they are imported
    # from the book's package; every other chapter writes its table in its set-up cell.
    assert re.search(r"^SIZES = \{|^from bertbook\.\S+ import .*\bSIZES\b", text, re.M)
    assert "pick_size(SIZES)" in text


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda c: c.stem)
def test_every_coding_exercise_has_a_check_after_it(chapter):
    cells = read_chapter(chapter).cells
    for index, cell in enumerate(cells):
        if cell.cell_type == "code" and exercises.SOLUTION[0] in cell.source:
            following = cells[index + 1].source if index + 1 < len(cells) else ""
            assert re.search(r"check_\w+\(", following), (
                f"the solution in cell {index} of {chapter.name} has no check cell after it")


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda c: c.stem)
def test_chapters_leave_nothing_in_the_temp_folder(chapter):
    """Training runs go to bertbook.runs.run_folder, which a re-run replaces; temporary
    folders only as `with` blocks. A bare mkdtemp left 11-15 MB behind per run of chapters
    06 and 07, and a TemporaryDirectory kept open is not removed when the kernel is killed."""
    text = chapter.read_text()
    assert "mkdtemp(" not in text
    assert "= tempfile.TemporaryDirectory(" not in text


def test_a_new_jupytext_release_alone_leaves_the_chapters_up_to_date():
    chapter = CHAPTERS[0].read_text()
    stamped = re.sub(r"jupytext_version: \S+", "jupytext_version: 0.0.1", chapter)
    assert sync.with_nbgrader_metadata(stamped) == stamped


def test_the_instructors_table_lists_every_exercise_in_order():
    """INSTRUCTORS.md's table is what a course plans from: an exercise added, dropped or
    renumbered in a chapter must show there too."""
    listed = re.findall(r"^\| (\d+\.\d+) ", (ROOT / "INSTRUCTORS.md").read_text(), re.M)
    in_chapters = [number for chapter in CHAPTERS
                   for number in exercises.exercise_numbers(read_chapter(chapter))]
    assert listed == in_chapters


@pytest.mark.parametrize("chapter", CHAPTERS[1:], ids=lambda c: c.stem)
def test_each_chapter_ends_with_8_to_15_recall_questions_each_answered(chapter):
    """Issue 26: recall questions close chapters 01-11, with the answers (numbered as the
    questions) in the instructor's copy only, inside the solution markers."""
    cells = read_chapter(chapter).cells
    statement, answer = cells[-2].source, cells[-1].source
    assert re.match(r"\*\*Exercise \d+\.\d+ — recall\.\*\*", statement)
    questions = re.findall(r"^(\d+)\. ", statement, re.M)
    assert 8 <= len(questions) <= 15
    assert answer.startswith(exercises.SOLUTION[0]) and answer.endswith(exercises.SOLUTION[1])
    assert re.findall(r"^(\d+)\. ", answer, re.M) == questions
