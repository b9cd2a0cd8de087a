"""One name per idea: the library page's glossary and bertlib's public signatures agree.

The glossary's "not" column lists the spellings a name must not take. Every parameter and
dataclass field of the library's public classes and functions is checked against them, so
a `seq_len` beside `max_seq_length` fails here instead of reaching a reader.
"""

import dataclasses
import importlib
import inspect
import pkgutil
import re

import bertlib
from tools.chapters import ROOT

# Spellings the glossary forbids for one idea that rightly name another in a signature:
# `model` is the nn.Module handed in, `vocab` the vocabulary itself (piece -> id), `batch`
# a batch itself (bertlib.batch's dict of tensors), not a number of examples.
OTHER_MEANINGS = {"model", "vocab", "batch"}


def _glossary() -> list[tuple[str, str]]:
    """(the names, the spellings not to use) of each row of bertlib/README.md's table."""
    text = (ROOT / "bertlib" / "README.md").read_text(encoding="utf-8")
    section = text.split("## One name per idea", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|")[1:-1] for line in section.splitlines() if line.startswith("| ")]
    return [(row[1], row[2]) for row in rows[1:] if len(row) == 3]


def forbidden_identifiers() -> set[str]:
    """The "not" spellings that could be a Python name (lr, seq_len; not "mask rate")."""
    spellings = {part.strip() for _, nots in _glossary() for part in nots.split(",")}
    return {s for s in spellings if re.fullmatch(r"[a-z_]+", s)} - OTHER_MEANINGS


def _public_objects():
    for info in pkgutil.walk_packages(bertlib.__path__, "bertlib."):
        module = importlib.import_module(info.name)
        for name in module.__all__:
            yield f"{info.name}.{name}", getattr(module, name)


def _names_taken(obj) -> set[str]:
    if dataclasses.is_dataclass(obj):
        return {field.name for field in dataclasses.fields(obj)}
    if inspect.isclass(obj):
        methods = [m for _, m in inspect.getmembers(obj, inspect.isfunction)
                   if not m.__name__.startswith("_") or m.__name__ == "__init__"]
        return {p for method in methods for p in inspect.signature(method).parameters}
    if inspect.isfunction(obj):
        return set(inspect.signature(obj).parameters)
    return set()


def test_the_glossary_is_read():
    assert {"lr", "seq", "seq_len", "warmup", "out"} <= forbidden_identifiers()


def test_no_public_signature_uses_a_spelling_the_glossary_forbids():
    forbidden = forbidden_identifiers()
    found = sorted(f"{where}: {name}" for where, obj in _public_objects()
                   for name in _names_taken(obj) & forbidden)
    assert found == []
