"""Run a command (a grading kernel) with no power over the machine, as root or not.

Grading runs students' code, and instructors run graders as root (Colab, docker, course
servers). Inside this sandbox that code

* runs as an **unprivileged user**: started as root, the sandbox gives it a fresh uid of
  its own, no capabilities and `no_new_privs`; started as an ordinary user, it runs in a
  nested user namespace that holds no mapping and no capability over the mounts;
* sees a **root file system built for it**: the system folders (/usr, /etc, ...) and the
  folders passed as readable, all read-only; a scratch /tmp (HOME lives there) and
  /dev/shm of bounded size; a /proc of its own processes only, with /proc/sys read-only;
  no /sys; a /dev of null, zero, full, random, urandom and tty. Nothing else of the host,
  so no `.git`, no chapters, no other course folder, no instructor home;
* may write to one host folder, `--share` (Jupyter's connection file and sockets), whose
  size is watched;
* has **no network** (a namespace with only a downed loopback; `--network` keeps the
  host's), private System V IPC, its own hostname;
* gets a **clean environment**: PATH, HOME, TMPDIR, LANG and what `--env` names;
* lives in its **own PID namespace** whose first process is this script, not the student's
  code: when the command exits, when the wall-clock limit passes, when the shared folder
  grows too large, or when whoever started the sandbox kills it, that process exits and
  the kernel kills everything left inside, whatever it did to survive;
* runs under **limits**: address space, processes (exact when started as root: the uid is
  fresh), file size, open files, no core dumps; and, given a control group (`--cgroup`,
  tools/grading/cgroups.py, made by the grader as root), memory, processes and CPU for the
  whole sandbox together; the shared folder's size and its number of files and folders.

When a limit stops it, the sandbox writes which one to `LIMIT_FILE` in the shared folder.
It uses Linux namespaces through util-linux's `unshare`; `available` says whether this
machine allows them.

    python tools/grading/sandbox.py --share DIR --root EMPTY_DIR [--read PATH ...] -- CMD...
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import resource
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

SYSTEM = ("/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
DEVICES = ("null", "zero", "full", "random", "urandom", "tty")
HOME = "/tmp/home"  # on the scratch tmpfs
LIMIT_FILE = "sandbox-limit.txt"
PR_SET_NO_NEW_PRIVS = 38
FIRST_FRESH_UID = 1 << 20  # far above any real user's uid


@dataclass(frozen=True)
class Limits:
    """What one sandboxed command may use; the defaults fit a chapter at smoke size."""

    memory_mb: int = 4096     # address space of each process; memory of all, in a cgroup
    processes: int = 256      # processes and threads of the sandbox's uid (and cgroup)
    cpus: float = 2.0         # CPUs the whole sandbox may keep busy, in a cgroup
    file_mb: int = 256        # largest file it may write
    scratch_mb: int = 512     # /tmp (with HOME) and /dev/shm, each
    share_mb: int = 64        # what it may add to the shared folder
    share_entries: int = 10_000  # files and folders it may add there
    seconds: float = 1800.0   # wall clock, from start to the last process


def available() -> bool:
    """True when this machine lets this user build the sandbox: it is tried on `true`."""
    with tempfile.TemporaryDirectory(prefix="bertbook-sandbox-check-") as folder:
        share, root = Path(folder, "share"), Path(folder, "root")
        share.mkdir()
        root.mkdir()
        try:
            result = subprocess.run(command(share, root, python_paths(), ["true"]),
                                    capture_output=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            return False
        return result.returncode == 0


def _namespaces(network: bool) -> list[str]:
    """unshare's flags. As root, no user namespace: a fresh uid does the confining."""
    flags = ["--mount", "--pid", "--fork", "--kill-child", "--ipc", "--uts"]
    if not network:
        flags.append("--net")
    return flags if os.geteuid() == 0 else ["--user", "--map-root-user", *flags]


