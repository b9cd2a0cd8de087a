"""One name per idea beyond the library: the book's size tables, benchmarks and scripts
spell a setting as bertlib does (`batch_size`, not `batch`; `max_seq_length`, not `seq`), so
a reader who copies a size table's key into a bertlib call finds the parameter it names.

Checked: string keys of dict literals, keyword names (which `dict(...)` size tables are made
of), command-line options, and parameters of functions in chapters/, benchmarks/, bertbook/
and tools/. Forbidden: the glossary's "not" spellings (bertlib/README.md), plus `batch` and
`vocab` as names of a number (a key or option; a parameter `batch` is a batch itself, a
parameter `vocab` a vocabulary).
"""

import ast
from pathlib import Path

from tests.bertlib.test_glossary import forbidden_identifiers
from tools.chapters import ROOT

FOLDERS = ("chapters", "benchmarks", "bertbook", "tools")
# Keys that name something outside the book: the tokenizers library's JSON ("vocab").
FOREIGN_KEYS = {("chapters/02_tokens.py", "vocab")}
# Spellings allowed where they mean what the glossary allows: `--out` is the book's
# command-line option for output_dir (the glossary says so); `lr=` is torch.optim's own
# keyword; `test` is a labelled dataset's test split, not pretraining's held-out text.
ALLOWED = {("option", "out"), ("keyword", "lr"), ("key", "test"), ("parameter", "test"),
           ("parameter", "batch"), ("parameter", "vocab")}


def _python_files() -> list[Path]:
    return sorted(p for folder in FOLDERS for p in (ROOT / folder).rglob("*.py")
                  if ".ipynb_checkpoints" not in p.parts)


def names_used(tree: ast.AST) -> set[tuple[str, str]]:
    """(kind, name) of every key, keyword, option and parameter the tree spells."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            found |= {("key", k.value) for k in node.keys
                      if isinstance(k, ast.Constant) and isinstance(k.value, str)}
        elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) \
                and isinstance(node.slice.value, str):
            found.add(("key", node.slice.value))
        elif isinstance(node, ast.Call):
            found |= {("keyword", k.arg) for k in node.keywords if k.arg}
            found |= {("option", a.value.lstrip("-").replace("-", "_")) for a in node.args
                      if isinstance(a, ast.Constant) and isinstance(a.value, str)
                      and a.value.startswith("--")}
        elif isinstance(node, (ast.FunctionDef, ast.Lambda)):
            arguments = node.args.posonlyargs + node.args.args + node.args.kwonlyargs
            found |= {("parameter", a.arg) for a in arguments}
    return found


def test_the_scan_sees_each_kind_of_name():
    code = 'T = dict(seq=4, b={"warmup": 1}); T["vocab"]\np.add_argument("--mask-rate")\n' \
           "def f(lr): pass\n"
    assert {("keyword", "seq"), ("key", "warmup"), ("key", "vocab"),
            ("option", "mask_rate"), ("parameter", "lr")} <= names_used(ast.parse(code))


def test_size_tables_benchmarks_and_scripts_use_the_glossary_names():
    forbidden = forbidden_identifiers() | {"batch", "vocab"}
    found = []
    for path in _python_files():
        where = path.relative_to(ROOT).as_posix()
        for kind, name in names_used(ast.parse(path.read_text(encoding="utf-8"))):
            if name in forbidden and (where, name) not in FOREIGN_KEYS \
                    and (kind, name) not in ALLOWED:
                found.append(f"{where}: {kind} {name}")
    assert sorted(found) == []
