"""Data files that installed packages carry, and the cache of text derived from them.

The book's corpora and task data come inside pip packages (data/README.md names them), so a
chapter needs no download: it finds a file inside a package without importing it (some
of those packages would fail to import without dependencies the book does not need).
Text derived from them (cleaned articles, extracted links) is kept as JSON in a
git-ignored cache, so each machine parses the raw files once.
"""

from __future__ import annotations

import importlib.util
import json
import os
import warnings
from collections.abc import Callable
from pathlib import Path

from bertlib.errors import DataUnavailable
from bertlib.files import write_atomically

__all__ = ["package_file", "cache_dir", "cached_rows"]


PACKAGE_DATA_ENV_VAR = "BERT_BOOK_PACKAGE_DATA"


def package_file(package: str, relative_path: str, install: str) -> Path:
    """Path of a file shipped inside an installed package, found without importing it.
    Where $BERT_BOOK_PACKAGE_DATA names a folder holding <package>/<relative_path> (the
    bundle `make device-bundle` carries to a machine with no package registry), that copy
    is used instead."""
    bundled = Path(os.environ.get(PACKAGE_DATA_ENV_VAR, "")) / package / relative_path
    if os.environ.get(PACKAGE_DATA_ENV_VAR) and bundled.is_file():
        return bundled
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise DataUnavailable(
            f"the package {package!r}, which carries {relative_path}, is not installed. "
            f"Install it with:  {install}"
        )
    path = Path(list(spec.submodule_search_locations)[0]) / relative_path
    if not path.is_file():
        raise DataUnavailable(
            f"{relative_path} is missing from the installed {package!r} ({path}). "
            f"Reinstall it with:  {install} --force-reinstall"
        )
    return path


def cache_dir() -> Path:
    """Where derived text is kept: $BERTLIB_CACHE, the checkout's data/cache (git ignores
    it), or ~/.cache/bertlib when bertbook was installed with pip."""
    if os.environ.get("BERTLIB_CACHE"):
        folder = Path(os.environ["BERTLIB_CACHE"])
    else:
        checkout = Path(__file__).resolve().parents[1]
        in_checkout = (checkout / "data" / "README.md").is_file()
        folder = checkout / "data" / "cache" if in_checkout else Path.home() / ".cache" / "bertlib"
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:  # read-only (a grading sandbox mounts the checkout so): build, not keep
        pass
    return folder


def _read_rows(path: Path, fields: set[str]) -> tuple[list[dict] | None, str]:
    """(the rows, "") when the file holds rows with exactly `fields`, else (None, what is
    wrong with it)."""
    try:
        rows = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        return None, f"cannot be read ({type(error).__name__})"
    if isinstance(rows, list) and rows and all(
            isinstance(row, dict) and set(row) == fields for row in rows):
        return rows, ""
    return None, "holds no rows of the expected shape"


def cached_rows(path: Path, build: Callable[[], list[dict]], fields: set[str]) -> list[dict]:
    """The rows (dicts with exactly `fields`) kept as JSON at `path`, or build() written
    there first. A file that cannot be read, is not JSON, is empty or has rows of another
    shape (a disk filled mid-write, a hand edit) is named in a warning and rebuilt."""
    if path.is_file():
        rows, problem = _read_rows(path, fields)
        if rows is not None:
            return rows
        warnings.warn(f"the cache file {path} {problem}; rebuilding it", stacklevel=2)
    rows = build()
    text = json.dumps(rows, ensure_ascii=False)
    try:
        write_atomically(path, lambda temporary: temporary.write_text(text, encoding="utf-8"),
                         OSError)
    except OSError:  # a read-only checkout (a grading sandbox): the rows serve all the same
        pass
    return rows