def command(share: Path, root: Path, readable: list[Path], argv: list[str],
            env: dict[str, str] | None = None, limits: Limits = Limits(),
            network: bool = False, cgroup: tuple[Path, ...] = ()) -> list[str]:
    """The command line that runs argv in the sandbox (for a kernel spec, say); `cgroup`:
    the folders of a control group its first process joins (ControlGroup.folders)."""
    inside = [sys.executable, str(Path(__file__).resolve()), "--inside",
              "--share", str(share), "--root", str(root),
              "--limits", json.dumps(asdict(limits)),
              "--deadline", str(time.time() + limits.seconds)]
    for path in readable:
        inside += ["--read", str(path)]
    for folder in cgroup:
        inside += ["--cgroup", str(folder)]
    for name, value in (env or {}).items():
        inside += ["--env", f"{name}={value}"]
    return ["unshare", *_namespaces(network), *inside, "--", *argv]


def python_paths() -> list[Path]:
    """What a Python kernel of this interpreter must read: its installation and its venv."""
    return sorted({Path(sys.base_prefix).resolve(), Path(sys.prefix).resolve()})


# --- inside: building the root file system ------------------------------------------------

def _run(*argv: str) -> None:
    result = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    if result.returncode != 0:
        raise OSError(f"sandbox: `{' '.join(argv)}` failed: {result.stderr.strip()}")


def _bind_read_only(source: Path, target: Path) -> None:
    """Bind `source` at `target`, read-only. A remount must keep the locks the source's
    mount already has (nosuid, nodev, noexec in a user namespace), so they are added."""
    _run("mount", "--bind", str(source), str(target))
    _make_read_only(target)


def _make_read_only(target: Path | str) -> None:
    for extra in ("nosuid,nodev", "nosuid,nodev,noexec"):
        if subprocess.run(["mount", "-o", f"remount,bind,ro,{extra}", str(target)],
                          capture_output=True, timeout=60).returncode == 0:
            return
    raise OSError(f"sandbox: cannot make {target} read-only")


def _tmpfs(target: Path, size_mb: int, mode: str) -> None:
    target.mkdir(parents=True, exist_ok=True)
    _run("mount", "-t", "tmpfs", "-o", f"size={size_mb}m,mode={mode},nosuid,nodev",
         "tmpfs", str(target))


def _inside(new_root: Path, path: Path | str) -> Path:
    return new_root / str(path).lstrip("/")


def _is_covered(path: Path, bound: list[Path]) -> bool:
    return any(path == top or top in path.parents for top in bound)


def build_root(new_root: Path, share: Path, readable: list[Path], workdir: Path,
               limits: Limits) -> None:
    """Mount the sandbox's file system at `new_root` (in this private mount namespace)."""
    _run("mount", "--make-rprivate", "/")
    _tmpfs(new_root, 16, "755")
    # The scratch first: a folder the sandbox reads may lie under /tmp (a checkout cloned
    # there, say), and its binding must go on top of the scratch, not under it.
    _tmpfs(_inside(new_root, "/tmp"), limits.scratch_mb, "1777")
    _inside(new_root, HOME).mkdir()
    shown = [top for top in map(Path, SYSTEM) if top.is_dir() and not top.is_symlink()]
    shown += [path for path in sorted({p.resolve() for p in readable})
              if path.exists() and not _is_covered(path, shown)]
    if workdir != Path("/") and not any(_is_covered(workdir, [path]) or workdir in path.parents
                                        for path in shown):
        _tmpfs(_inside(new_root, workdir), limits.scratch_mb, "1777")  # empty, its own
    for top in map(Path, SYSTEM):
        if top.is_symlink():  # merged /usr: /bin -> usr/bin
            _inside(new_root, top).symlink_to(os.readlink(top))
    for path in shown:
        target = _inside(new_root, path)
        if path.is_dir():
            target.mkdir(parents=True, exist_ok=True)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.touch()
        _bind_read_only(path, target)
    _mount_proc(new_root)
    _mount_dev(new_root, limits)
    _inside(new_root, share).mkdir(parents=True, exist_ok=True)
    _run("mount", "--bind", str(share), str(_inside(new_root, share)))


