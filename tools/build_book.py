"""Execute every chapter into _build/ and render the HTML book with Jupyter Book 1.

The committed notebooks are never touched: each chapter is read from its .py source,
executed in a fresh kernel (at $BERT_BOOK_SIZE, else the default size of this machine)
and written under _build/book-src/chapters/. Jupyter Book 1 (Sphinx) then renders those
already-executed notebooks; version 2 would download its theme, which fails offline.

    python tools/build_book.py
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import yaml
from nbclient import NotebookClient

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tools.chapters import ROOT, book_settings, chapter_sources, read_chapter

BUILD = ROOT / "_build"
SOURCE = BUILD / "book-src"
CELL_TIMEOUT_S = 1800


def execute_chapter(chapter: Path, target: Path) -> float:
    """Run one chapter in a fresh kernel from the chapters/ folder; return seconds taken."""
    notebook = read_chapter(chapter)
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                       "language": "python"}
    started = time.perf_counter()
    client = NotebookClient(notebook, timeout=CELL_TIMEOUT_S, kernel_name="python3",
                            resources={"metadata": {"path": str(chapter.parent)}})
    try:
        client.execute()
    finally:
        nbformat.write(notebook, target)  # even a failed run leaves its outputs to read
    return time.perf_counter() - started


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
        "sphinx": {"config": {"html_show_copyright": False}},
    }
    toc = {"format": "jb-book", "root": "intro",
           "chapters": [{"file": f"chapters/{c.stem}"} for c in chapters]
           + [{"file": "references"}]}
    (SOURCE / "_config.yml").write_text(yaml.safe_dump(config, sort_keys=False))
    (SOURCE / "_toc.yml").write_text(yaml.safe_dump(toc, sort_keys=False))
    for page in ("intro.md", "references.md"):
        shutil.copy(ROOT / "book" / page, SOURCE / page)


def main() -> int:
    chapters = chapter_sources()
    size = os.environ.get("BERT_BOOK_SIZE") or "the default for this machine"
    if SOURCE.exists():
        shutil.rmtree(SOURCE)
    (SOURCE / "chapters").mkdir(parents=True)
    print(f"executing {len(chapters)} chapters at size: {size}", flush=True)
    for number, chapter in enumerate(chapters, start=1):
        print(f"[{number}/{len(chapters)}] {chapter.stem} ...", end=" ", flush=True)
        target = SOURCE / "chapters" / chapter.with_suffix(".ipynb").name
        try:
            seconds = execute_chapter(chapter, target)
        except Exception as error:  # report which chapter failed, keep its partial output
            print(f"FAILED\n{chapter.name} stopped with: {error}\n"
                  f"its partial output is in {target}", file=sys.stderr)
            return 1
        print(f"done in {seconds:.0f} s", flush=True)
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
