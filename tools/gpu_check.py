"""`make gpu-check`: what only a CUDA machine can show, in at most 9 minutes, written to
one JSON summary part by part (a run stopped by a time limit keeps what finished):

* **levers**: benchmarks/gpu_bert_base.py, the pretraining step's levers one at a time
  (tokens/s, MFU, peak memory, attention kernel; where the best step's time goes).
* **resume**: pretraining at the `gpu` size's model shape on the offline Wikipedia sample,
  twice without a break and once killed after its mid-run checkpoint and resumed (the same
  vocabulary for all), on repeatable kernels; the losses after the checkpoint must be equal.
* **ddp**: `python -m bertbook.ddp` under torchrun on every visible GPU (NCCL), or two
  processes over gloo where there is one GPU.
* **chapters**: every chapter run as a plain script (no Jupyter) at the `gpu` size with its
  training cut to BERT_BOOK_STEPS: whether it ran, its minutes, its peak GPU memory. A
  chapter whose data is not on the machine is reported as skipped, with the reason.
* **pretrain**: chapter 06's gpu-size recipe on the offline text for a fixed budget of
  minutes: steps, tokens/s, the held-out curve beside the unigram yardstick, the guesses on
  chapter 06's probes.

The machine needs torch (with CUDA), tokenizers, safetensors and tqdm; the book's data
packages travel as one folder that `make device-bundle` builds (tools/device_bundle.py),
found through BERT_BOOK_PACKAGE_DATA. `--dry-run` runs every part on the CPU at the smoke
size in a minute or two, to try the script itself (CI does).

    python tools/gpu_check.py [--out DIR] [--chapters 03 06] [--pretrain-minutes 2]
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
from collections.abc import Callable
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: the repository's tools package
    sys.path.insert(0, str(ROOT))
RESUME_TOLERANCE = 1e-6  # the runs use deterministic kernels: resume must be exact
PARTS = ("hub", "levers", "resume", "ddp", "chapters", "pretrain")


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


def levers_check(work: Path, dry_run: bool, timeout: int) -> dict:
    """The step's levers, one at a time (benchmarks/gpu_bert_base.py)."""
    results = work / "levers.json"
    command = [sys.executable, str(ROOT / "benchmarks" / "gpu_bert_base.py"), "--json",
               str(results)] + (["--dry-run"] if dry_run else [])
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        done = None
    found = json.loads(results.read_text()) if results.exists() else {"rows": []}
    if done is None or done.returncode != 0:
        why = "timed out" if done is None else (done.stdout + done.stderr)[-1500:]
        return {"ok": False, "error": why, **found}
    return {"ok": True, **found}


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


# Runs one chapter as a plain script and says how much GPU memory it took at its peak.
CHAPTER_RUNNER = """
import runpy, sys, torch
try:
    runpy.run_path(sys.argv[1], run_name="__main__")
finally:
    if torch.cuda.is_available():
        print("PEAK_GIB", torch.cuda.max_memory_allocated() / 2**30)
"""


def chapter_check(chapter: Path, size: str, scale: float, timeout: int) -> dict:
    """Run one chapter as `python chapters/NN_name.py` at `size`, its training cut to
    `scale`, with no Jupyter and no display."""
    env = {**os.environ, "BERT_BOOK_SIZE": size, "BERT_BOOK_STEPS": str(scale),
           "MPLBACKEND": "Agg", "PYTHONPATH": str(ROOT)}
    started = time.perf_counter()
    try:
        done = subprocess.run([sys.executable, "-c", CHAPTER_RUNNER, str(chapter)],
                              cwd=chapter.parent, env=env, capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"ok": False, "error": f"still running after {timeout} s"}
    minutes = round((time.perf_counter() - started) / 60, 2)
    peaks = [line.split()[1] for line in done.stdout.splitlines() if line.startswith("PEAK_GIB")]
    peak = round(float(peaks[-1]), 2) if peaks else None
    if done.returncode == 0:
        return {"ok": True, "minutes": minutes, "peak_gib": peak}
    last = (done.stderr.strip().splitlines() or ["(no message)"])[-1][:300]
    needs_data = "DataUnavailable" in done.stderr  # a package or download not on this machine
    return {"ok": None if needs_data else False, "minutes": minutes, "error": last}


def chapters_check(size: str, scale: float, wanted: list[str], timeout: int,
                   record: Callable[[dict], None]) -> dict:
    """Every chapter (or those `wanted`), each reported through `record` as it ends."""
    from tools.chapters import chapter_sources

    results = {"ok": True, "size": size, "step_scale": scale}
    for path in chapter_sources(ROOT):
        if wanted and path.name[:2] not in wanted:
            continue
        results[path.stem] = chapter_check(path, size, scale, timeout)
        results["ok"] = results["ok"] and results[path.stem]["ok"] is not False
        record(results)
    return results


