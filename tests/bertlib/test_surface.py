"""bertlib's public surface stays small, documented and acyclic: what a practitioner sees
with `help(bertlib.X)` or an IDE is the library, not the book's scaffolding."""

import importlib
import inspect
import pkgutil

import pytest

import bertlib
from tools.authoring import export

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


def test_an_internal_mark_must_name_what_its_cell_defines(tmp_path):
    cell = export.ExportedCell("bertlib/x.py", "chapters/99_x.py", 3,
                               "def shown():\n    pass\n", False, ("hidden",))
    with pytest.raises(export.ExportError, match=r"`#\| internal` names \['hidden'\]"):
        export.render_module("bertlib/x.py", [cell])
    kept = export.ExportedCell("bertlib/x.py", "chapters/99_x.py", 3,
                               "def shown():\n    pass\n\n\ndef helper():\n    pass\n", False,
                               ("helper",))
    assert '__all__ = ["shown"]' in export.render_module("bertlib/x.py", [kept])


def test_a_module_built_by_two_chapters_names_both_and_where_each_cell_came_from():
    cells = [export.ExportedCell("bertlib/x.py", f"chapters/0{n}_x.py", 3,
                                 f"def f{n}():\n    pass\n", False) for n in (1, 2)]
    text = export.render_module("bertlib/x.py", cells)
    assert text.startswith(f"{export.GENERATED_PREFIX}chapters/01_x.py, chapters/02_x.py.")
    assert "# From chapters/01_x.py, cell 3." in text and "# From chapters/02_x.py, cell 3." in text
