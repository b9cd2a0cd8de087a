"""bertlib's map: one home per idea, imports that only go down, and a shallow graph.

A module's level is 0 when it imports no other bertlib module, else one more than the
deepest module it imports. The levels are read from the source (every import statement,
at a module's top or inside a function), so a lazy import cannot hide an edge.
"""

import ast
import functools
from pathlib import Path

import pytest

from bertlib.errors import ConfigError
from bertlib.pretraining.run import MODEL_FOR_OBJECTIVE, PretrainingRun
from tools.chapters import ROOT

MAX_LEVEL = 5
CONCEPTS = {"core", "pretraining", "finetuning", "training", "analysis"}
MODEL_MODULES = {"bertlib.core.encoder", "bertlib.pretraining.models",
                 "bertlib.finetuning.models"}


def _module_name(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


def _imports(path: Path) -> set[str]:
    """Every module a file imports (bertlib's and others'), wherever the statement sits,
    except under `if TYPE_CHECKING:`, which names a type for readers and never runs."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and ast.unparse(node.test).endswith("TYPE_CHECKING"):
            node.body = []
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
    return found


GRAPH = {_module_name(path): _imports(path) for path in (ROOT / "bertlib").rglob("*.py")}


def _bertlib_imports(module: str) -> set[str]:
    return {name for name in GRAPH[module] if name in GRAPH and name != module}


@functools.cache
def level(module: str, seen: frozenset = frozenset()) -> int:
    if module in seen:
        raise AssertionError(f"import cycle through {module}")
    below = [level(name, seen | {module}) for name in _bertlib_imports(module)]
    return 1 + max(below) if below else 0


def test_the_graph_is_acyclic_and_at_most_five_levels_deep():
    levels = {module: level(module) for module in GRAPH}
    deepest = max(levels, key=levels.get)
    assert levels[deepest] <= MAX_LEVEL, f"{deepest} sits at level {levels[deepest]}"


def test_the_level_counts_the_longest_chain_of_imports():
    """The measure itself: errors imports nothing of bertlib, the config only errors, the
    encoder the config's level, and the front door sits above everything."""
    assert level("bertlib.errors") == 0
    assert level("bertlib.core.config") == 1
    assert level("bertlib.core.encoder") == 2
    assert level("bertlib") == max(level(module) for module in GRAPH)


def test_every_module_sits_in_a_concept_or_is_one_of_the_shared_few():
    top = {module.split(".")[1] for module in GRAPH if module.count(".") >= 1}
    shared = {"errors", "files", "runtime", "batch", "tokenizer", "integrations", "serving"}
    assert top == CONCEPTS | shared


def test_no_two_modules_look_alike():
    """A name that starts another name in the same package (pretraining, pretraining_models)
    makes a newcomer guess which is which."""
    by_package: dict[str, list[str]] = {}
    for module in GRAPH:
        package, _, stem = module.rpartition(".")
        by_package.setdefault(package, []).append(stem)
    alike = [(a, b) for stems in by_package.values() for a in stems for b in stems
             if a != b and b.startswith(a)]
    assert alike == []


def test_the_core_imports_nothing_above_it():
    above = {"bertlib.pretraining", "bertlib.finetuning", "bertlib.training",
             "bertlib.analysis", "bertlib.tokenizer", "bertlib.integrations"}
    leaks = {(module, name) for module in GRAPH if module.startswith("bertlib.core")
             for name in _bertlib_imports(module) if name.startswith(tuple(above))}
    assert leaks == set()


def test_models_never_import_training():
    leaks = {(module, name) for module in MODEL_MODULES for name in _bertlib_imports(module)
             if name.startswith("bertlib.training")}
    assert leaks == set()


def test_nothing_in_bertlib_imports_the_book_or_its_tools():
    leaks = {(module, name) for module, names in GRAPH.items() for name in names
             if name.split(".")[0] in ("bertbook", "tools")}
    assert leaks == set()


def test_no_module_fills_another_modules_table_at_import_time():
    """`TABLE[key] = value` at a module's top, on a name imported from elsewhere, is a
    registry filled by importing: what it holds depends on what happened to be imported."""
    filled = []
    for path in (ROOT / "bertlib").rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        imported = {alias.asname or alias.name for node in tree.body
                    if isinstance(node, ast.ImportFrom) for alias in node.names}
        filled += [f"{_module_name(path)}: {ast.unparse(target)}"
                   for node in tree.body if isinstance(node, ast.Assign)
                   for target in node.targets
                   if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name)
                   and target.value.id in imported]
    assert filled == []


def test_the_run_lists_the_paper_objectives_in_its_own_table():
    assert set(MODEL_FOR_OBJECTIVE) == {"mlm+nsp", "mlm", "left-to-right"}


@pytest.mark.parametrize("objective", ["left-to-rihgt", "MLM", ""])
def test_an_unknown_objective_is_refused_when_the_run_is_built(objective):
    with pytest.raises(ConfigError, match="objective must be one of"):
        PretrainingRun(objective=objective)
