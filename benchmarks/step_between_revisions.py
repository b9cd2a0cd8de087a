"""Did a change slow bertlib's pretraining step? Two git revisions, side by side.

Each revision is checked out into a temporary worktree. Child processes, one revision at a
time and alternating (A, B, B, A, A, B, ...), each time the same training step of
BertForPreTraining (the small config of benchmarks/pretraining_step.py: 4 layers, width
256, batch 32 x 128, fp32) with the revision's own bertlib, and print the median of their
steps. The script reports the median over the children of each revision and the ratio.

    python benchmarks/step_between_revisions.py 353776f HEAD       # about 3 minutes
    python benchmarks/step_between_revisions.py A B --runs 4 --steps 5
"""

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = """
import json, statistics, sys, time, torch
sys.path.insert(0, {benchmarks!r})
from pretraining_step import masked_batch
from bertlib.core.config import BertConfig
from bertlib.pretraining.models import BertForPreTraining
from bertbook.measure import training_step
torch.set_num_threads({threads})
torch.manual_seed(0)
config = BertConfig(num_hidden_layers=4, hidden_size=256, num_attention_heads=4,
                    intermediate_size=1024)
step = training_step(BertForPreTraining(config), masked_batch(32, 128, config.vocab_size))
step()
seconds = []
for _ in range({steps}):
    started = time.perf_counter()
    step()
    seconds.append(time.perf_counter() - started)
import bertlib
print(json.dumps({{"median": statistics.median(seconds), "bertlib": bertlib.__file__}}))
"""


def worktree(revision: str, folder: Path) -> Path:
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "--quiet",
                    str(folder), revision], check=True)
    return folder


def one_run(tree: Path, steps: int, threads: int) -> float:
    """A child process timing `steps` steps with the bertlib of the worktree `tree`."""
    code = CHILD.format(benchmarks=str(tree / "benchmarks"), steps=steps, threads=threads)
    done = subprocess.run([sys.executable, "-c", code], cwd=tree, capture_output=True,
                          text=True, env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin"})
    if done.returncode != 0:
        raise SystemExit(f"the run in {tree} failed:\n{done.stderr}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    if not result["bertlib"].startswith(str(tree)):
        raise SystemExit(f"the child imported {result['bertlib']}, not {tree}'s bertlib")
    return result["median"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before")
    parser.add_argument("after")
    parser.add_argument("--runs", type=int, default=6, help="child processes per revision")
    parser.add_argument("--steps", type=int, default=7, help="timed steps per child")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    medians: dict[str, list[float]] = {args.before: [], args.after: []}
    with tempfile.TemporaryDirectory() as scratch:
        trees = {name: worktree(name, Path(scratch) / f"tree{i}")
                 for i, name in enumerate(medians)}
        try:
            for run in range(args.runs):
                order = list(medians) if run % 2 == 0 else list(medians)[::-1]
                for name in order:
                    medians[name].append(one_run(trees[name], args.steps, args.threads))
        finally:
            for tree in trees.values():
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force",
                                str(tree)], check=False)
    before, after = (statistics.median(medians[name]) for name in medians)
    for name, values in medians.items():
        print(f"{name}: median step {statistics.median(values) * 1000:.0f} ms over "
              f"{len(values)} runs (runs' medians {min(values) * 1000:.0f}-"
              f"{max(values) * 1000:.0f} ms)")
    print(f"{args.after} / {args.before}: {after / before:.3f}x the time per step")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
