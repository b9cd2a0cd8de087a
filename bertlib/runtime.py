"""Where to run, and how to make a run repeatable."""

from __future__ import annotations

import importlib.util
import random

import torch

__all__ = ["best_device", "seed_everything"]


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
