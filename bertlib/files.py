"""Saving files whole: a crash, a full disk or a second writer never leaves half a save.

Every save in bertlib goes through here. One file is written under a temporary name beside
its target and renamed onto it (a rename inside one folder is atomic), so a reader finds
the old file or the new one, never a mix. Files that belong together (a checkpoint's
config.json and weights, a tokenizer's three files) are written into a staging folder and
moved in while the folder's lock is held; readers of such a folder take the lock too
(`reading_folder`), so they never see one save's config beside another's weights.

A failed save raises the caller's error class (each part of bertlib has its own, so that
`except CheckpointError` still catches a checkpoint that could not be written), saying why
and how much space is left, and the previous files stay as they were.

How this file is made: written by hand.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

try:
    import fcntl  # POSIX: Linux, macOS, Colab
except ImportError:  # Windows: saves stay atomic, only the lock between processes is lost
    fcntl = None

# writing_together and reading_folder are the library's own plumbing (checkpoint and
# tokenizer folders); write_atomically is as useful to anyone saving a file.
__all__ = []  # write_atomically is the library's own tool, not its surface

STAGING_PREFIX = ".saving-"


def write_atomically(path: str | Path, write: Callable[[Path], None],
                     error: type[Exception]) -> Path:
    """Call `write(temporary)` with a path beside `path`, then rename it onto `path`.

    If writing fails (torch reports a full disk as a RuntimeError, the OS as an OSError),
    the temporary file is removed, `error` is raised, and the file at `path` is untouched.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        write(temporary)
        temporary.replace(path)
    except (OSError, RuntimeError) as failure:
        temporary.unlink(missing_ok=True)
        raise _failed(error, path, failure) from None
    return path


@contextlib.contextmanager
def writing_together(folder: str | Path, error: type[Exception]) -> Iterator[Path]:
    """Yield a staging folder inside `folder`; what the block writes there is moved into
    `folder` when the block ends, all under the folder's lock. An error in the block
    moves nothing. Staging folders that killed saves left behind are removed first."""
    folder = _writable(Path(folder), error)
    with _folder_lock(folder, exclusive=True):
        staging = folder / f"{STAGING_PREFIX}{os.getpid()}-{secrets.token_hex(4)}"
        staging.mkdir()
        try:
            yield staging
            for written in sorted(staging.iterdir()):
                os.replace(written, folder / written.name)
        except (OSError, RuntimeError) as failure:
            raise _failed(error, folder, failure) from None
        finally:
            shutil.rmtree(staging, ignore_errors=True)


@contextlib.contextmanager
def reading_folder(folder: str | Path) -> Iterator[None]:
    """Hold the folder's lock for reading: a save under way finishes first. A folder no
    bertlib save has written (a download, a read-only place) is read without a lock."""
    with _folder_lock(Path(folder), exclusive=False):
        yield


def _failed(error: type[Exception], target: Path, failure: Exception) -> Exception:
    reason = getattr(failure, "strerror", None) or str(failure).splitlines()[0][:80]
    place = target if target.is_dir() else target.parent
    try:
        free = f"{shutil.disk_usage(place).free / 2**20:,.0f} MiB are free there"
    except OSError:
        free = "the free space there is unknown"
    return error(f"could not write {target} ({reason}); {free}: if no space is left, free "
                 "some. What was saved there before is intact.")


@contextlib.contextmanager
def _folder_lock(folder: Path, exclusive: bool) -> Iterator[None]:
    """Hold the folder's .lock: one writer at a time, and readers wait for a writer."""
    lock = folder / ".lock"
    if fcntl is None or not (exclusive or lock.is_file()):
        yield
        return
    with open(lock, "a" if exclusive else "r") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _writable(folder: Path, error: type[Exception]) -> Path:
    """The folder, made if need be and cleared of staging folders that dead saves left; a
    file in the way or a place that cannot be written raises `error`."""
    if folder.exists() and not folder.is_dir():
        raise error(f"{folder} is a file; a save writes a folder there: give the path of a "
                    "folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as failure:
        raise error(f"cannot make the folder {folder} ({failure.strerror}); choose a place "
                    "you can write to") from None
    if not os.access(folder, os.W_OK):
        raise error(f"cannot write in {folder}; choose a folder you can write to")
    for left in folder.glob(f"{STAGING_PREFIX}*"):
        if not _process_alive(int(left.name.removeprefix(STAGING_PREFIX).split("-")[0])):
            shutil.rmtree(left, ignore_errors=True)
    return folder


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return True
