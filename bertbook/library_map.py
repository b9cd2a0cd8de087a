"""The map of bertlib: each public name, the module that holds it, the chapter that builds it.

Read from the installed modules' own text (their `__all__` and the provenance line the
exporter writes before each exported cell), so the map is the library as it is, never a
list kept by hand.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path

__all__ = ["MapRow", "PROVENANCE_PREFIX", "provenance_line", "library_map", "library_table"]

PROVENANCE_PREFIX = "# From "  # the exporter writes provenance_line(); this map reads it
PROVENANCE = re.compile(rf"^\s*{PROVENANCE_PREFIX}(chapters/[\w.]+), cell \d+\.$")
HAND_WRITTEN = "written by hand"


@dataclass(frozen=True)
class MapRow:
    name: str
    module: str
    chapter: str  # "chapters/NN_name.py", or "written by hand"


def provenance_line(chapter: str, cell: int) -> str:
    """The line `make export` writes before each exported cell: where the code comes from."""
    return f"{PROVENANCE_PREFIX}{chapter}, cell {cell}."


def _package_dir(package: str) -> Path:
    spec = find_spec(package)
    return Path(next(iter(spec.submodule_search_locations)))


def _declared_names(tree: ast.Module) -> list[str]:
    for node in tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and getattr(node.targets[0], "id", None) == "__all__"):
            return list(ast.literal_eval(node.value))
    return []


def _definition_lines(tree: ast.Module) -> dict[str, int]:
    """Top-level name -> the first line of its definition (decorators included)."""
    lines = {}
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            lines[node.name] = first
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                for name in (target.elts if isinstance(target, ast.Tuple) else [target]):
                    if isinstance(name, ast.Name):
                        lines.setdefault(name.id, node.lineno)
    return lines


def _module_rows(path: Path, module: str) -> list[MapRow]:
    text = path.read_text(encoding="utf-8")
    tree = ast.parse(text)
    lines = text.splitlines()
    starts = _definition_lines(tree)
    rows = []
    for name in _declared_names(tree):
        chapter = HAND_WRITTEN
        for line in reversed(lines[:starts.get(name, 0)]):
            if match := PROVENANCE.match(line):
                chapter = match[1]
                break
        rows.append(MapRow(name, module, chapter))
    return rows


def library_map(package: str = "bertlib", root: Path | None = None) -> list[MapRow]:
    """Every name in the `__all__` of every module of a package, in file order (the
    installed package, or the one in a checkout's `root` folder)."""
    root = root / package if root is not None else _package_dir(package)
    rows = []
    for path in sorted(root.rglob("*.py")):
        if path.name == "__main__.py" or path == root / "__init__.py":
            continue
        parts = path.relative_to(root).with_suffix("").parts
        module = ".".join((package, *parts)).removesuffix(".__init__")
        rows += _module_rows(path, module)
    return rows


def library_table(package: str = "bertlib", root: Path | None = None) -> str:
    """A markdown table: chapter -> module -> public names (the README's and chapter 00's)."""
    grouped: dict[tuple[str, str], list[str]] = {}
    for row in library_map(package, root):
        grouped.setdefault((row.chapter, row.module), []).append(row.name)
    order = sorted(grouped, key=lambda key: (key[0] == HAND_WRITTEN, key[0], key[1]))
    lines = ["| chapter | module | public names |", "|---|---|---|"]
    for chapter, module in order:
        label = Path(chapter).stem if chapter != HAND_WRITTEN else chapter
        names = ", ".join(f"`{name}`" for name in grouped[chapter, module])
        lines.append(f"| {label} | `{module}` | {names} |")
    return "\n".join(lines)
