"""Open the built book in a real browser (headless Chromium) and check what readers see.

For every chapter page: its title, as many figures as its notebook made plots, its drawn
diagrams (served from the site), its tables, its solutions and collapsed code cells folded
away (each a closed <details> holding its code), no grading markers, a launch link to Colab
and — where the chapter shows bertviz — that the attention view really drew its lines. bertviz loads
require.js, d3 and jquery from a CDN; offline, this check serves local copies installed
from the npm registry instead (`--vendor`), on a copy of the book, so the published pages
keep their CDN links. A screenshot of the attention chapter is saved under _build/.

    python tools/authoring/check_html.py [--html _build/html] [--vendor _build/vendor/node_modules]
"""

from __future__ import annotations

import argparse
import functools
import http.server
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import nbformat

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tools.authoring.reading_path import is_collapsed
from tools.authoring.sync import chapter_title
from tools.chapters import ROOT, chapter_sources, diagram_names

CDN = "https://cdnjs.cloudflare.com/ajax/libs/"
LOCAL_COPIES = {  # CDN path (as bertviz writes it) -> file in node_modules
    "require.js/2.3.6/require.min.js": "requirejs/require.js",
    "d3/5.7.0/d3.min": "d3/dist/d3.min",
    "jquery/2.0.0/jquery.min": "jquery/dist/jquery.min",
}
EQUATION = re.compile(r"\$\$|\\\[|(?<![\\$])\$[^$\n]+\$")  # $$...$$, \[...\], $...$
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync"]


def offline_copy(html: Path, vendor: Path, target: Path) -> None:
    """Copy the book and point bertviz's CDN links at local copies of the same libraries."""
    shutil.copytree(html, target)
    local = target / "_static" / "vendor"
    for source in LOCAL_COPIES.values():
        suffix = "" if source.endswith(".js") else ".js"
        file = vendor / f"{source}{suffix}"
        if not file.is_file():
            raise SystemExit(f"missing {file}: run `npm install --prefix _build/vendor "
                             "requirejs@2.3.6 d3@5.7.0 jquery@2.2.4` (make check-html does)")
        (local / Path(source).parent).mkdir(parents=True, exist_ok=True)
        shutil.copy(file, local / f"{source}{suffix}")
    for page in target.rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        if CDN not in text:
            continue
        up = "../" * (len(page.relative_to(target).parts) - 1)
        for cdn_path, source in LOCAL_COPIES.items():
            text = text.replace(CDN + cdn_path, f"{up}_static/vendor/{source}")
        page.write_text(text, encoding="utf-8")