def _mount_proc(new_root: Path) -> None:
    """A /proc of this PID namespace; its kernel tunables and triggers read-only."""
    proc = _inside(new_root, "/proc")
    proc.mkdir()
    _run("mount", "-t", "proc", "-o", "nosuid,nodev,noexec", "proc", str(proc))
    for tunable in ("sys", "sysrq-trigger", "irq", "bus"):
        if (proc / tunable).exists():
            _bind_read_only(proc / tunable, proc / tunable)


def _mount_dev(new_root: Path, limits: Limits) -> None:
    """A /dev of the harmless devices, bound from the host's (a user namespace may not
    create device files), and a private /dev/shm."""
    dev = _inside(new_root, "/dev")
    _tmpfs(dev, 1, "755")
    for name in DEVICES:
        if Path("/dev", name).exists():
            (dev / name).touch()
            _run("mount", "--bind", f"/dev/{name}", str(dev / name))
    _tmpfs(dev / "shm", limits.scratch_mb, "1777")
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"),
                         ("stdout", "/proc/self/fd/1"), ("stderr", "/proc/self/fd/2")):
        (dev / name).symlink_to(target)
    _make_read_only(dev)


def enter_root(new_root: Path) -> None:
    """Make `new_root` this namespace's / and drop the host's file system from it."""
    os.chdir(new_root)
    _run("pivot_root", ".", ".")
    _run("umount", "-l", ".")
    os.chdir("/")


def seal_root() -> None:
    """The skeleton of folders becomes read-only: in a user namespace the student's code
    has the same kernel uid as the folders' owner, so file modes alone do not stop it."""
    _make_read_only("/")


# --- inside: the first process and the student's process -----------------------------------

def _is_host_root() -> bool:
    """Root of the machine itself, not of a user namespace (whose uid_map is partial)."""
    with open("/proc/self/uid_map") as handle:
        return os.geteuid() == 0 and handle.read().split() == ["0", "0", "4294967295"]


def fresh_uid() -> int:
    """A uid no file and no other process has, so that limits per uid are exact."""
    return FIRST_FRESH_UID + secrets.randbelow(1 << 20)


def _set_limits(limits: Limits) -> None:
    mb = 1024 * 1024
    for which, value in ((resource.RLIMIT_AS, limits.memory_mb * mb),
                         (resource.RLIMIT_FSIZE, limits.file_mb * mb),
                         (resource.RLIMIT_NPROC, limits.processes),
                         (resource.RLIMIT_NOFILE, 1024),
                         (resource.RLIMIT_CORE, 0)):
        resource.setrlimit(which, (value, value))


def _no_new_privileges() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "sandbox: prctl(PR_SET_NO_NEW_PRIVS) failed")


def _become_student(uid: int | None, argv: list[str], env: dict[str, str],
                    workdir: Path, limits: Limits) -> None:
    """In the forked child: give up every privilege, then run the student's command."""
    os.chdir(workdir)
    if uid is not None:  # started as root: the fresh uid, no groups, no capabilities
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
    _set_limits(limits)
    _no_new_privileges()
    if uid is None:
        # A nested user namespace without a mapping: no capability over these mounts.
        argv = [shutil.which("unshare") or "unshare", "--user", "--", *argv]
    os.execvpe(argv[0], argv, env)


def _folder_size(folder: Path, most_entries: int) -> tuple[int, int]:
    """(bytes, entries) of the files and folders under `folder`; the count stops a little
    past `most_entries`, so that 300,000 empty folders cost no more than the limit does."""
    total, entries = 0, 0
    for dirpath, folders, files in os.walk(folder):
        entries += len(folders) + len(files)
        if entries > most_entries:
            break
        for name in files:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_size
            except OSError:
                pass
    return total, entries


def _stop(share: Path, why: str) -> None:
    """Record which limit stopped the sandbox, then exit: being the namespace's first
    process, its exit kills every process left inside."""
    try:
        (share / LIMIT_FILE).write_text(why + "\n")
    except OSError:
        pass
    print(f"sandbox: {why}", file=sys.stderr, flush=True)
    os._exit(137)


