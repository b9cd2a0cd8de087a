"""Which size a chapter runs at: one setting chooses, never code edits.

`smoke` is what CI and the notebook tests run, `cpu` a reader's laptop (the committed
outputs), `gpu` a Colab GPU. Unset, the size is `gpu` where CUDA is available, else `cpu`;
the environment variable BERT_BOOK_SIZE overrides it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Any

import torch

__all__ = ["SIZE_NAMES", "SIZE_ENV_VAR", "SIZE_HELP", "BookSizeError", "default_size",
           "book_size", "pick_size", "in_colab"]

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


def in_colab() -> bool:
    """True inside a Google Colab runtime (its module is imported before any cell runs)."""
    return "google.colab" in sys.modules