def serve(folder: Path) -> tuple[http.server.ThreadingHTTPServer, str]:
    handler = functools.partial(QuietHandler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


def chromium(url: str, *extra: str, timeout: int = 90) -> str:
    """Run headless Chromium on a page; return what it printed (the DOM with --dump-dom)."""
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    if binary is None:
        raise SystemExit("Chromium is not installed: apt-get install -y chromium")
    with tempfile.TemporaryDirectory() as profile:
        result = subprocess.run([binary, *CHROMIUM_FLAGS, f"--user-data-dir={profile}",
                                 "--virtual-time-budget=8000", *extra, url],
                                capture_output=True, text=True, timeout=timeout)
    return result.stdout


def expectations(chapter: Path, executed: Path) -> dict:
    """What the page must show, read from the executed notebook the page was built from."""
    notebook = nbformat.read(executed, as_version=4)
    outputs = [o for c in notebook.cells if c.cell_type == "code" for o in c.outputs]
    markdown = "\n".join(c.source for c in notebook.cells if c.cell_type == "markdown")
    return {
        "title": chapter_title(chapter).split("·", 1)[-1].strip(),
        "figures": sum("image/png" in o.get("data", {}) for o in outputs),
        "tables": len(re.findall(r"^\|[-| ]+\|$", markdown, re.M)),
        "solutions": sum(c.source.startswith("````{admonition} Solution")
                         for c in notebook.cells if c.cell_type == "markdown"),
        "bertviz": any("bertviz" in str(o.get("data", {}).get("text/html", ""))
                       or "require.config" in str(o.get("data", {})) for o in outputs),
        "diagrams": [f"{name}.svg" for name in diagram_names(markdown)],
        "collapsed": sum(c.cell_type == "code" and is_collapsed(c) for c in notebook.cells),
        "equations": bool(EQUATION.search(markdown)),
    }


def check_page(dom: str, expected: dict) -> list[str]:
    problems = []
    headings = " ".join(re.findall(r"<h1[^>]*>(.*?)</h1>", dom, re.S))
    if expected["title"] not in re.sub(r"<[^>]+>", "", headings):
        problems.append(f"title {expected['title']!r} not in the page's <h1>")
    images = len(re.findall(r"<img [^>]*src=\"[^\"]*_images/[^\"]*\.png\"", dom))
    if images < expected["figures"]:
        problems.append(f"{images} figures shown, the notebook made {expected['figures']}")
    tables = dom.count("<table")
    if tables < expected["tables"]:
        problems.append(f"{tables} tables shown, the chapter has {expected['tables']}")
    if "colab.research.google.com/github/" not in dom:
        problems.append("no launch link to Colab")
    text = re.sub(r"<[^>]+>", " ", dom)
    for machinery in ("BEGIN SOLUTION", "HIDDEN TESTS", "NBVAL_"):
        if machinery in text:
            problems.append(f"{machinery!r} shows on the page")
    toggles = len(re.findall(r'class="(?=[^"]*\badmonition\b)(?=[^"]*\bdropdown\b)[^"]*"', dom))
    if toggles < expected["solutions"]:
        problems.append(f"{toggles} collapsed solutions, the chapter has {expected['solutions']}")
    if "_static/book.css" not in dom:
        problems.append("the book's style sheet (output lines that fit) is not linked")
    if expected["equations"] and "<mjx-container" not in dom:
        problems.append("the equations are not rendered (MathJax did not run)")
    if expected["bertviz"] and dom.count("<line") == 0:
        problems.append("the bertviz view drew no lines")
    for diagram in expected["diagrams"]:
        if f'src="../_images/{diagram}"' not in dom:
            problems.append(f"the diagram {diagram} is not on the page")
    # Jupyter Book shows a hide-input cell as a closed <details> that opens on a click.
    collapsed = re.findall(r'<details class="[^"]*\bhide\b[^"]*\babove-input\b[^"]*">'
                           r'(.*?)</details>', dom, re.S)
    if sum("<pre" in inside for inside in collapsed) < expected["collapsed"]:
        problems.append(f"{len(collapsed)} collapsed code cells, the chapter has "
                        f"{expected['collapsed']}")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--html", type=Path, default=ROOT / "_build" / "html")
    parser.add_argument("--vendor", type=Path, default=ROOT / "_build" / "vendor" / "node_modules")
    args = parser.parse_args(argv)
    if not (args.html / "index.html").is_file():
        raise SystemExit(f"no book at {args.html}: run `BERT_BOOK_SIZE=smoke make book` first")
    failures = 0
    with tempfile.TemporaryDirectory() as work:
        site = Path(work) / "site"
        offline_copy(args.html, args.vendor, site)
        server, base = serve(site)
        try:
            for chapter in chapter_sources():
                executed = ROOT / "_build" / "book-src" / "chapters" / f"{chapter.stem}.ipynb"
                expected = expectations(chapter, executed)
                dom = chromium(f"{base}/chapters/{chapter.stem}.html", "--dump-dom")
                problems = check_page(dom, expected) + [
                    f"the diagram {name} is missing from the site"
                    for name in expected["diagrams"] if not (site / "_images" / name).is_file()]
                lines = dom.count("<line")
                status = "ok" if not problems else "FAILED: " + "; ".join(problems)
                print(f"{chapter.stem}: {expected['figures']} figures, {expected['tables']} "
                      f"tables, {lines} svg lines — {status}")
                failures += bool(problems)
            index = chromium(f"{base}/index.html", "--dump-dom")
            if "References" not in index:
                print("index.html: no link to the references page")
                failures += 1
            shot = ROOT / "_build" / "screenshot-03_attention.png"
            chromium(f"{base}/chapters/03_attention.html", f"--screenshot={shot}",
                     "--window-size=1200,1400")
            print(f"screenshot: {shot} ({'saved' if shot.is_file() else 'MISSING'})")
            failures += not shot.is_file()
        finally:
            server.shutdown()
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
