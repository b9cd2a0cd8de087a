"""bertlib installs as a library of its own: its wheel holds no book code (that it imports
none is tests/bertlib/test_library.py's check)."""

import shutil
import subprocess
import sys
import zipfile

import pytest

from tools.chapters import ROOT

pytestmark = pytest.mark.slow  # a wheel built by pip


@pytest.fixture(scope="module")
def library_wheel(tmp_path_factory):
    """Built from a copy of what the distribution is made of: setuptools reuses a build/
    folder, which could hold modules the checkout no longer has."""
    source, out = tmp_path_factory.mktemp("source"), tmp_path_factory.mktemp("wheel")
    for name in ("pyproject.toml", "LICENSE"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(ROOT / "bertlib", source / "bertlib",
                    ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                    "--no-build-isolation", "-w", str(out), str(source)],
                   check=True, capture_output=True)
    (wheel,) = out.glob("bertlib-*.whl")
    return wheel


def test_the_wheel_holds_bertlib_and_nothing_of_the_book(library_wheel):
    names = zipfile.ZipFile(library_wheel).namelist()
    packages = {name.split("/")[0] for name in names if not name.split("/")[0].endswith(
        ".dist-info")}
    assert packages == {"bertlib"}
    assert "bertlib/training/distributed.py" in names


def test_the_wheel_carries_its_licence_its_own_page_and_its_extras(library_wheel):
    wheel = zipfile.ZipFile(library_wheel)
    names = wheel.namelist()
    assert any(name.endswith(".dist-info/licenses/LICENSE") for name in names)
    metadata = wheel.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert "License-Expression: MIT" in metadata
    page = metadata.split("\n\n", 1)[1]
    assert page.startswith("# bertlib") and "## Chapters" not in page
    assert {"Provides-Extra: transformers", "Provides-Extra: peft",
            "Provides-Extra: onnx"} <= set(metadata.splitlines())
