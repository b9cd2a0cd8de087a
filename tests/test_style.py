"""Code is read by learners: the library, tools, tests and chapter sources lint clean."""

import subprocess
import sys

from tools.chapters import ROOT


def test_ruff_is_clean():
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "."], cwd=ROOT,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
