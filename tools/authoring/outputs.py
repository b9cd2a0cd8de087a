"""Saved outputs as a reader saw them: one progress bar line, not hundreds.

A training loop's progress bar rewrites its line with a carriage return; Jupyter shows only
the last state, but a notebook executed by nbclient saves every update as its own stream
output (chapter 08 saved 80 of them). `quiet_outputs` merges each cell's consecutive
stream outputs and applies the carriage returns as Jupyter's front end does, so the saved
notebook shows what the live one showed, and nothing else changes.
"""

from __future__ import annotations

import re

import nbformat


def resolved(text: str) -> str:
    """`text` as a terminal or Jupyter shows it: what a carriage return overwrote is gone."""
    text = re.sub(r"\r+\n", "\n", text)
    return re.sub(r"^[^\n]*\r", "", text, flags=re.M)


def quiet_outputs(notebook: nbformat.NotebookNode) -> bool:
    """Merge consecutive stream outputs of a cell and resolve carriage returns, in place.
    Returns whether anything changed."""
    changed = False
    for cell in notebook.cells:
        if cell.cell_type != "code":
            continue
        merged: list = []
        for output in cell.outputs:
            previous = merged[-1] if merged else None
            if (output.output_type == "stream" and previous is not None
                    and previous.output_type == "stream" and previous.name == output.name):
                previous.text += output.text
                changed = True
            else:
                merged.append(output)
        for output in merged:
            if output.output_type == "stream" and "\r" in output.text:
                output.text = resolved(output.text)
                changed = True
        cell.outputs = [o for o in merged if o.output_type != "stream" or o.text]
    return changed