def supervise(child: int, share: Path, deadline: float, limits: Limits) -> int:
    """Reap processes until `child` exits; stop everything at a limit."""
    base_bytes, base_entries = _folder_size(share, limits.share_entries)
    while True:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return 1
            if pid == 0:
                break
            if pid == child:
                return os.waitstatus_to_exitcode(status)
        if time.time() > deadline:
            _stop(share, f"wall-clock limit: {limits.seconds:.0f} s")
        size, entries = _folder_size(share, base_entries + limits.share_entries)
        if size - base_bytes > limits.share_mb * 1024 * 1024:
            _stop(share, f"disk limit: more than {limits.share_mb} MB written")
        if entries - base_entries > limits.share_entries:
            _stop(share, f"file limit: more than {limits.share_entries} files and folders")
        time.sleep(0.2)


def clean_environment(extra: list[str]) -> dict[str, str]:
    env = {"PATH": os.pathsep.join([str(Path(sys.executable).parent), "/usr/local/bin",
                                    "/usr/bin", "/bin"]),
           "HOME": HOME, "TMPDIR": "/tmp", "LANG": "C.UTF-8"}
    for item in extra:
        name, _, value = item.partition("=")
        env[name] = value
    return env


def run_inside(args: argparse.Namespace, argv: list[str]) -> int:
    """As the namespaces' root and first process: build the root, start the student's
    command as an unprivileged child, and supervise it."""
    limits = Limits(**json.loads(args.limits))
    share, workdir, new_root = args.share.resolve(), Path.cwd().resolve(), args.root.resolve()
    uid = fresh_uid() if _is_host_root() else None
    for folder in args.cgroup:  # before anything else starts: every later process is counted
        (folder / "cgroup.procs").write_text("0")
    build_root(new_root, share, args.read, workdir, limits)
    if uid is not None:  # the student's uid must reach its home and the shared folder
        os.chown(_inside(new_root, HOME), uid, uid)
        for dirpath, _, files in os.walk(share):  # lchown: a link is not followed
            os.lchown(dirpath, uid, uid)
            for name in files:
                os.lchown(os.path.join(dirpath, name), uid, uid)
    enter_root(new_root)
    seal_root()
    env = clean_environment(args.env)
    # Jupyter interrupts a kernel by signalling its whole process group, this process
    # included: only the student's process may take the interrupt.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    child = os.fork()
    if child == 0:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        # Past the file-size limit a write fails with an error the code can report,
        # rather than a signal that kills the kernel without a word.
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        try:
            _become_student(uid, argv, env, workdir, limits)
        finally:
            os._exit(127)
    return supervise(child, share, args.deadline, limits)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--share", type=Path, required=True,
                        help="the one host folder the command may write")
    parser.add_argument("--root", type=Path, required=True,
                        help="an empty folder to build the sandbox's file system on")
    parser.add_argument("--read", type=Path, action="append", default=[],
                        help="a host path the command may read (Python's own are added)")
    parser.add_argument("--env", action="append", default=[], help="NAME=VALUE to pass")
    parser.add_argument("--network", action="store_true", help="keep the host's network")
    parser.add_argument("--cgroup", type=Path, action="append", default=[],
                        help="a control group folder to join (one per hierarchy)")
    parser.add_argument("--limits", default=json.dumps(asdict(Limits())),
                        help=argparse.SUPPRESS)
    parser.add_argument("--deadline", type=float, help=argparse.SUPPRESS)
    parser.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("argv", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    run = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
    if not run:
        parser.error("no command given after --")
    if not args.inside:
        limits = Limits(**json.loads(args.limits))
        line = command(args.share.resolve(), args.root.resolve(),
                       [*python_paths(), *args.read], run, dict(
                           item.partition("=")[::2] for item in args.env), limits,
                       args.network, tuple(args.cgroup))
        os.execvp(line[0], line)
    return run_inside(args, run)


if __name__ == "__main__":
    sys.exit(main())
