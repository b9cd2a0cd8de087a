"""Render the HTML book with Jupyter Book 1 from the committed notebooks (about a minute),
or, with --execute, from a fresh run of every chapter.

By default the book shows what the committed notebooks hold: the outputs of a `cpu` run,
the results readers should see. With --execute each chapter is read from its .py source,
executed in a fresh kernel (at $BERT_BOOK_SIZE, else the default size of this machine) and
written under _build/book-src/chapters/; the committed notebooks are never touched. An
unknown size is refused before anything runs or is deleted. Jupyter Book 1 (Sphinx)
renders offline; version 2 would download its theme, which fails offline.

    python tools/authoring/build_book.py             # the committed notebooks
    python tools/authoring/build_book.py --execute   # every chapter run first (an hour at cpu)
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import nbformat
import yaml
from nbclient import NotebookClient

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bertbook.sizes import BookSizeError, book_size
from tools.chapters import ROOT, book_settings, chapter_sources, read_chapter
from tools.grading.exercises import HIDDEN, SOLUTION, exercise_cells, without_markers

BUILD = ROOT / "_build"
SOURCE = BUILD / "book-src"
CELL_TIMEOUT_S = 1800
# Output lines of up to 100 characters (the book's line length) fit without a scroll bar.
BOOK_CSS = """\
.cell_output pre, .cell_input pre { font-size: 0.8rem; }
.cell_output pre { white-space: pre-wrap; overflow-wrap: anywhere; }
"""


def solution_toggle(cell: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """A solution as a collapsed "Solution" box (markdown), markers removed."""
    body = without_markers(cell.source, SOLUTION, keep_inside=True).strip("\n")
    if cell.cell_type == "code":
        body = f"```python\n{body}\n```"
    return nbformat.v4.new_markdown_cell(f"````{{admonition}} Solution\n:class: dropdown\n\n"
                                         f"{body}\n````")


def for_readers(notebook: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """The notebook as the published book shows it.

    Solutions are folded into collapsed boxes: a reader working alone can check an answer
    without reading it by accident, and the markers no longer render as headings (the
    chapters and their solutions are public anyway; instructors hand out `make student`'s
    copies). Hidden tests are grading machinery, not reading, and are left out; they print
    nothing, so no output changes.
    """
    for item in exercise_cells(notebook):
        cell = notebook.cells[item.index]
        if item.role in ("answer", "written"):
            notebook.cells[item.index] = solution_toggle(cell)
        elif item.role == "tests":
            cell.source = without_markers(cell.source, HIDDEN, keep_inside=False).strip("\n")
    return notebook


def execute_chapter(chapter: Path, target: Path) -> float:
    """Run one chapter in a fresh kernel from the chapters/ folder; return seconds taken."""
    notebook = read_chapter(chapter)
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                       "language": "python"}
    started = time.perf_counter()
    code_cells = sum(cell.cell_type == "code" for cell in notebook.cells)
    done = iter(range(1, code_cells + 1))

    def show_progress(**_) -> None:
        print(f"\r  {chapter.stem}: cell {next(done)}/{code_cells}, "
              f"{time.perf_counter() - started:5.0f} s", end="", flush=True)

    # The kernel process's own output (its start-up warnings, the profiler's USDT lines)
    # goes to a log file beside the notebook, not into the build log; what cells print goes
    # into the notebook as always.
    client = NotebookClient(notebook, timeout=CELL_TIMEOUT_S, kernel_name="python3",
                            extra_arguments=["--IPKernelApp.log_level=ERROR"],
                            on_cell_executed=show_progress,
                            resources={"metadata": {"path": str(chapter.parent)}})
    try:
        with open(target.with_suffix(".kernel.log"), "w") as kernel_log:
            client.execute(stdout=kernel_log, stderr=kernel_log)
    finally:
        print(flush=True)
        nbformat.write(notebook, target)  # even a failed run leaves its outputs to read
    return time.perf_counter() - started


def last_run_minutes(chapter: Path) -> float | None:
    """Minutes the committed notebook's run took, from the timing nbclient records per cell."""
    cells = json.loads(chapter.with_suffix(".ipynb").read_text(encoding="utf-8"))["cells"]
    times = [cell.get("metadata", {}).get("execution", {}) for cell in cells
             if cell["cell_type"] == "code"]
    starts = [t["iopub.execute_input"] for t in times if "iopub.execute_input" in t]
    ends = [t["shell.execute_reply"] for t in times if "shell.execute_reply" in t]
    if not starts or not ends:
        return None
    return (_moment(max(ends)) - _moment(min(starts))).total_seconds() / 60


def _moment(stamp: str) -> datetime:
    """A Jupyter timestamp ('2026-12-02T15:56:25.120072Z') as a datetime."""
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


MATHJAX_VERSION = "3.2.2"
MATHJAX = ROOT / "_build" / "vendor" / "node_modules" / "mathjax" / "es5"


def print_expected_times(chapters: list[Path]) -> None:
    minutes = {chapter.stem: last_run_minutes(chapter) for chapter in chapters}
    for name, value in minutes.items():
        print(f"  {name:<22} {'unknown' if value is None else f'{value:5.1f} min'}")
    known = [value for value in minutes.values() if value is not None]
    print(f"  {'total':<22} {sum(known):5.1f} min at the `cpu` size on the machine that made "
          "the committed notebooks (smoke: a few minutes; gpu: see each chapter)", flush=True)


