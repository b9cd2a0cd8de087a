"""Which size a chapter runs at: one setting chooses, never code edits.

`smoke` is what CI and the notebook tests run, `cpu` a reader's laptop (the committed
outputs), `gpu` a Colab GPU. Unset, the size is `gpu` where CUDA is available, else `cpu`;
the environment variable BERT_BOOK_SIZE overrides it.

BERT_BOOK_STEPS (a number in (0, 1]) cuts every training length of a size short: steps,
warm-up, evaluation interval, epochs. `make gpu-check` runs each chapter at the `gpu` size
this way, to prove in minutes that it runs on a GPU and fits in its memory. A cut-short run
shows nothing about what training learns, so its claims are printed, not asserted.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Any

import torch

__all__ = ["SIZE_NAMES", "SIZE_ENV_VAR", "STEPS_ENV_VAR", "SCALED_KEYS", "SIZE_HELP",
           "BookSizeError", "default_size", "book_size", "step_scale", "scaled", "pick_size",
           "in_colab"]

SIZE_NAMES = ("smoke", "cpu", "gpu")
SIZE_ENV_VAR = "BERT_BOOK_SIZE"
STEPS_ENV_VAR = "BERT_BOOK_STEPS"
SCALED_KEYS = ("steps", "warmup_steps", "eval_every", "epochs", "min_steps")
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
    name, scale = book_size(), step_scale()
    chosen = scaled(sizes[name], scale)
    if scale < 1 and "assert_claims" in chosen:
        chosen["assert_claims"] = False
    return name, chosen


def step_scale() -> float:
    """The share of each training length to run: $BERT_BOOK_STEPS, or 1."""
    text = os.environ.get(STEPS_ENV_VAR, "").strip()
    if not text:
        return 1.0
    try:
        scale = float(text)
    except ValueError:
        scale = float("nan")
    if not 0 < scale <= 1:
        raise BookSizeError(f"{STEPS_ENV_VAR}={text!r} must be a number in (0, 1], the share "
                            "of every training length to run (0.02 cuts 20,000 steps to 400); "
                            "unset it for the full length")
    return scale


def scaled(settings: Mapping[str, Any], scale: float) -> dict[str, Any]:
    """A copy of `settings` with every training length (SCALED_KEYS, in nested tables too)
    times `scale`: step counts stay whole and at least 1, epochs may become a fraction, and
    warm-up stays shorter than the run."""
    result = {key: scaled(value, scale) if isinstance(value, Mapping) else value
              for key, value in settings.items()}
    if scale == 1:
        return result
    for key in SCALED_KEYS:
        value = result.get(key)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        counted = isinstance(value, int) and key != "epochs"  # epochs may be fractional
        result[key] = max(1, round(value * scale)) if counted else value * scale
    if isinstance(result.get("warmup_steps"), int) and isinstance(result.get("steps"), int):
        result["warmup_steps"] = min(result["warmup_steps"], result["steps"] - 1)
    return result


def in_colab() -> bool:
    """True inside a Google Colab runtime (its module is imported before any cell runs)."""
    return "google.colab" in sys.modules