def pretrain_check(work: Path, size: str, minutes: float) -> dict:
    """Chapter 06's recipe at `size` on the offline text, for about `minutes`: the steps
    the budget allows are set from the speed of a short first run of the same recipe."""
    from bertbook.mask_probe import hide_a_word, top_guesses
    from bertbook.pretrain import SIZES, book_documents, run_for
    from bertlib.pretraining.run import pretrain
    from bertlib.pretraining.sentence_pairs import split_sentences

    settings = {**SIZES[size], "corpus": "wikipedia+bbc", "articles": None}
    train, held_out = book_documents(settings)
    probe = {**settings, "steps": 20, "warmup_steps": 2, "eval_every": 20}
    started = time.perf_counter()
    pretrain(train, run_for(probe, progress=False), work / "probe-run", held_out[:4])
    seconds_per_step = (time.perf_counter() - started) / probe["steps"]  # counts set-up too
    steps = max(20, int(minutes * 60 / seconds_per_step))
    settings.update(steps=steps, warmup_steps=max(1, steps // 10),
                    eval_every=max(1, steps // 5))
    started = time.perf_counter()
    result = pretrain(train, run_for(settings, progress=False), work / "pretrain", held_out)
    seconds = time.perf_counter() - started
    probes = [hide_a_word(split_sentences(d[0])[0], result.tokenizer) for d in held_out[:6]]
    guesses = [{"hidden": word, "guesses": top_guesses(result.model, result.tokenizer, batch)}
               for batch, word in (p for p in probes if p is not None)]
    return {"ok": True, "model": settings["model"], "objective": settings["objective"],
            "steps": steps, "minutes": round(seconds / 60, 2),
            "tokens_per_second": round(result.train_tokens / seconds),
            "curve": result.curve, "held_out": result.evaluation,
            "baselines": result.baselines, "guesses": guesses}


class Summary:
    """The summary, rewritten to disk after every part, so a run stopped by a time limit
    keeps what finished."""

    def __init__(self, path: Path, **header):
        self.path, self.parts, self.started = path, dict(header), time.perf_counter()

    def record(self, name: str, part: dict) -> None:
        self.parts[name] = part
        self.parts["seconds"] = round(time.perf_counter() - self.started)
        self.parts["ok"] = all(value["ok"] is not False for value in self.parts.values()
                               if isinstance(value, dict))
        self.path.write_text(json.dumps(self.parts, indent=2) + "\n")

    def run(self, name: str, check: Callable[[], dict]) -> None:
        """One part; an error in it is its result, and the parts after it still run."""
        try:
            self.record(name, check())
        except Exception as error:  # noqa: BLE001 - any failure is this part's finding
            self.record(name, {"ok": False, "error": f"{type(error).__name__}: {error}"[:500]})


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
    parser.add_argument("--steps", type=int, default=300, help="the resume check's run")
    parser.add_argument("--out", type=Path, default=ROOT / "_build" / "gpu-check")
    parser.add_argument("--step-scale", type=float, default=0.02,
                        help="the share of each chapter's training lengths to run")
    parser.add_argument("--chapters", nargs="*", default=[],
                        help="chapter numbers to run (default: all)")
    parser.add_argument("--chapter-timeout", type=int, default=240,
                        help="seconds a chapter may take")
    parser.add_argument("--pretrain-minutes", type=float, default=2.0)
    parser.add_argument("--skip", nargs="*", default=[], choices=PARTS,
                        help="parts to leave out")
    parser.add_argument("--dry-run", action="store_true",
                        help="no GPU: every part at the smoke size on the CPU, to try the script")
    parser.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--settings", help=argparse.SUPPRESS)
    parser.add_argument("--vocabulary", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--resume", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return worker(args.worker, json.loads(args.settings), args.vocabulary, args.resume)
    if not torch.cuda.is_available() and not args.dry_run:
        print("gpu-check: no CUDA device here, so there is nothing to check. Run it on a "
              "machine with an NVIDIA GPU (or pass --dry-run to try the script itself).")
        return 2
    if args.out.exists():
        shutil.rmtree(args.out)
    args.out.mkdir(parents=True)
    on_gpu = torch.cuda.is_available() and not args.dry_run
    size = "gpu" if on_gpu else "smoke"
    summary = Summary(args.out / "summary.json",
                      device=torch.cuda.get_device_name() if on_gpu else "cpu",
                      gpus=torch.cuda.device_count(), torch=torch.__version__)
    checks = {
        "hub": hub_check,
        "levers": lambda: levers_check(args.out, not on_gpu, timeout=300),
        "resume": lambda: resume_check(args.out, size, args.steps if on_gpu else 60),
        "ddp": lambda: ddp_check(args.out),
        "chapters": lambda: chapters_check(size, args.step_scale, args.chapters,
                                           args.chapter_timeout,
                                           lambda partial: summary.record("chapters", partial)),
        "pretrain": lambda: pretrain_check(args.out, size, args.pretrain_minutes
                                           if on_gpu else 0.1),
    }
    for name in PARTS:
        if name not in args.skip:
            summary.run(name, checks[name])
    print(summary.path.read_text())
    return 0 if summary.parts["ok"] else 1


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")  # workers share the CPU with the parent
    sys.exit(main())
