"""Measuring BERT training, for the book's performance chapter and benchmarks: interleaved
timings and peak memory, one training step as a closure, FLOPs per token and model FLOPs
utilisation against datasheet peaks, and the paper's compute budget."""

import contextlib
import ctypes
import os
import re
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from bertlib.core.config import BertConfig
from bertlib.runtime import autocast

__all__ = [
    "interleaved_timings",
    "medians",
    "track_peak_memory",
    "peak_memory_mib",
    "training_step",
    "forward_flops_per_token",
    "training_flops_per_token",
    "DATASHEET_TFLOPS",
    "datasheet_peak_flops",
    "matmul_flops_per_second",
    "PretrainingBudget",
    "native_logs_silenced",
]


@contextlib.contextmanager
def native_logs_silenced():
    """Within it, what C++ code writes to standard error goes nowhere: torch's profiler logs
    its own start and stop there ("USDT: ... profiler_start"), and no setting turns that
    off. Python's errors still raise as usual; only native log lines are lost."""
    sys.stderr.flush()
    saved = os.dup(2)
    with open(os.devnull, "w") as nowhere:
        os.dup2(nowhere.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def interleaved_timings(steps: dict[str, Callable[[], object]], repeats: int,
                        warmup_calls: int = 1) -> dict[str, list[float]]:
    """Seconds per call of each step. Every step runs `warmup_calls` times first; then the steps
    take turns, in reversed order every other round. A step must finish its work before
    returning (on a GPU, reading the loss with float() waits for it)."""
    for step in steps.values():
        for _ in range(warmup_calls):
            step()
    seconds: dict[str, list[float]] = {name: [] for name in steps}
    names = list(steps)
    for round_ in range(repeats):
        for name in names if round_ % 2 == 0 else names[::-1]:
            started = time.perf_counter()
            steps[name]()
            seconds[name].append(time.perf_counter() - started)
    return seconds


def medians(seconds: dict[str, list[float]]) -> dict[str, float]:
    return {name: statistics.median(values) for name, values in seconds.items()}


def _linux_status_mib(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"/proc/self/status has no {field}")


def track_peak_memory() -> bool:
    """Make CPU peak memory measurable, where it can be (Linux with glibc): blocks of 64 KiB
    and more come straight from the kernel and go back to it when freed, so the resident
    set follows the live tensors. Returns whether peak_memory_mib can measure the CPU."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None)
        m_trim_threshold, m_mmap_threshold = -1, -3
        return bool(libc.mallopt(m_mmap_threshold, 65536)
                    and libc.mallopt(m_trim_threshold, 65536))
    except (OSError, AttributeError):
        return False


def peak_memory_mib(step: Callable[[], object], device: torch.device) -> float | None:
    """How far memory rises above its resting level while `step` runs, in MiB: the CUDA
    allocator's peak on a GPU; on Linux the kernel's high-water mark of the process (reset
    by writing 5 to /proc/self/clear_refs); None where neither exists."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        resting = torch.cuda.memory_allocated(device)
        step()
        torch.cuda.synchronize(device)
        return (torch.cuda.max_memory_allocated(device) - resting) / 2**20
    clear_refs = Path("/proc/self/clear_refs")
    if not clear_refs.exists():
        return None
    clear_refs.write_text("5")
    resting = _linux_status_mib("VmRSS")
    step()
    return _linux_status_mib("VmHWM") - resting


def training_step(model: torch.nn.Module, batch: dict[str, torch.Tensor],
                  precision: str = "fp32", optimizer: torch.optim.Optimizer | None = None
                  ) -> Callable[[], float]:
    """A closure that runs one full step on `batch` (which lives on the model's device) and
    returns the loss.

    Steps over several batches of one model must share its `optimizer`: each AdamW keeps
    two float32 copies of every weight, so one per batch would hold gigabytes for nothing.
    fp16 scales the loss (GradScaler), as fp16's narrow range needs; bf16 and fp32 do not.
    """
    optimizer = optimizer or torch.optim.AdamW(model.parameters(), lr=1e-4)
    device = next(model.parameters()).device
    scaler = torch.amp.GradScaler(device.type, enabled=precision == "fp16")
    model.train()

    def step() -> float:
        with autocast(device, precision):  # the library's own precision context
            loss = model(**batch).loss
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)
        return float(loss.detach())

    return step


