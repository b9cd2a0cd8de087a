"""bertlib's public surface stays small, documented and acyclic: what a practitioner sees
with `help(bertlib.X)` or an IDE is the library, not the book's scaffolding."""

import ast
import importlib
import inspect
import pkgutil

import pytest

import bertlib
from tools.build import export
from tools.chapters import ROOT

MAX_PUBLIC_NAMES = 100


def _modules() -> list:
    return [importlib.import_module(m.name)
            for m in pkgutil.walk_packages(bertlib.__path__, "bertlib.")
            if not m.name.endswith("__main__")]


def test_at_most_a_hundred_public_names_across_the_modules():
    names = [(module.__name__, name) for module in _modules() for name in module.__all__]
    assert len(names) <= MAX_PUBLIC_NAMES, f"{len(names)} public names"


def test_every_public_class_and_function_says_what_it_is_for():
    missing = [f"{module.__name__}.{name}" for module in _modules() for name in module.__all__
               if (inspect.isclass(obj := getattr(module, name)) or inspect.isfunction(obj))
               and not (obj.__dict__.get("__doc__") if inspect.isclass(obj) else obj.__doc__)]
    assert missing == []


def _imported_modules(path) -> set[str]:
    """bertlib modules a file imports, at its top or inside a function."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("bertlib."):
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name.startswith("bertlib.")}
    return found


def test_no_import_cycle_among_the_modules():
    graph = {}
    for path in (ROOT / "bertlib").rglob("*.py"):
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        graph[name] = _imported_modules(path) - {name}

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        return any(step == goal or (step not in seen and reaches(step, goal, seen | {step}))
                   for step in graph.get(start, ()))

    cycles = sorted(name for name in graph if name != "bertlib" and reaches(name, name, set()))
    assert cycles == []


def test_an_internal_mark_must_name_what_its_cell_defines(tmp_path):
    cell = export.ExportedCell("bertlib/x.py", "chapters/99_x.py", 3,
                               "def shown():\n    pass\n", False, ("hidden",))
    with pytest.raises(export.ExportError, match=r"`#\| internal` names \['hidden'\]"):
        export.render_module("bertlib/x.py", [cell])
    kept = export.ExportedCell("bertlib/x.py", "chapters/99_x.py", 3,
                               "def shown():\n    pass\n\n\ndef helper():\n    pass\n", False,
                               ("helper",))
    assert '__all__ = ["shown"]' in export.render_module("bertlib/x.py", [kept])


def test_a_library_module_has_one_owner_chapter():
    cells = [export.ExportedCell("bertlib/x.py", f"chapters/0{n}_x.py", 3,
                                 f"def f{n}():\n    pass\n", False) for n in (1, 2)]
    with pytest.raises(export.ExportError, match="one owner chapter"):
        export.check_one_owner("bertlib/x.py", cells)
    export.check_one_owner("bertbook/x.py", cells)  # the book's package may gather helpers
