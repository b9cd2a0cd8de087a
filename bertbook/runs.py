"""Where the chapters keep their training runs, and how a run survives a Colab disconnect.

By default runs go to `runs/` in the working folder (git ignores it), one folder per run, and
running a chapter again replaces its runs: a re-run on a laptop starts clean.

On Colab a disconnect loses the runtime's disk, so a chapter offers Google Drive
(`use_drive`): runs and the text cache then live in a Drive folder, and the runs folder
becomes *persistent*: a chapter that finds its run there resumes it instead of starting
again. Any folder named in $BERT_BOOK_RUNS is persistent in the same way.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from importlib.resources import files
from pathlib import Path

__all__ = ["RUNS_VARIABLE", "CACHE_VARIABLE", "DRIVE_FOLDER", "runs_root", "run_folder",
           "has_checkpoint", "finished_run", "shipped_run", "shipped_results", "use_drive"]

RUNS_VARIABLE = "BERT_BOOK_RUNS"
CACHE_VARIABLE = "BERTLIB_CACHE"  # bertbook.corpora keeps derived text there
DRIVE_FOLDER = "/content/drive/MyDrive/bert-end-to-end"


def runs_root() -> tuple[Path, bool]:
    """The folder runs live in, and whether it is persistent (named in $BERT_BOOK_RUNS)."""
    chosen = os.environ.get(RUNS_VARIABLE)
    return (Path(chosen), True) if chosen else (Path("runs"), False)


def run_folder(name: str) -> Path:
    """The folder of the run `name`. In the default runs/ any previous run of that name is
    deleted first; in a persistent folder it is kept, for the chapter to resume."""
    if not name or Path(name).name != name:
        raise ValueError(f"a run's name is one folder name, not {name!r}")
    root, persistent = runs_root()
    folder = root / name
    if folder.exists() and not persistent:
        shutil.rmtree(folder)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def has_checkpoint(folder: Path) -> bool:
    """True when `folder` holds a run's checkpoint, so training can resume from it."""
    return (Path(folder) / "checkpoint.pt").is_file()


def finished_run(name: str) -> Path | None:
    """The model folder of the run `name` if that run finished (its model is written only
    at the end), else None. Never deletes anything: another chapter may reuse the run."""
    model = runs_root()[0] / name / "model"
    return model if (model / "config.json").is_file() else None


def use_drive(wanted: bool = True, folder: str = DRIVE_FOLDER) -> Path | None:
    """On Colab, if `wanted`: mount Google Drive (Colab asks for permission) and keep runs
    and the text cache in `folder` there, so a disconnect loses nothing and the chapter
    resumes its run. Elsewhere, or not wanted: change nothing and return None."""
    if not wanted or "google.colab" not in sys.modules:
        return None
    from google.colab import drive  # only importable on Colab

    drive.mount("/content/drive")
    root = Path(folder)
    for variable, sub in ((RUNS_VARIABLE, "runs"), (CACHE_VARIABLE, "cache")):
        (root / sub).mkdir(parents=True, exist_ok=True)
        os.environ[variable] = str(root / sub)
    print(f"runs and the text cache are kept on Drive, in {root}; a run found there resumes")
    return root


def shipped_results(name: str) -> dict:
    """The results a benchmark script measured and the book ships (bertbook/resources/
    <name>.json): what a chapter shows when the measurement takes longer than the chapter."""
    return json.loads(files("bertbook").joinpath("resources", f"{name}.json")
                      .read_text(encoding="utf-8"))


def shipped_run(name: str, recipe: dict) -> Path | None:
    """The model folder of the book's copy of the run `name` (bertbook/resources/<name>),
    if the book ships one made with `recipe` (a PretrainingRun's description). A copy from
    another recipe is never used: it would not be the model the chapter describes."""
    folder = Path(str(files("bertbook").joinpath("resources", name)))
    if not (folder / "run.json").is_file():
        return None
    shipped = json.loads((folder / "run.json").read_text(encoding="utf-8"))
    return folder if shipped == json.loads(json.dumps(recipe)) else None  # tuples as lists
