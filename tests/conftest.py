"""Shared fixtures: the repository root, and a look at the machine's processes (for the
grading tests: nothing a student starts may outlive grading)."""

import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


@pytest.fixture
def processes_running() -> Callable[[bytes], list[str]]:
    """A function: the pids whose command line holds `marker`, after half a second for
    the kernel to finish killing what it was told to."""
    def find(marker: bytes) -> list[str]:
        time.sleep(0.5)
        found = []
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                if marker in Path(f"/proc/{pid}/cmdline").read_bytes():
                    found.append(pid)
            except OSError:  # the process ended while it was read
                pass
        return found
    return find