def copy_mathjax(target: Path) -> None:
    """MathJax served with the book, so its equations render offline (a classroom, the
    browser check) and not as raw TeX: the TeX-to-HTML build, its fonts and extensions,
    from the npm registry's package (`make book` installs it)."""
    if not (MATHJAX / "tex-chtml.js").is_file():
        raise SystemExit(f"MathJax is not in {MATHJAX}: run `npm install --prefix _build/vendor "
                         f"mathjax@{MATHJAX_VERSION}` (make book and make check-html do)")
    shutil.copytree(MATHJAX, target, dirs_exist_ok=True, ignore=shutil.ignore_patterns(
        "sre", "*svg*", "*full*", "mml-*", "tex-mml-*", "node-main.js", "latest.js"))


def write_book_config(chapters: list[Path]) -> None:
    settings = book_settings()
    config = {
        "title": "BERT End to End",
        "author": "The BERT End to End authors",
        "execute": {"execute_notebooks": "off"},
        "repository": {"url": f"https://github.com/{settings['repository']}",
                       "branch": settings["branch"], "path_to_book": ""},
        "launch_buttons": {"colab_url": "https://colab.research.google.com",
                           "notebook_interface": "classic"},
        "html": {"use_repository_button": True},
        "sphinx": {"config": {"html_show_copyright": False, "html_static_path": ["_static"],
                              "nb_render_markdown_format": "myst",
                              "html_css_files": ["book.css"],
                              "mathjax_path": "mathjax/tex-chtml.js"}},
    }
    toc = {"format": "jb-book", "root": "intro",
           "chapters": [{"file": f"chapters/{c.stem}"} for c in chapters]
           + [{"file": "references"}]}
    (SOURCE / "_config.yml").write_text(yaml.safe_dump(config, sort_keys=False))
    (SOURCE / "_toc.yml").write_text(yaml.safe_dump(toc, sort_keys=False))
    for page in ("intro.md", "references.md"):
        shutil.copy(ROOT / "book" / page, SOURCE / page)
    (SOURCE / "_static").mkdir(exist_ok=True)
    (SOURCE / "_static" / "book.css").write_text(BOOK_CSS)
    copy_mathjax(SOURCE / "_static" / "mathjax")
    # The chapters show their diagrams by paths relative to themselves (figures/NAME.svg).
    shutil.copytree(ROOT / "chapters" / "figures", SOURCE / "chapters" / "figures",
                    dirs_exist_ok=True)


def execute_all(chapters: list[Path]) -> int:
    """Run every chapter into SOURCE, with progress; 0, or 1 at the first failure."""
    print(f"executing {len(chapters)} chapters at size {book_size()!r}; their last run took:")
    print_expected_times(chapters)
    for number, chapter in enumerate(chapters, start=1):
        print(f"[{number}/{len(chapters)}] {chapter.stem}", flush=True)
        target = SOURCE / "chapters" / chapter.with_suffix(".ipynb").name
        try:
            seconds = execute_chapter(chapter, target)
        except Exception as error:  # report which chapter failed, keep its partial output
            print(f"FAILED\n{chapter.name} stopped with: {error}\n"
                  f"its partial output is in {target}", file=sys.stderr)
            return 1
        print(f"  done in {seconds:.0f} s", flush=True)
        nbformat.write(for_readers(nbformat.read(target, as_version=4)), target)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--execute", action="store_true",
                        help="run every chapter at $BERT_BOOK_SIZE instead of rendering the "
                             "committed notebooks")
    args = parser.parse_args(argv)
    chapters = chapter_sources()
    try:
        book_size()  # an unknown size stops here, before the last build is deleted
    except BookSizeError as error:
        print(f"build_book: {error}", file=sys.stderr)
        return 2
    if SOURCE.exists():
        shutil.rmtree(SOURCE)
    (SOURCE / "chapters").mkdir(parents=True)
    if args.execute:
        if execute_all(chapters):
            return 1
    else:
        for chapter in chapters:
            notebook = nbformat.read(chapter.with_suffix(".ipynb"), as_version=4)
            nbformat.write(for_readers(notebook), SOURCE / "chapters" / f"{chapter.stem}.ipynb")
        print(f"rendering the {len(chapters)} committed notebooks (outputs of a cpu run)")
    write_book_config(chapters)
    print("rendering the HTML book with Jupyter Book 1 ...", flush=True)
    jupyter_book = Path(sys.executable).parent / "jupyter-book"
    work = BUILD / "jupyter-book"
    result = subprocess.run([str(jupyter_book), "build", str(SOURCE), "--path-output",
                             str(work), "--quiet"], capture_output=True, text=True)
    if result.returncode != 0:
        print(result.stdout, result.stderr, sep="\n", file=sys.stderr)
        return result.returncode
    index = work / "_build" / "html" / "index.html"
    html = BUILD / "html"
    if html.exists():
        shutil.rmtree(html)
    shutil.move(str(index.parent), html)
    print(f"the book is at {html / 'index.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
