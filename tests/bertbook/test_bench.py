"""The benchmark script runs end to end and writes its table, plot and numbers (the real
measurement is `make bench`; this only keeps the script from rotting)."""

import json
import os
import subprocess
import sys

import pytest
import torch

pytestmark = pytest.mark.slow  # the benchmark scripts, in subprocesses


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


def _gpu_benchmark(root):
    """benchmarks/gpu_bert_base.py as a module (it imports its neighbour pretraining_step)."""
    sys.path.insert(0, str(root / "benchmarks"))
    try:
        import gpu_bert_base
    finally:
        sys.path.remove(str(root / "benchmarks"))
    return gpu_bert_base


def test_the_gpu_benchmark_reports_the_attention_kernel_that_ran(root):
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from bertlib.core.config import BertConfig
    from bertlib.core.encoder import BertModel

    benchmark = _gpu_benchmark(root)
    model = BertModel(BertConfig.preset("bert-tiny", vocab_size=100)).eval()
    ids = torch.randint(5, 100, (2, 16))
    assert benchmark.attention_kernels(lambda: model(ids)) == ["flash"]

    def unfused():
        with sdpa_kernel(SDPBackend.MATH):
            model(ids)

    assert benchmark.attention_kernels(unfused) == ["math (unfused)"]


def test_each_lever_row_adds_its_lever_to_the_batch(root):
    benchmark = _gpu_benchmark(root)
    first, slots, no_mask = (benchmark.lever_batch(lever, 4, 32, 2000) for lever in range(3))
    assert "masked_positions" not in first and "attention_mask" in first
    assert slots["masked_positions"].shape == (4, 5) and "attention_mask" in slots
    assert "attention_mask" not in no_mask
    assert benchmark.lever_batch(5, 4, 32, 2000)["input_ids"].shape == (8, 32)
    positions = slots["masked_positions"]
    assert bool((positions > 0).all() and (positions < 31).all())  # never [CLS] or [SEP]
    assert bool((slots["labels"].gather(1, positions) != -100).all())


