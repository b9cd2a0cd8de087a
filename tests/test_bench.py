"""The benchmark script runs end to end and writes its table, plot and numbers (the real
measurement is `make bench`; this only keeps the script from rotting)."""

import json
import subprocess
import sys


def test_the_quick_benchmark_writes_its_table(root, tmp_path):
    done = subprocess.run([sys.executable, str(root / "benchmarks" / "pretraining_step.py"),
                           "--quick", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    table = (tmp_path / "pretraining_step.md").read_text()
    assert "| tiny | fp32 | 8 x 64 |" in table
    (row,) = json.loads((tmp_path / "pretraining_step.json").read_text())
    assert row["bertlib_tok_s"] > 0 and row["transformers_tok_s"] > 0
    assert row["bertlib_mib"] > 0 and row["transformers_mib"] > 0
    assert (tmp_path / "pretraining_step.png").stat().st_size > 1000
