"""Code is read by learners: the library, tools, tests and chapter sources lint clean."""

import subprocess
import sys

from tools.chapters import ROOT, chapter_sources


def test_ruff_is_clean():
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "."], cwd=ROOT,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_chapter_lines_fit_the_page():
    """Ruff's line limit, except on cell markers (`# %% nbgrader={...}`), which jupytext
    writes on one line."""
    limit = 100
    long_lines = [f"{chapter.name}:{number}"
                  for chapter in chapter_sources(ROOT)
                  for number, line in enumerate(chapter.read_text().splitlines(), start=1)
                  if len(line) > limit and not line.startswith("# %%")]
    assert not long_lines, f"lines over {limit} characters: {long_lines}"
