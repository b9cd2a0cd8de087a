"""Every chapter runs as a plain script, `python chapters/NN_name.py`, with no Jupyter: the
GPU machine `make gpu-check` runs them on has no Jupyter, no IPython and no bertviz.

Running all twelve takes minutes (`tools/gpu_check.py --dry-run` runs them; CI runs one as
a script there and every one in a kernel under nbval), so this test reads the code instead:
nothing in a chapter's code cells may need a notebook kernel. Displays that want one go
through bertbook.views, which draws a static figure and adds the interactive view only in
a notebook.
"""

import re

import pytest

from tools.chapters import ROOT, cell_texts, chapter_sources, read_chapter

# What only a notebook kernel has: IPython's display machinery, bertviz (whose views are
# JavaScript for a notebook page), and line or cell magics (`%time`, `!pip`).
KERNEL_ONLY = [
    (re.compile(r"^\s*(from|import)\s+(IPython|bertviz)\b", re.M), "imports IPython or bertviz"),
    (re.compile(r"\bget_ipython\(|^\s*display\(", re.M), "calls a notebook-only function"),
    (re.compile(r"^\s*[%!]", re.M), "uses a magic"),
]


@pytest.mark.parametrize("chapter", chapter_sources(ROOT), ids=lambda path: path.stem)
def test_no_chapter_cell_needs_a_notebook_kernel(chapter):
    found = [f"cell {number}: {why}"
             for number, (kind, text) in enumerate(cell_texts(read_chapter(chapter)))
             if kind == "code"
             for pattern, why in KERNEL_ONLY if pattern.search(text)]
    assert found == [], f"{chapter.name} would not run as a plain script: {found}"


def test_the_scan_finds_what_a_script_cannot_run():
    cells = ["from IPython.display import Markdown", "import bertviz", "%time f()",
             "display(x)", "!pip install x"]
    assert all(any(pattern.search(cell) for pattern, _ in KERNEL_ONLY) for cell in cells)
    assert not any(pattern.search("from bertbook.views import show_attention")
                   for pattern, _ in KERNEL_ONLY)
