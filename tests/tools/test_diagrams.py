"""The chapters' diagrams: each drawn by tools/authoring/diagrams.py, each shown by a chapter."""

from __future__ import annotations

from tools.authoring import diagrams
from tools.chapters import ROOT, chapter_sources, diagram_names


def references() -> dict[str, list[str]]:
    """Diagram name -> the chapters that show it."""
    shown: dict[str, list[str]] = {}
    for chapter in chapter_sources(ROOT):
        for name in diagram_names(chapter.read_text(encoding="utf-8")):
            shown.setdefault(name, []).append(chapter.stem)
    return shown


def test_every_diagram_is_drawn_committed_and_shown():
    committed = {path.stem for path in diagrams.FIGURES.glob("*.svg")}
    assert committed == set(diagrams.DIAGRAMS), "run `make diagrams` and commit the result"
    assert set(references()) == set(diagrams.DIAGRAMS), "a diagram no chapter shows, or the reverse"


def test_chapters_01_to_08_each_show_a_diagram_and_the_book_has_ten():
    chapters_with_one = {stem[:2] for stems in references().values() for stem in stems}
    assert {f"{n:02d}" for n in range(1, 9)} <= chapters_with_one
    assert len(diagrams.DIAGRAMS) >= 10


def test_a_diagram_redraws_to_a_valid_svg(tmp_path):
    path = diagrams.draw("masking", tmp_path)
    text = path.read_text()
    assert text.lstrip().startswith("<?xml") and "<svg" in text and text.rstrip().endswith("</svg>")
    # text is drawn as paths: the picture does not depend on the reader's fonts
    assert "<text" not in text
