"""Run a command (a grading kernel) where it can write to one folder and nothing else.

Grading runs students' code. Inside the sandbox that code

* can write only to its own folder, a private /dev/shm, and nowhere else: every other
  mount is read-only, the instructor's checkout and home included;
* cannot see the folders passed as hidden (the chapters with their solutions, the other
  submissions, the gradebook): an empty file system is mounted over each;
* runs in its own process namespace: it sees no other process, and everything it started
  is killed when it ends;
* cannot undo any of this: it runs as an unprivileged user of a nested user namespace,
  which may not change the mounts it was given.

It still reads whatever its user may read elsewhere (INSTRUCTORS.md says so). It uses
Linux user and mount namespaces (util-linux's `unshare`), which need no root; `available`
tells whether this machine allows them.

    python tools/grading/sandbox.py --writable DIR [--hide DIR ...] -- COMMAND...
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

NAMESPACES = ["--user", "--map-root-user", "--mount", "--pid", "--fork", "--kill-child",
              "--mount-proc"]
SPECIAL_MOUNTS = ("/proc", "/sys", "/dev")  # their own rules apply; /dev/shm is replaced


def available() -> bool:
    """True when this machine lets an ordinary process create user and mount namespaces."""
    try:
        result = subprocess.run(["unshare", *NAMESPACES, "true"], capture_output=True,
                                timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return result.returncode == 0


def command(writable: Path, hidden: list[Path], argv: list[str]) -> list[str]:
    """The command line that runs argv in the sandbox."""
    inside = [sys.executable, str(Path(__file__).resolve()), "--inside",
              "--writable", str(writable)]
    for path in hidden:
        inside += ["--hide", str(path)]
    return ["unshare", *NAMESPACES, *inside, "--", *argv]


def _mount(*args: str) -> None:
    subprocess.run(["mount", *args], check=True, capture_output=True)


def _mount_points() -> list[str]:
    with open("/proc/self/mountinfo") as handle:
        return [line.split()[4] for line in handle]


def _is_special(mount_point: str) -> bool:
    return any(mount_point == top or mount_point.startswith(top + "/")
               for top in SPECIAL_MOUNTS) and mount_point != "/dev/shm"


def confine(writable: Path, hidden: list[Path]) -> None:
    """Inside the new namespaces (as their root): make everything but `writable` read-only."""
    _mount("--make-rprivate", "/")
    _mount("--bind", str(writable), str(writable))  # its own mount, spared below
    for mount_point in _mount_points():
        if mount_point != str(writable) and not _is_special(mount_point):
            _mount("-o", "remount,bind,ro", mount_point)
    _mount("-t", "tmpfs", "-o", "size=512m", "tmpfs", "/dev/shm")
    for path in hidden:
        if path.is_dir():
            _mount("-t", "tmpfs", "-o", "ro,size=4k", "tmpfs", str(path))
        elif path.exists():
            _mount("--bind", "/dev/null", str(path))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writable", type=Path, required=True)
    parser.add_argument("--hide", type=Path, action="append", default=[])
    parser.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("argv", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    run = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
    if not run:
        parser.error("no command given after --")
    if not args.inside:
        os.execvp("unshare", command(args.writable.resolve(),
                                     [p.resolve() for p in args.hide], run))
    confine(args.writable, args.hide)
    # A nested user namespace without a mapping: its processes are an unprivileged user
    # who may not change the mounts set up above.
    os.execvp("unshare", ["unshare", "--user", *run])
    return 1  # not reached: exec replaces this process


if __name__ == "__main__":
    sys.exit(main())