def forward_flops_per_token(config: BertConfig, max_seq_length: int,
                            predicted_share: float = 0.15) -> float:
    """FLOPs of one token's forward pass through BertForMaskedLM whose head scores
    `predicted_share` of positions (1.0 for a dense head). Embedding lookups, LayerNorm and
    softmax are left out: they are a small share and no matrix product."""
    h, inner, layers = config.hidden_size, config.intermediate_size, config.num_hidden_layers
    dense = layers * (4 * h * h + 2 * h * inner)
    attention = layers * 2 * max_seq_length * h
    head = predicted_share * (h * h + h * config.vocab_size)
    return 2 * (dense + attention + head)


def training_flops_per_token(config: BertConfig, max_seq_length: int,
                             predicted_share: float = 0.15) -> float:
    """Forward + backward ≈ 3 forward passes."""
    return 3 * forward_flops_per_token(config, max_seq_length, predicted_share)


DATASHEET_TFLOPS = {  # dense bf16 / fp16 tensor-core peaks from NVIDIA's datasheets
    "H200": 989.0, "H100 SXM": 989.0, "H100 PCIe": 756.0, "H100": 989.0, "A100": 312.0,
    "L4": 121.0, "A10G": 125.0, "T4": 65.0, "V100": 125.0,
}


def datasheet_peak_flops(device: torch.device) -> float | None:
    """The half-precision peak of a known NVIDIA GPU, in FLOP/s; None if unknown. Names
    match as whole words, the longest first: "L4" is not "L40S", "H100 PCIe" not "H100"."""
    if device.type != "cuda":
        return None
    words = re.findall(r"[A-Za-z0-9]+", torch.cuda.get_device_name(device))
    for key in sorted(DATASHEET_TFLOPS, key=lambda key: -len(key.split())):
        wanted = key.split()
        if any(words[i:i + len(wanted)] == wanted for i in range(len(words))):
            return DATASHEET_TFLOPS[key] * 1e12
    return None


def _product_seconds(device: torch.device, dtype: torch.dtype, size: int,
                     count: int) -> list[float]:
    """The wall time of each of `count` products of two random size x size matrices."""
    a = torch.randn(size, size, device=device, dtype=dtype)
    b = torch.randn(size, size, device=device, dtype=dtype)
    seconds = []
    for _ in range(count):
        started = time.perf_counter()
        (a @ b).sum().item()
        seconds.append(time.perf_counter() - started)
    return seconds


def matmul_flops_per_second(device: torch.device, dtype: torch.dtype = torch.float32,
                            size: int = 2048, repeats: int = 5,
                            budget_seconds: float = 5.0) -> float:
    """The rate of one large square matrix product here: a practical peak.

    A product of side 256 is timed first, and the side is halved while the timed products
    would take more than budget_seconds: a CPU without fast bf16 (no AVX-512) multiplies
    bf16 so slowly that six products of side 2048 took six minutes on one. The rate is the
    answer, and a smaller product only understates it a little.
    """
    probe = statistics.median(_product_seconds(device, dtype, 256, 3)[1:])  # first warms up
    while size > 256 and probe * (size / 256) ** 3 * (repeats + 1) > budget_seconds:
        size //= 2
    seconds = _product_seconds(device, dtype, size, repeats + 1)
    return 2 * size**3 / statistics.median(seconds[1:])


@dataclass(frozen=True)
class PretrainingBudget:
    """A pretraining run as the paper states one: phases of (share of steps, length)."""

    batch_sequences: int = 256
    steps: int = 1_000_000
    phases: tuple[tuple[float, int], ...] = ((0.9, 128), (0.1, 512))

    def phase_tokens(self) -> list[tuple[float, int]]:
        """(tokens trained, sequence length) of each phase."""
        return [(share * self.steps * self.batch_sequences * seq, seq)
                for share, seq in self.phases]

    def tokens(self) -> float:
        return sum(tokens for tokens, _ in self.phase_tokens())

    def flops(self, config: BertConfig, predicted_share: float = 0.15) -> float:
        return sum(tokens * training_flops_per_token(config, seq, predicted_share)
                   for tokens, seq in self.phase_tokens())

    def hours(self, config: BertConfig, tokens_per_second: float, measured_seq: int) -> float:
        """Wall-clock hours at a rate measured at `measured_seq`: the FLOP rate that rate
        implies, spent on the budget's FLOPs (so longer phases cost more per token)."""
        flop_rate = tokens_per_second * training_flops_per_token(config, measured_seq)
        return self.flops(config) / flop_rate / 3600
