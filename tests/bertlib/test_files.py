"""Saving whole: one helper for every save, and what it promises when a save fails."""

import ast
import os
import subprocess
import sys

import pytest

from bertlib.errors import CheckpointError, TokenizerError
from bertlib.files import reading_folder, write_atomically, writing_together
from tools.chapters import ROOT


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    target = tmp_path / "state.json"
    target.write_text("old")

    def fails(path):
        path.write_text("half")
        raise OSError(28, "No space left on device")

    with pytest.raises(CheckpointError, match=r"No space left on device.*MiB are free there"):
        write_atomically(target, fails, CheckpointError)
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]


def test_files_written_together_all_arrive_or_none_do(tmp_path):
    with writing_together(tmp_path, TokenizerError) as staging:
        (staging / "a.txt").write_text("1")
        (staging / "b.txt").write_text("1")
    with pytest.raises(KeyError), writing_together(tmp_path, TokenizerError) as staging:
        (staging / "a.txt").write_text("2")
        raise KeyError("the save failed half-way")
    assert {p.name: p.read_text() for p in tmp_path.glob("*.txt")} == {"a.txt": "1", "b.txt": "1"}
    assert not list(tmp_path.glob(".saving-*"))


def test_a_staging_folder_left_by_a_dead_save_is_cleared(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    (tmp_path / f".saving-{dead}-abcd").mkdir()
    (tmp_path / f".saving-{os.getpid()}-live").mkdir()  # a save of this process, under way
    with writing_together(tmp_path, CheckpointError):
        pass
    assert [p.name for p in tmp_path.glob(".saving-*")] == [f".saving-{os.getpid()}-live"]


def test_a_file_in_the_way_is_named_in_the_callers_error(tmp_path):
    (tmp_path / "taken").write_text("")
    with pytest.raises(TokenizerError, match="taken is a file"):
        with writing_together(tmp_path / "taken", TokenizerError):
            pass


def test_reading_an_unlocked_folder_needs_no_lock_file(tmp_path):
    with reading_folder(tmp_path):
        pass
    assert not (tmp_path / ".lock").exists()


def test_only_the_helper_renames_files_in_the_library():
    """Every save goes through bertlib.files: a rename anywhere else is a second
    write-then-rename with its own guarantees."""
    renames = []
    for path in (ROOT / "bertlib").rglob("*.py"):
        if path.name == "files.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in ("replace", "rename")
                    and (len(node.args) == 1 or ast.unparse(node.func) == "os.replace")):
                renames.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert renames == []
