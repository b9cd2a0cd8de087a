"""Write the code cells that chapters mark for export into bertlib/ modules.

A code cell whose first line is ``#| export bertlib/NAME.py`` belongs to that module.
A module is the header plus its cells, in chapter order then cell order. Modules that
no chapter exports are written by hand; the exporter refuses to overwrite them.

    python tools/export.py            # write bertlib/ from the chapters
    python tools/export.py --check    # exit 1 and list differences, write nothing
"""

from __future__ import annotations

import argparse
import re
import sys
import textwrap
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bertlib import GENERATED_PREFIX
from tools.chapters import ROOT, chapter_sources, read_chapter

EXPORT_MARK = re.compile(r"^#\|\s*export\s+(?P<module>bertlib/[\w/]+\.py)\s*$")


class ExportError(RuntimeError):
    """An export that would lose hand-written code or that names a bad target."""


def exported_cells(chapter: Path) -> list[tuple[str, str]]:
    """(module path, code without the marker line) for each export cell of a chapter."""
    cells = []
    for cell in read_chapter(chapter).cells:
        if cell.cell_type != "code":
            continue
        first, _, rest = cell.source.partition("\n")
        match = EXPORT_MARK.match(first.strip())
        if match:
            cells.append((match["module"], rest.strip("\n")))
    return cells


def render_modules(root: Path = ROOT) -> dict[str, str]:
    """Module path (relative to root) -> full text of every generated module."""
    bodies: dict[str, list[str]] = {}
    sources: dict[str, list[str]] = {}
    for chapter in chapter_sources(root):
        for module, code in exported_cells(chapter):
            bodies.setdefault(module, []).append(code)
            name = f"chapters/{chapter.name}"
            if name not in sources.setdefault(module, []):
                sources[module].append(name)
    return {
        module: _header(sources[module]) + "\n\n\n".join(cells) + "\n"
        for module, cells in bodies.items()
    }


def _header(chapters: list[str]) -> str:
    """The generated header; a long list of chapters continues on '#   ' lines."""
    lines = textwrap.wrap(f"{GENERATED_PREFIX}{', '.join(chapters)}.", width=100,
                          subsequent_indent="#   ", break_on_hyphens=False)
    lines.append("# Edit the chapter, not this file: `make test` fails when the two differ.")
    return "\n".join(lines) + "\n"


def is_generated(path: Path) -> bool:
    """True when a module file was written by this exporter (its first line says so)."""
    with open(path, encoding="utf-8") as handle:
        return handle.readline().startswith(GENERATED_PREFIX)


def generated_on_disk(package_dir: Path) -> set[str]:
    """Relative paths of the generated modules currently in a bertlib/ folder."""
    root = package_dir.parent
    return {
        str(path.relative_to(root))
        for path in package_dir.rglob("*.py")
        if is_generated(path)
    }


def write_modules(root: Path = ROOT, out_root: Path | None = None) -> list[str]:
    """Write every generated module under out_root (default: root); return their paths.

    Generated modules that no chapter exports any more are removed; a hand-written
    module in the way stops the export before anything is written.
    """
    out_root = out_root or root
    modules = render_modules(root)
    for module in modules:
        target = out_root / module
        if target.exists() and not is_generated(target):
            raise ExportError(
                f"{module} is written by hand (its first line is not the export header); "
                "rename the chapter's export target or delete that file yourself."
            )
    package_dir = out_root / "bertlib"
    stale = generated_on_disk(package_dir) - set(modules) if package_dir.exists() else set()
    for module in stale:
        (out_root / module).unlink()
    for module, text in modules.items():
        target = out_root / module
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    return sorted(modules)


def differences(root: Path = ROOT) -> list[str]:
    """What differs between bertlib/ and a fresh export, one line per module."""
    modules = render_modules(root)
    problems = []
    for module, text in modules.items():
        target = root / module
        if not target.exists():
            problems.append(f"{module}: missing (run `make export`)")
        elif target.read_text(encoding="utf-8") != text:
            problems.append(f"{module}: differs from its chapter (run `make export`)")
    for module in sorted(generated_on_disk(root / "bertlib") - set(modules)):
        problems.append(f"{module}: generated, but no chapter exports it any more")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="report differences only")
    args = parser.parse_args(argv)
    if args.check:
        problems = differences()
        print("\n".join(problems) or "bertlib/ matches the chapters")
        return 1 if problems else 0
    try:
        written = write_modules()
    except ExportError as error:
        print(f"export refused: {error}", file=sys.stderr)
        return 2
    print(f"exported {len(written)} modules: {', '.join(written)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
