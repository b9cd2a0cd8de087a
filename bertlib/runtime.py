"""Where to run, in which precision, and how to make a run repeatable.

The precision policy lives here, beside the device it depends on, so that models (which
run under autocast) and the trainer (which chooses the precision) share it without a
model ever importing the trainer.
"""

from __future__ import annotations

import contextlib
import importlib.util
import random
import warnings

import torch

from bertlib.errors import ConfigError

__all__ = ["best_device", "cpu_has_fast_bf16", "resolve_precision", "autocast",
           "seed_everything"]


def best_device(asked: str | torch.device | None = None) -> torch.device:
    """The device asked for (a name such as "cuda:0", or a torch.device), checked here so
    that a wrong one fails with advice; with none asked, the fastest here: CUDA, then
    Apple's MPS, then the CPU."""
    if asked is not None:
        try:
            device = torch.device(asked)
        except (RuntimeError, TypeError) as error:
            raise ConfigError(f"device {asked!r} is not a device torch knows ({error}); use "
                              "'cpu', 'cuda' or 'cuda:N'") from None
        if device.type == "cuda" and not torch.cuda.is_available():
            raise ConfigError(f"device {asked!r} asks for CUDA, which this machine lacks; use "
                              "'cpu', or leave the device out to take the fastest here")
        return device
    if torch.cuda.is_available():
        return torch.device("cuda")
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def cpu_has_fast_bf16() -> bool:
    """Whether this CPU multiplies bf16 matrices quickly.

    PyTorch's fast CPU bf16 products come from oneDNN, which needs AVX-512 (or Arm's bf16
    instructions). Without them autocast's bf16 products fall back to a plain loop: on a
    2-core AVX2 EPYC a 1024x384 by 384x1536 product with its backward took 1.0 s in bf16
    against 0.02 s in fp32. So bf16 on a CPU is chosen only where this says True.
    """
    try:
        return bool(torch.backends.mkldnn.is_available()
                    and torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):  # a build without oneDNN's bf16 check
        return False


def resolve_precision(precision: str, device: torch.device) -> str:
    """The library's one precision policy; 'auto' resolves to:

    * bf16 on a GPU of compute capability 8.0 or more (A100, L4, H100...);
    * fp16 with a gradient scaler on an older GPU: a T4 (7.5) reports bf16 as supported,
      but only emulates it, with no tensor cores and no fused attention;
    * fp32 on a CPU or anything else: bf16 on a CPU helps only some models on some CPUs
      (chapter 10 measures it), so it is asked for by name, never assumed; asked for on a
      CPU without fast bf16 products (`cpu_has_fast_bf16`), it warns.
    """
    if precision not in ("auto", "fp32", "bf16", "fp16"):
        raise ConfigError(f"precision must be auto, fp32, bf16 or fp16, not {precision!r}")
    if precision != "auto":
        if precision == "fp16" and device.type != "cuda":
            raise ConfigError("fp16 training needs a CUDA device; use bf16 or fp32 here")
        if precision == "bf16" and device.type == "cpu" and not cpu_has_fast_bf16():
            warnings.warn("this CPU has no fast bf16 products (oneDNN's bf16 needs AVX-512), "
                          "so bf16 trains tens of times slower than fp32 here: ask for "
                          "precision='fp32' (or 'auto')", stacklevel=2)
        return precision
    if device.type == "cuda":
        return "bf16" if torch.cuda.get_device_capability(device) >= (8, 0) else "fp16"
    return "fp32"


def autocast(device: torch.device, precision: str):
    """The autocast context for a resolved precision (a no-op for fp32)."""
    if precision == "fp32":
        return contextlib.nullcontext()
    dtype = torch.bfloat16 if precision == "bf16" else torch.float16
    return torch.autocast(device_type=device.type, dtype=dtype)


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
