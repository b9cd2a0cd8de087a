"""Where the chapters keep their training runs: one folder per run, replaced by a re-run.

Runs used to go to fresh folders in the system temp dir, and nothing removed them when a
kernel was killed (as test runners do): chapters 06 and 07 left 11-15 MB there per run.
Now a chapter names its runs, and running it again replaces them.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

__all__ = ["RUNS_VARIABLE", "run_folder"]

RUNS_VARIABLE = "BERT_BOOK_RUNS"


def run_folder(name: str) -> Path:
    """An empty folder for the run `name`, under $BERT_BOOK_RUNS (default: `runs` in the
    working folder, which git ignores). Any previous run of that name is deleted first."""
    if not name or Path(name).name != name:
        raise ValueError(f"a run's name is one folder name, not {name!r}")
    folder = Path(os.environ.get(RUNS_VARIABLE, "runs")) / name
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    return folder
