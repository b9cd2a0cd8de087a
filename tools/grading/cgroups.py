"""Limits for a sandbox as a whole: memory, processes and CPU shared by every process it
starts, through the kernel's control groups.

Per-process limits (setrlimit) let six forked children hold six times the memory one
process may. A control group counts them together. As root, `ControlGroup.create` makes a
group below the grader's own, in the unified hierarchy (cgroup v2) or in cgroup v1's memory,
pids and cpu hierarchies, whichever this machine mounts; the sandbox's first process joins
it (sandbox.py's `--cgroup`, writing 0 to each folder's cgroup.procs) before it starts
the student's code, so everything started later is counted. The grader reads from the
group whether the kernel's memory limit killed something (the sandbox's words, not the
student's), and removes the group, killing what is left, when the notebook is done. Not
root, or no hierarchy it may write: `create` returns None, and only the per-process limits
hold.
"""

from __future__ import annotations

import os
import secrets
import signal
import time
from dataclasses import dataclass
from pathlib import Path

HIERARCHIES = Path("/sys/fs/cgroup")
CPU_PERIOD_US = 100_000  # the scheduler's accounting period for a CPU quota


@dataclass(frozen=True)
class ControlGroup:
    """One sandbox's group: a folder per hierarchy (one in v2, three in v1)."""

    folders: tuple[Path, ...]
    unified: bool

    @classmethod
    def create(cls, memory_mb: int, processes: int, cpus: float) -> ControlGroup | None:
        """A new group with these limits, or None where this process may not make one."""
        if os.geteuid() != 0 or not HIERARCHIES.is_dir():
            return None
        name = f"bertbook-sandbox-{secrets.token_hex(6)}"
        unified = (HIERARCHIES / "cgroup.controllers").exists()
        made: list[Path] = []
        try:
            for controller in ([""] if unified else ["memory", "pids", "cpu"]):
                folder = _own_group(controller) / name
                folder.mkdir()
                made.append(folder)
            group = cls(tuple(made), unified)
            group._limit(memory_mb, processes, cpus)
            return group
        except OSError:
            ControlGroup(tuple(made), unified).remove()
            return None

    def _limit(self, memory_mb: int, processes: int, cpus: float) -> None:
        memory, quota = memory_mb * 1024 * 1024, int(cpus * CPU_PERIOD_US)
        if self.unified:
            folder = self.folders[0]
            _write(folder / "memory.max", memory)
            _write(folder / "memory.swap.max", 0, required=False)
            _write(folder / "pids.max", processes)
            _write(folder / "cpu.max", f"{quota} {CPU_PERIOD_US}")
            return
        memory_folder, pids_folder, cpu_folder = self.folders
        _write(memory_folder / "memory.limit_in_bytes", memory)
        _write(memory_folder / "memory.memsw.limit_in_bytes", memory, required=False)
        _write(pids_folder / "pids.max", processes)
        _write(cpu_folder / "cpu.cfs_period_us", CPU_PERIOD_US)
        _write(cpu_folder / "cpu.cfs_quota_us", quota)

    def memory_kills(self) -> int:
        """How many processes the group's memory limit killed."""
        events = self.folders[0] / ("memory.events" if self.unified else "memory.oom_control")
        try:
            for line in events.read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
        except (OSError, ValueError):
            pass
        return 0

    def remove(self) -> None:
        """Kill whatever is left in the group, then remove its folders."""
        for folder in self.folders:
            for _ in range(50):
                try:
                    pids = [int(p) for p in (folder / "cgroup.procs").read_text().split()]
                except OSError:
                    break
                for pid in pids:
                    _kill(pid)
                try:
                    folder.rmdir()
                    break
                except OSError:
                    time.sleep(0.05)


def _own_group(controller: str) -> Path:
    """The folder of this process's own group in a hierarchy ("" : the unified one)."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if (controller == "" and controllers == "" and line.startswith("0::")) or \
                controller in controllers.split(","):
            mount = HIERARCHIES if controller == "" else _mount_of(controller)
            return mount / path.lstrip("/")
    raise OSError(f"no {controller or 'unified'} control group hierarchy")


def _mount_of(controller: str) -> Path:
    """Where cgroup v1 mounts a controller: /sys/fs/cgroup/cpu or /sys/fs/cgroup/cpu,cpuacct."""
    for folder in HIERARCHIES.iterdir():
        if controller in folder.name.split(",") and folder.is_dir() and not folder.is_symlink():
            return folder
    raise OSError(f"no {controller} hierarchy under {HIERARCHIES}")


def _write(path: Path, value: object, required: bool = True) -> None:
    try:
        path.write_text(str(value))
    except OSError:
        if required:
            raise


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass
