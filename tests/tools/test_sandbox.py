"""The grading sandbox, tried as a hostile student would, started as root and as an
ordinary user: what the code inside can see, write and reach, what it may use, and that
nothing it starts outlives it. Each case runs one small command in the sandbox (about half
a second); the notebook-level attacks are in test_grade.py."""

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tools.chapters import ROOT
from tools.grading import cgroups, sandbox

pytestmark = pytest.mark.skipif(not sandbox.available(),
                                reason="this machine allows no namespaces for the sandbox")
IS_ROOT = os.geteuid() == 0
SANDBOX = [sys.executable, str(ROOT / "tools" / "grading" / "sandbox.py")]
# Run as a user namespace's uid 1000: the sandbox then takes its ordinary user's road.
AS_ORDINARY_USER = ["unshare", "--user", "--map-user=1000", "--map-group=1000", "--"]

PROBE = r'''
import json, os, socket, subprocess, sys
facts = {"uid": os.getuid(), "euid": os.geteuid()}
status = dict(line.split(":", 1) for line in open("/proc/self/status"))
facts["caps"] = [status[k].strip() for k in ("CapInh", "CapPrm", "CapEff")]
facts["no_new_privs"] = status["NoNewPrivs"].strip()
def refused(action):
    try:
        action()
    except OSError:
        return True
    return False
facts["writes"] = {
    "printk_ratelimit": refused(lambda: open("/proc/sys/kernel/printk_ratelimit", "w").write("9")),
    "core_pattern": refused(lambda: open("/proc/sys/kernel/core_pattern", "a").close()),
    "sysrq": refused(lambda: open("/proc/sysrq-trigger", "a").close()),
    "dev": refused(lambda: open("/dev/bertbook-canary", "w").close()),
    "etc": refused(lambda: open("/etc/bertbook-canary", "w").close()),
    "root": refused(lambda: open("/bertbook-canary", "w").close()),
    "python": refused(lambda: open(os.path.join(sys.prefix, "bertbook-canary"), "w").close()),
}
facts["sys"] = os.path.exists("/sys/kernel")
facts["dev"] = sorted(os.listdir("/dev"))
facts["env"] = sorted(os.environ)
facts["pids"] = len([p for p in os.listdir("/proc") if p.isdigit()])
facts["namespaces"] = {n: os.readlink(f"/proc/self/ns/{n}")
                      for n in ("ipc", "net", "pid", "mnt", "uts")}
facts["visible"] = {p: os.path.exists(p) for p in sys.argv[2:]}
facts["git_show"] = subprocess.run(["git", "-C", sys.argv[1], "show", "HEAD:README.md"],
                                   capture_output=True).returncode
port = int(os.environ["PORT"])
facts["network"] = not refused(lambda: socket.create_connection(("127.0.0.1", port), timeout=2))
try:
    bytearray(6 * 1024 ** 3)
    facts["memory_limit"] = False
except MemoryError:
    facts["memory_limit"] = True
try:
    with open("/tmp/big", "wb") as handle:
        for _ in range(300):
            handle.write(b"x" * 1024 * 1024)
    facts["file_limit"] = False
except OSError:
    facts["file_limit"] = True
os.remove("/tmp/big")
print(json.dumps(facts))
'''


@pytest.fixture(scope="module")
def listener():
    """A TCP server on the host's loopback that code in the sandbox must not reach."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    yield server.getsockname()[1]
    server.close()


def _sandboxed(tmp_path: Path, argv: list[str], *extra: str, prefix: list[str] = (),
               timeout: float = 60) -> subprocess.CompletedProcess:
    share, root = tmp_path / "share", tmp_path / "root"
    share.mkdir(exist_ok=True)
    root.mkdir(exist_ok=True)
    os.chmod(tmp_path, 0o755)
    line = [*prefix, *SANDBOX, "--share", str(share), "--root", str(root), *extra, "--", *argv]
    return subprocess.run(line, capture_output=True, text=True, timeout=timeout, cwd=tmp_path)


def _probe(tmp_path, port, prefix=()):
    secret = tmp_path / "instructor-secret.txt"
    secret.write_text("the answers")
    script = tmp_path / "share" / "probe.py"
    script.parent.mkdir()
    script.write_text(PROBE)
    argv = [sys.executable, str(script), str(ROOT), str(ROOT / ".git"),
            str(ROOT / "chapters"), str(secret), str(Path.home() / ".bashrc")]
    result = _sandboxed(tmp_path, argv, "--env", f"PORT={port}", prefix=prefix)
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout.splitlines()[-1])


def _host_namespaces() -> dict[str, str]:
    return {n: os.readlink(f"/proc/self/ns/{n}") for n in ("ipc", "net", "pid", "mnt", "uts")}


ROADS = [pytest.param([], id="as-root" if IS_ROOT else "as-this-user"),
         pytest.param(AS_ORDINARY_USER, id="as-an-ordinary-user")]


@pytest.mark.parametrize("prefix", ROADS)
def test_the_code_inside_has_no_power_and_sees_nothing_of_the_host(tmp_path, listener,
                                                                   prefix):
    facts = _probe(tmp_path, listener, prefix)
    assert facts["uid"] != 0 and facts["euid"] != 0
    assert facts["caps"] == ["0000000000000000"] * 3
    assert facts["no_new_privs"] == "1"
    assert all(facts["writes"].values()), facts["writes"]
    assert not facts["sys"]
    devices = [name for name in sandbox.DEVICES if Path("/dev", name).exists()]
    assert facts["dev"] == sorted([*devices, "shm", "fd", "stdin", "stdout", "stderr"])
    assert set(facts["env"]) <= {"PATH", "HOME", "TMPDIR", "LANG", "PORT"}
    assert facts["pids"] <= 3  # the sandbox's first process, the probe, git's child
    host = _host_namespaces()
    assert all(facts["namespaces"][n] != host[n] for n in host), facts["namespaces"]
    assert not any(facts["visible"].values()), facts["visible"]
    assert facts["git_show"] != 0
    assert not facts["network"]
    assert facts["memory_limit"] and facts["file_limit"]


@pytest.mark.skipif(not IS_ROOT, reason="a fresh uid per sandbox needs root")
def test_as_root_processes_are_limited_per_sandbox(tmp_path):
    forks = ("import os, time\nn = 0\ntry:\n    while n < 2000:\n        if os.fork() == 0:\n"
             "            time.sleep(20)\n            os._exit(0)\n        n += 1\n"
             "except OSError:\n    pass\nprint(n)\n")
    result = _sandboxed(tmp_path, [sys.executable, "-c", forks])
    assert int(result.stdout.split()[-1]) < sandbox.Limits().processes


def test_nothing_started_inside_outlives_the_sandbox(tmp_path, processes_running):
    """A daemon that clears its parent-death signal, leaves the session and holds the
    output pipes open still dies with the sandbox, and the caller is not held."""
    daemon = ("import ctypes, os\nif os.fork() == 0:\n    os.setsid()\n"
              "    ctypes.CDLL(None).prctl(1, 0, 0, 0, 0)\n"
              "    os.execv('/bin/sleep', ['sleep', '4242.5'])\n")
    started = time.monotonic()
    _sandboxed(tmp_path, [sys.executable, "-c", daemon], timeout=30)
    assert time.monotonic() - started < 20
    assert not processes_running(b"4242.5")


def test_the_wall_clock_limit_stops_everything_and_says_so(tmp_path):
    limits = json.dumps({**sandbox.Limits().__dict__, "seconds": 2})
    started = time.monotonic()
    result = _sandboxed(tmp_path, ["sleep", "60"], "--limits", limits)
    assert time.monotonic() - started < 15
    assert result.returncode != 0
    assert "wall-clock limit" in (tmp_path / "share" / sandbox.LIMIT_FILE).read_text()


def test_filling_the_shared_folder_stops_everything_and_says_so(tmp_path):
    limits = json.dumps({**sandbox.Limits().__dict__, "share_mb": 8})
    writer = ("import time\nwith open('fill', 'wb') as f:\n    for _ in range(200):\n"
              "        f.write(b'x' * 1024 * 1024)\n        f.flush()\n        time.sleep(0.02)\n")
    result = _sandboxed(tmp_path, [sys.executable, "-c", writer.replace(
        "'fill'", repr(str(tmp_path / "share" / "fill")))], "--limits", limits)
    assert result.returncode != 0
    assert "disk limit" in (tmp_path / "share" / sandbox.LIMIT_FILE).read_text()
    assert (tmp_path / "share" / "fill").stat().st_size < 100 * 1024 * 1024


def test_a_readable_folder_under_tmp_is_not_hidden_by_the_scratch(tmp_path):
    """A checkout cloned into /tmp (as CI clones one) stays readable inside."""
    library = tmp_path / "library"
    library.mkdir()
    (library / "module.py").write_text("ANSWER = 42\n")
    result = _sandboxed(tmp_path, [sys.executable, "-c",
                                   f"print(open({str(library / 'module.py')!r}).read())"],
                        "--read", str(library))
    assert result.returncode == 0, result.stderr[-2000:]
    assert "ANSWER = 42" in result.stdout


def test_many_folders_in_the_shared_folder_stop_everything_and_say_so(tmp_path):
    limits = json.dumps({**sandbox.Limits().__dict__, "share_entries": 500})
    maker = ("import os\nfor n in range(300_000):\n"
             f"    os.mkdir(os.path.join({str(tmp_path / 'share')!r}, str(n)))\n")
    started = time.monotonic()
    result = _sandboxed(tmp_path, [sys.executable, "-c", maker], "--limits", limits)
    assert time.monotonic() - started < 30
    assert result.returncode != 0
    assert "file limit" in (tmp_path / "share" / sandbox.LIMIT_FILE).read_text()


def _control_groups_work() -> bool:
    group = cgroups.ControlGroup.create(memory_mb=64, processes=8, cpus=1.0)
    if group:
        group.remove()
    return group is not None


ROOT_WITH_CGROUPS = pytest.mark.skipif(not IS_ROOT or not _control_groups_work(),
                                       reason="control groups need root and a writable hierarchy")


@pytest.fixture
def control_group():
    group = cgroups.ControlGroup.create(memory_mb=600, processes=40, cpus=1.0)
    yield group
    group.remove()


@ROOT_WITH_CGROUPS
def test_forked_children_share_one_memory_limit(tmp_path, control_group):
    """Six children of 200 MB each fit every per-process limit, not the sandbox's 600 MB."""
    hogs = ("import os, time\nkids = []\nfor _ in range(6):\n    pid = os.fork()\n"
            "    if pid == 0:\n        block = bytearray(200 * 1024 * 1024)\n"
            "        time.sleep(2)\n        os._exit(0)\n    kids.append(pid)\n"
            "print(sum(os.waitstatus_to_exitcode(os.waitpid(k, 0)[1]) == -9 for k in kids))\n")
    cgroup_flags = [flag for folder in control_group.folders for flag in ("--cgroup", folder)]
    result = _sandboxed(tmp_path, [sys.executable, "-c", hogs], *map(str, cgroup_flags))
    assert int(result.stdout.split()[-1]) >= 2, result.stderr[-2000:]
    assert control_group.memory_kills() >= 2


@ROOT_WITH_CGROUPS
def test_removing_a_control_group_kills_what_is_left_in_it(control_group):
    sleeper = subprocess.Popen(["sleep", "4141.5"],
                               preexec_fn=lambda: (control_group.folders[0] / "cgroup.procs"
                                                   ).write_text("0"))
    control_group.remove()
    assert sleeper.wait(timeout=10) == -9
    assert not any(folder.exists() for folder in control_group.folders)