def test_the_levers_dry_run_writes_every_row_and_the_breakdown(root, tmp_path):
    out = tmp_path / "levers.json"
    done = subprocess.run([sys.executable, str(root / "benchmarks" / "gpu_bert_base.py"),
                           "--dry-run", "--json", str(out)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(out.read_text())
    assert [row["lever"] for row in found["rows"]] == list(_gpu_benchmark(root).LEVERS)
    assert all(row["tokens_per_second"] > 0 for row in found["rows"])
    assert found["time_breakdown"] and found["best"] in _gpu_benchmark(root).LEVERS


@pytest.mark.parametrize("script", ["benchmarks/gpu_bert_base.py", "tools/gpu_check.py"])
def test_gpu_scripts_refuse_cleanly_without_cuda(root, script):
    """`make gpu-check` and the GPU benchmark say there is nothing to measure, exit 2."""
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    done = subprocess.run([sys.executable, str(root / script)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and "no CUDA device here" in done.stdout
    assert "Traceback" not in done.stderr


def test_the_gpu_check_executes_a_chapter_and_reports_its_failures(root, tmp_path):
    """The chapters part of `make gpu-check`, on the CPU at the smoke size: one chapter that
    runs, and one whose cell fails, reported with the error instead of stopping the check."""
    from tools import gpu_check

    before = dict(os.environ)
    ran = gpu_check.chapter_check(root / "chapters" / "03_attention.py", "smoke", 0.5, 300)
    assert ran["ok"] is True and ran["minutes"] >= 0 and ran["peak_gib"] is None  # no GPU
    assert dict(os.environ) == before, "the chapters' settings must not leak into this process"
    broken = tmp_path / "99_broken.py"
    broken.write_text("# %%\nprint('before')\n\n# %%\nraise RuntimeError('out of memory')\n")
    failed = gpu_check.chapter_check(broken, "smoke", 0.5, 60)
    assert failed["ok"] is False and failed["error"] == "RuntimeError: out of memory"


def test_the_gpu_check_dry_run_runs_every_part_on_the_cpu(root, tmp_path):
    """`make gpu-check`'s dry run: each part on the CPU at the smoke size, one chapter run as
    a plain script, the summary written; what a lent GPU machine will run, tried here."""
    done = subprocess.run([sys.executable, str(root / "tools" / "gpu_check.py"), "--dry-run",
                           "--chapters", "03", "--skip", "hub", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=900,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["ok"] is True and "hub" not in summary
    assert summary["resume"]["max_loss_difference_after_resume"] == 0.0
    assert summary["chapters"]["03_attention"]["ok"] is True
    assert len(summary["levers"]["rows"]) == 6 and summary["pretrain"]["steps"] >= 20
    assert summary["pretrain"]["held_out"]["mlm_accuracy"] > 0


def test_the_plateau_levers_script_writes_curves_and_exits(root, tmp_path):
    out = tmp_path / "levers.json"
    done = subprocess.run([sys.executable, str(root / "benchmarks" / "plateau_levers.py"),
                           "--steps", "4", "--jobs", "1", "--only", "mask 40%",
                           "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    (run,) = json.loads(out.read_text())["runs"]
    assert run["lever"] == "mask 40%" and run["settings"]["mask_probability"] == 0.4
    assert [point["step"] for point in run["curve"]] == [1, 2, 3, 4]
    assert run["unigram_loss"] > 0 and run["steps_to_leave_plateau"] is None


def test_the_shipped_lever_results_name_every_lever(root):
    sys.path.insert(0, str(root / "benchmarks"))
    try:
        import plateau_levers
    finally:
        sys.path.remove(str(root / "benchmarks"))
    shipped = json.loads(plateau_levers.RESULTS.read_text())
    assert [run["lever"] for run in shipped["runs"]] == list(plateau_levers.LEVERS)
    assert all(run["curve"][-1]["step"] == run["settings"]["steps"] for run in shipped["runs"])


def test_the_mlm_budget_script_compares_each_kept_checkpoint_with_scratch(root, tmp_path):
    out = tmp_path / "budget.json"
    done = subprocess.run([sys.executable, str(root / "benchmarks" / "mlm_budget.py"),
                           "--steps", "4", "--out", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    recipes = json.loads(out.read_text())["recipes"]
    assert [r["settings"]["mask_probability"] for r in recipes] == [0.15, 0.4]
    for recipe in recipes:
        assert [row["step"] for row in recipe["budgets"]] == [1, 4]
        assert all(len(row["scores"]) == 6 for row in recipe["budgets"])
        assert len(recipe["scratch"]["scores"]) == 6


def test_the_attention_script_measures_random_weights_and_every_kept_step(root, tmp_path):
    out = tmp_path / "attention.json"
    done = subprocess.run([sys.executable, str(root / "benchmarks" / "attention_structure.py"),
                           "--steps", "4", "--out", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    runs = json.loads(out.read_text())["runs"]
    assert [run["causal"] for run in runs] == [False, True]
    for run in runs:
        assert [point["step"] for point in run["points"]] == [0, 1, 2, 3, 4]
        random_weights = run["points"][0]["layers"]
        assert len(random_weights) == 2  # bert-tiny's layers
        # random weights spread attention almost evenly over what each query may see
        assert all(0.95 < layer["entropy"] <= 1.0 + 1e-6 for layer in random_weights)


def test_the_shipped_attention_results_cover_each_run_to_its_end(root):
    sys.path.insert(0, str(root / "benchmarks"))
    try:
        import attention_structure
    finally:
        sys.path.remove(str(root / "benchmarks"))
    shipped = json.loads(attention_structure.RESULTS.read_text())
    assert [run["run"] for run in shipped["runs"]] == list(attention_structure.RUNS)
    for run in shipped["runs"]:
        assert run["points"][-1]["step"] == run["settings"]["steps"]


def test_the_quick_serving_benchmark_writes_its_table(root, tmp_path):
    done = subprocess.run([sys.executable, str(root / "benchmarks" / "serving.py"), "--quick",
                           "--out", str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    table = (tmp_path / "serving.md").read_text()
    assert "| runtime | 1 x 16 | dev accuracy |" in table and "| bertlib fused int8 |" in table
    results = json.loads((tmp_path / "serving.json").read_text())
    (row,) = results["shapes"]
    assert set(row["seconds"]) == {"eager", "compiled", "onnxruntime", "bertlib fused",
                                   "bertlib fused int8", "transformers fused"}
    assert all(seconds > 0 for seconds in row["seconds"].values())
    assert row["largest_logit_gap"]["bertlib fused"] < 1e-3
    assert set(results["dev_accuracy"]) == {"eager", "bertlib fused", "bertlib fused int8"}


def test_the_readme_shows_the_committed_serving_table(root):
    readme = (root / "README.md").read_text()
    shown = readme.split("<!-- serving:start -->\n")[1].split("\n<!-- serving:end -->")[0]
    assert shown == (root / "benchmarks" / "results" / "serving.md").read_text().strip(), (
        "copy benchmarks/results/serving.md into the README after `python "
        "benchmarks/serving.py`")


def test_the_library_page_shows_the_committed_run_times(root):
    page = (root / "bertlib" / "README.md").read_text()
    shown = page.split("<!-- times:start -->\n")[1].split("\n<!-- times:end -->")[0]
    assert shown == (root / "benchmarks" / "results" / "library_times.md").read_text().strip(), (
        "copy benchmarks/results/library_times.md into bertlib/README.md after `python "
        "benchmarks/library_times.py`")
