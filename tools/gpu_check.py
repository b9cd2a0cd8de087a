"""`make gpu-check`: what only a CUDA machine can show, in a few minutes, as one JSON summary.

* **resume**: pretraining at the `gpu` size's model shape on the offline Wikipedia sample,
  twice without a break and once killed after its mid-run checkpoint and resumed (the same
  vocabulary for all), on repeatable kernels; the losses after the checkpoint must be equal.
* **benchmark**: benchmarks/gpu_bert_base.py (tokens/s, TFLOP/s, MFU, attention kernel,
  peak memory).
* **ddp**: `python -m bertbook.ddp` under torchrun on every visible GPU (NCCL), or two
  processes over gloo where there is one GPU.
* **chapters**: every chapter executed at the `gpu` size with its training cut to
  BERT_BOOK_STEPS (default 0.02 of each length): whether it ran, its minutes, its peak GPU
  memory. A chapter that needs data from the network on a machine without it is reported
  as skipped, with the reason.

Without CUDA it says so and exits with status 2; `--allow-cpu` runs the same checks at the
smoke size on the CPU, to try the script itself.

    python tools/gpu_check.py [--steps 300] [--step-scale 0.02] [--chapters 03 06]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: the repository's tools package
    sys.path.insert(0, str(ROOT))
RESUME_TOLERANCE = 1e-6  # the runs use deterministic kernels: resume must be exact


def pretraining_settings(size: str, steps: int) -> dict:
    """The size's model and batch, on the offline corpus, with a checkpoint halfway."""
    from bertbook.pretrain import SIZES

    return {**SIZES[size], "corpus": "wikipedia", "articles": None, "steps": steps,
            "warmup_steps": max(1, steps // 10), "eval_every": steps // 2}


def _run_worker(output_dir: Path, settings: dict, vocabulary: Path, resume: bool = False
                ) -> subprocess.Popen:
    command = [sys.executable, __file__, "--worker", str(output_dir), "--settings",
               json.dumps(settings), "--vocabulary", str(vocabulary)]
    # cuBLAS repeats its sums only with a fixed workspace, set before CUDA starts.
    env = {**os.environ, "CUBLAS_WORKSPACE_CONFIG": ":4096:8"}
    return subprocess.Popen(command + (["--resume"] if resume else []), env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def repeatable_kernels() -> None:
    """Kernels that give the same sums every time: without them two unbroken runs on a GPU
    already differ (atomic adds in attention's backward), and growing differences (0.03 in
    the loss after 150 steps on an H200) would hide whether resuming itself is exact."""
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.backends.cudnn.benchmark = False
    for kernel in ("flash", "mem_efficient", "cudnn"):  # SDPA falls back to its math path
        getattr(torch.backends.cuda, f"enable_{kernel}_sdp")(False)


def worker(output_dir: Path, settings: dict, vocabulary: Path, resume: bool) -> int:
    """One pretraining run (a subprocess, so that it can be killed like a lost runtime),
    with repeatable kernels."""
    from bertbook.pretrain import book_documents, run_for
    from bertlib.pretraining.run import pretrain
    from bertlib.tokenizer import BertTokenizer

    repeatable_kernels()
    train, held_out = book_documents(settings)
    pretrain(train, run_for(settings, progress=False), output_dir, held_out,
             BertTokenizer.from_pretrained(vocabulary), resume=resume)
    return 0


def _losses(run: Path) -> dict[int, float]:
    state = torch.load(run / "checkpoint.pt", map_location="cpu", weights_only=False)["state"]
    return {record["step"]: record["loss"] for record in state["history"]}


def resume_check(work: Path, size: str, steps: int) -> dict:
    """An unbroken run against one killed after its halfway checkpoint and resumed, all on
    repeatable kernels; a second unbroken run shows that they are (its difference is 0)."""
    from bertbook.corpora import load_corpus, split_articles
    from bertlib.tokenizer import train_wordpiece

    settings = pretraining_settings(size, steps)
    train, _ = split_articles(load_corpus("wikipedia", None), held_out=0.1, seed=0)
    vocabulary = work / "vocabulary"
    train_wordpiece([p for a in train for p in a.paragraphs],
                    settings["vocab_size"]).save_pretrained(vocabulary)
    started = time.perf_counter()
    for name in ("unbroken", "unbroken-again"):
        unbroken = _run_worker(work / name, settings, vocabulary)
        if unbroken.wait() != 0:
            return {"ok": False, "error": unbroken.stdout.read()[-2000:]}
    seconds = (time.perf_counter() - started) / 2
    broken = _run_worker(work / "broken", settings, vocabulary)
    checkpoint = work / "broken" / "checkpoint.pt"
    while broken.poll() is None and not checkpoint.exists():
        time.sleep(0.1)
    if broken.poll() is not None:
        return {"ok": False, "error": "the run ended before it could be killed; raise --steps"}
    broken.send_signal(signal.SIGKILL)
    broken.wait()
    killed_at = max(_losses(work / "broken"))
    resumed = _run_worker(work / "broken", settings, vocabulary, resume=True)
    if resumed.wait() != 0:
        return {"ok": False, "error": resumed.stdout.read()[-2000:]}
    expected, again, got = (_losses(work / name)
                            for name in ("unbroken", "unbroken-again", "broken"))
    after = [step for step in expected if step > killed_at]
    gap = max(abs(expected[step] - got[step]) for step in after)
    spread = max(abs(expected[step] - again[step]) for step in after)
    return {"ok": gap <= RESUME_TOLERANCE and sorted(got) == sorted(expected),
            "model": settings["model"], "steps": steps, "resumed_from_step": killed_at,
            "max_loss_difference_after_resume": gap,
            "max_loss_difference_between_two_unbroken_runs": spread,
            "unbroken_run_s": round(seconds, 1)}


def benchmark_check() -> dict:
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu_bert_base.py")],
                          capture_output=True, text=True)
    if done.returncode != 0:
        return {"ok": False, "error": (done.stdout + done.stderr)[-2000:]}
    return {"ok": True, **json.loads(done.stdout[done.stdout.index("{"):])}


def ddp_check(work: Path) -> dict:
    """Data-parallel fine-tuning on every GPU (at least two processes: gloo on one GPU)."""
    processes = max(2, torch.cuda.device_count())
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone",
               "--nproc_per_node", str(processes), "-m", "bertbook.ddp", "--steps", "10",
               "--batch-size", str(8 * processes), "--out", str(work / "ddp")]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        return {"ok": False, "error": (done.stdout + done.stderr)[-2000:]}
    run = json.loads((work / "ddp" / "run.json").read_text())
    every_rank_has_a_gpu = torch.cuda.device_count() >= processes
    return {"ok": run["world_size"] == processes, "processes": processes,
            "backend": "nccl" if every_rank_has_a_gpu else "gloo",
            "first_loss": run["losses"][0], "last_loss": run["losses"][-1]}


PEAK_MEMORY_CELL = """
import json, torch
if torch.cuda.is_available():
    print("PEAK_GIB", json.dumps(torch.cuda.max_memory_allocated() / 2**30))
"""


def chapter_check(chapter: Path, size: str, scale: float, timeout: int) -> dict:
    """Execute one chapter in a fresh kernel at `size`, its training cut to `scale`."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    from tools.chapters import read_chapter

    notebook = read_chapter(chapter)
    notebook.cells.append(nbformat.v4.new_code_cell(PEAK_MEMORY_CELL))
    client = NotebookClient(notebook, timeout=timeout, kernel_name="python3",
                            resources={"metadata": {"path": str(chapter.parent)}})
    started = time.perf_counter()
    try:  # the size and the step scale go to the kernel only, not to this process
        client.execute(env={**os.environ, "BERT_BOOK_SIZE": size,
                            "BERT_BOOK_STEPS": str(scale)})
    except CellExecutionError as error:
        needs_network = error.ename == "DataUnavailable"
        return {"ok": None if needs_network else False, "error": f"{error.ename}: "
                f"{error.evalue}"[:300], "minutes": round((time.perf_counter() - started) / 60, 1)}
    printed = "".join(output.get("text", "") for output in notebook.cells[-1].outputs)
    peak = float(printed.split()[1]) if printed.startswith("PEAK_GIB") else None
    return {"ok": True, "minutes": round((time.perf_counter() - started) / 60, 1),
            "peak_gib": None if peak is None else round(peak, 2)}


def chapters_check(size: str, scale: float, wanted: list[str], timeout: int) -> dict:
    try:  # a machine with torch but not the book's notebook stack still runs the rest
        import nbclient  # noqa: F401

        from tools.chapters import chapter_sources
    except ImportError as error:
        return {"ok": None, "skipped": f"{error.name} is not installed here: the chapters "
                "need the book's extras (pip install -e './bertbook[book,dev]')"}

    chapters = [path for path in chapter_sources(ROOT) if not wanted or path.name[:2] in wanted]
    results = {path.stem: chapter_check(path, size, scale, timeout) for path in chapters}
    return {"ok": all(result["ok"] is not False for result in results.values()),
            "size": size, "step_scale": scale, **results}


def pinned_hub_datasets() -> list[tuple[str, str | None]]:
    """Every (dataset, revision) the book reads from the Hugging Face hub."""
    from bertbook.benchmarks import CONLL2003_HUB, GLUE_HUB, SQUAD_HUB
    from bertbook.corpora import WIKITEXT_HUB
    return [WIKITEXT_HUB, GLUE_HUB, CONLL2003_HUB, SQUAD_HUB]


def hub_check() -> dict:
    """Ask the hub whether each pinned revision still exists. This is the first check with
    a network the book gets (CI is offline), so a revision that is gone fails here, with
    the dataset's name, rather than in a reader's Colab session. Offline it says so and
    passes nothing."""
    try:
        from huggingface_hub import HfApi
        from huggingface_hub.utils import RepositoryNotFoundError, RevisionNotFoundError
    except ImportError:
        return {"ok": None, "skipped": "huggingface_hub is not installed"}
    found, gone = {}, []
    for name, revision in pinned_hub_datasets():
        try:
            found[name] = HfApi().dataset_info(name, revision=revision).sha
        except (RepositoryNotFoundError, RevisionNotFoundError):
            gone.append(f"{name} at {revision or 'main'}")
        except Exception as error:  # offline, or the hub is down: nothing verified
            return {"ok": None, "skipped": f"the hub cannot be reached ({type(error).__name__})"}
    result = {"ok": not gone, "found": found}
    if gone:
        result["error"] = (f"pinned revisions gone from the hub: {', '.join(gone)}; pin a "
                           "revision that exists (bertbook/corpora.py WIKITEXT_HUB, "
                           "bertbook/datasets.py *_HUB, written by chapters 01 and 07)")
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--out", type=Path, default=ROOT / "_build" / "gpu-check")
    parser.add_argument("--step-scale", type=float, default=0.02,
                        help="the share of each chapter's training lengths to run")
    parser.add_argument("--chapters", nargs="*", default=[],
                        help="chapter numbers to execute (default: all)")
    parser.add_argument("--chapter-timeout", type=int, default=600,
                        help="seconds a chapter's cell may take")
    parser.add_argument("--allow-cpu", action="store_true",
                        help="no GPU: run the checks at the smoke size, to try this script")
    parser.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--settings", help=argparse.SUPPRESS)
    parser.add_argument("--vocabulary", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--resume", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return worker(args.worker, json.loads(args.settings), args.vocabulary, args.resume)
    if not torch.cuda.is_available() and not args.allow_cpu:
        print("gpu-check: no CUDA device here, so there is nothing to check. Run it on a "
              "machine with an NVIDIA GPU (or pass --allow-cpu to try the script itself).")
        return 2
    if args.out.exists():
        shutil.rmtree(args.out)
    args.out.mkdir(parents=True)
    started = time.perf_counter()
    on_gpu = torch.cuda.is_available()
    summary = {"device": torch.cuda.get_device_name() if on_gpu else "cpu",
               "gpus": torch.cuda.device_count(), "torch": torch.__version__,
               "hub": hub_check(),
               "resume": resume_check(args.out, "gpu" if on_gpu else "smoke", args.steps),
               "benchmark": benchmark_check() if on_gpu else {"ok": None, "skipped": "no GPU"},
               "ddp": ddp_check(args.out),
               "chapters": chapters_check("gpu" if on_gpu else "smoke", args.step_scale,
                                          args.chapters, args.chapter_timeout)}
    summary["seconds"] = round(time.perf_counter() - started)
    summary["ok"] = all(part["ok"] is not False for part in summary.values()
                        if isinstance(part, dict))
    text = json.dumps(summary, indent=2)
    (args.out / "summary.json").write_text(text + "\n")
    print(text)
    return 0 if summary["ok"] else 1


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")  # workers share the CPU with the parent
    sys.exit(main())
