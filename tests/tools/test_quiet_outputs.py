"""Saved outputs are quiet: a progress bar saved as the reader saw it, one line."""

import nbformat

from tools.authoring.outputs import quiet_outputs, resolved
from tools.chapters import ROOT, chapter_sources


def test_a_carriage_return_overwrites_its_line_as_jupyter_shows_it():
    assert resolved("10%\r50%\r100%\r\ndone\n") == "100%\ndone\n"
    assert resolved("a\rb") == "b"
    assert resolved("plain\ntext\n") == "plain\ntext\n"


def test_a_cells_stream_updates_become_one_output_and_other_outputs_stay():
    cell = nbformat.v4.new_code_cell("train()")
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="training:  0%\r"),
                    nbformat.v4.new_output("stream", name="stdout", text="training: 100%\n"),
                    nbformat.v4.new_output("stream", name="stderr", text="warning\n"),
                    nbformat.v4.new_output("display_data", data={"text/plain": "<Figure>"})]
    notebook = nbformat.v4.new_notebook(cells=[cell])
    assert quiet_outputs(notebook)
    assert [o.get("text") for o in cell.outputs] == ["training: 100%\n", "warning\n", None]
    assert not quiet_outputs(notebook)  # a second pass finds nothing to do


def test_the_committed_notebooks_hold_no_progress_bar_updates():
    for chapter in chapter_sources(ROOT):
        notebook = nbformat.read(chapter.with_suffix(".ipynb"), as_version=4)
        assert not quiet_outputs(notebook), f"{chapter.name}: run `make sync`"


def test_no_committed_notebook_saves_stderr():
    """A warning saved under a cell reads as something gone wrong; fix its source instead."""
    for chapter in chapter_sources(ROOT):
        notebook = nbformat.read(chapter.with_suffix(".ipynb"), as_version=4)
        saved = [output.text for cell in notebook.cells if cell.cell_type == "code"
                 for output in cell.outputs if output.get("name") == "stderr"]
        assert not saved, f"{chapter.name} saved stderr: {saved[0][:200]}"
