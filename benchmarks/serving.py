"""Serving a fine-tuned bertlib classifier on the CPU, measured fairly: eager torch,
torch.compile, onnxruntime on a plain export, on bertlib's fused export, on its int8
version, and transformers' own BERT with the same weights exported and fused the same way.

The model is MiniLM (all-MiniLM-L6-v2: BERT's architecture, 6 layers, width 384) fine-tuned
briefly on Rotten Tomatoes reviews with bertlib's fine_tune_classifier. The fused export is
`bertlib.serving.export_onnx` passed through onnxruntime's BERT optimiser (fused attention,
embedding and skip layer norms, bias-GELU); int8 is onnxruntime's dynamic quantisation of
it, whose cost in dev accuracy is measured beside the float model's. Every runtime's
logits are checked against eager torch before anything is timed (int8's distance is
reported, not required to be small).

Fair to each: the same number of threads for all; onnxruntime's threads do not spin-wait
after a call (by default they do, and interleaved with torch on the same cores they take
the cores torch runs on next); the runtimes take turns on each batch shape, so a slow
spell of the machine hits all alike; medians of several blocks, with their range.

    python benchmarks/serving.py            # the table in benchmarks/results/ (about 5 min)
    python benchmarks/serving.py --quick    # a tiny random model, to check the script runs

Results go to benchmarks/results/serving.md and serving.json, and are printed.
"""

import argparse
import json
import logging
import os
import statistics
import tempfile
import warnings
from pathlib import Path

import numpy as np
import onnxruntime
import torch

from bertbook.datasets import minilm_dir, rotten_tomatoes
from bertbook.measure import interleaved_timings, medians
from bertbook.serving import cpu_session, fused_onnx, int8_onnx, optimized
from bertlib import (
    BertConfig,
    BertForSequenceClassification,
    BertTokenizer,
    FineTuningRecipe,
    fine_tune_classifier,
)

RESULTS = Path(__file__).resolve().parent / "results"
INPUTS = ("input_ids", "attention_mask", "token_type_ids")
RUNTIMES = ("eager", "compiled", "onnxruntime", "bertlib fused", "bertlib fused int8",
            "transformers fused")
EXACT = ("compiled", "onnxruntime", "bertlib fused", "transformers fused")  # logits as eager


def fine_tuned_minilm(tokenizer: BertTokenizer,
                      examples: int) -> tuple[BertForSequenceClassification, str]:
    """MiniLM with a sentiment head, fine-tuned on the first `examples` training reviews,
    and a line saying so."""
    train = rotten_tomatoes()["train"][:examples]
    recipe = FineTuningRecipe(learning_rate=1e-4, epochs=3, batch_size=32, progress=False)
    model = fine_tune_classifier(minilm_dir(), tokenizer, [e.text for e in train],
                                 [e.label for e in train], recipe, max_length=128,
                                 device=torch.device("cpu"))
    return model.eval(), (f"MiniLM fine-tuned by bertlib ({recipe.epochs:g} epochs on "
                          f"{len(train)} Rotten Tomatoes reviews)")


def tiny_model() -> BertForSequenceClassification:
    torch.manual_seed(0)
    config = BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2,
                        num_attention_heads=4, intermediate_size=64)
    return BertForSequenceClassification(config, num_labels=2).eval()


def batch_of(tokenizer: BertTokenizer, rows: int, length: int) -> dict[str, torch.Tensor]:
    """Real reviews, padded or cut to exactly `length` pieces (so every runtime sees one
    shape and the compiled model is traced once per shape)."""
    texts = [e.text for e in rotten_tomatoes()["test"][:rows]]
    batch = tokenizer.with_max_length(length)(texts)
    pad = length - batch["input_ids"].shape[1]
    return {key: torch.nn.functional.pad(batch[key], (0, pad)) for key in INPUTS}


def export(model: torch.nn.Module, example: dict[str, torch.Tensor], folder: Path) -> Path:
    """The model as an ONNX file with a dynamic batch and length."""
    rows = torch.export.Dim("rows", max=256)
    length = torch.export.Dim("length", max=model.config.max_position_embeddings)
    logging.getLogger("torch.onnx").setLevel(logging.ERROR)  # "torchvision is not installed"
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = torch.onnx.export(model, (), kwargs=example, dynamo=True, verbose=False,
                                    output_names=["logits"],
                                    dynamic_shapes={key: {0: rows, 1: length}
                                                    for key in INPUTS})
    path = folder / "classifier.onnx"
    program.save(path)
    return path


def transformers_export(model: torch.nn.Module, example: dict[str, torch.Tensor],
                        folder: Path) -> Path:
    """transformers' BertForSequenceClassification with the same weights (loaded from the
    folder bertlib saves), eager attention, exported by the TorchScript exporter."""
    from transformers import BertForSequenceClassification as TransformersClassifier

    model.save_pretrained(folder / "saved")
    theirs = TransformersClassifier.from_pretrained(folder / "saved",
                                                    attn_implementation="eager").eval()
    path = folder / "transformers.onnx"
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(theirs, tuple(example[key] for key in INPUTS), str(path),
                          dynamo=False, input_names=list(INPUTS), output_names=["logits"],
                          dynamic_axes={key: {0: "rows", 1: "length"} for key in INPUTS},
                          opset_version=17)
    return path


def onnx_files(model: torch.nn.Module, example: dict[str, torch.Tensor], folder: Path
               ) -> dict[str, Path]:
    """Each onnxruntime row's file."""
    ours = fused_onnx(model, folder)
    return {"onnxruntime": export(model, example, folder), "bertlib fused": ours,
            "bertlib fused int8": int8_onnx(ours),
            "transformers fused": optimized(transformers_export(model, example, folder),
                                            model.config)}


def runtimes(model: torch.nn.Module, files: dict[str, Path], threads: int):
    """name -> a function from a batch to logits (a numpy array), for each runtime."""
    compiled = torch.compile(model)

    def torch_logits(module):
        def run(batch):
            with torch.no_grad():
                return module(**batch).logits.numpy()
        return run

    def onnx_logits(path):
        runner = cpu_session(path, threads)
        return lambda batch: runner.run(None, {key: batch[key].numpy() for key in INPUTS})[0]

    return {"eager": torch_logits(model), "compiled": torch_logits(compiled),
            **{name: onnx_logits(path) for name, path in files.items()}}


def dev_accuracy(run, tokenizer: BertTokenizer, dev: list, length: int = 128) -> float:
    """Accuracy of one runtime on the dev reviews, in batches of 32."""
    right = 0
    for first in range(0, len(dev), 32):
        chunk = dev[first:first + 32]
        batch = tokenizer.with_max_length(length)([e.text for e in chunk])
        logits = run({key: batch[key] for key in INPUTS})
        right += sum(int(p == e.label) for p, e in zip(logits.argmax(-1), chunk, strict=True))
    return right / len(dev)


def measure(run, batch: dict[str, torch.Tensor], repeats: int, blocks: int = 3) -> dict:
    """Median seconds per batch of each runtime and its speed relative to eager, after
    checking that the runtimes agree with eager. The calls are timed in `blocks` blocks;
    the ratio is the median of the blocks' ratios, and their range says how far it can be
    trusted."""
    expected = run["eager"](batch)
    gaps = {name: float(np.abs(run[name](batch) - expected).max()) for name in RUNTIMES[1:]}
    for name in EXACT:
        if gaps[name] > 1e-3:
            raise SystemExit(f"{name} differs from eager by {gaps[name]:.2e}: not timing it")
    steps = {name: (lambda name=name: run[name](batch)) for name in RUNTIMES}
    timed = [interleaved_timings(steps, repeats=repeats, warmup_calls=2) for _ in range(blocks)]
    seconds = medians({name: [t for block in timed for t in block[name]] for name in RUNTIMES})
    ratios = [{name: block["eager"] / block[name] for name in RUNTIMES}
              for block in map(medians, timed)]
    return {"seconds": seconds, "largest_logit_gap": gaps,
            "speedup": {name: statistics.median(r[name] for r in ratios) for name in RUNTIMES},
            "speedup_range": {name: (min(r[name] for r in ratios), max(r[name] for r in ratios))
                              for name in RUNTIMES}}


def markdown(rows: list[dict], header: str, accuracy: dict[str, float]) -> str:
    """One line per runtime: per batch shape its median ms and its speed against eager
    (the median block's ratio, in brackets the blocks' range)."""
    shapes = [f"{row['rows']} x {row['length']}" for row in rows]
    lines = [header, "", "| runtime | " + " | ".join(shapes) + " | dev accuracy |",
             "|---" * (len(shapes) + 2) + "|"]
    for name in RUNTIMES:
        cells = [f"{row['seconds'][name] * 1000:.1f} ms, {row['speedup'][name]:.2f}x "
                 f"({row['speedup_range'][name][0]:.2f}-{row['speedup_range'][name][1]:.2f})"
                 for row in rows]
        score = f"{accuracy[name]:.3f}" if name in accuracy else ""
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {score} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a tiny model (for tests)")
    parser.add_argument("--threads", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    tokenizer = BertTokenizer.from_pretrained(minilm_dir())
    model, described = ((tiny_model(), "a tiny random model") if args.quick
                        else fine_tuned_minilm(tokenizer, examples=1000))
    shapes, repeats = ([(1, 16)], 5) if args.quick else ([(1, 32), (1, 128), (8, 128)], 40)
    rows = []
    dev = rotten_tomatoes()["dev"][:50 if args.quick else 1000]
    with tempfile.TemporaryDirectory() as folder:
        files = onnx_files(model, batch_of(tokenizer, 2, 16), Path(folder))
        run = runtimes(model, files, args.threads)
        accuracy = {name: dev_accuracy(run[name], tokenizer, dev)
                    for name in ("eager", "bertlib fused", "bertlib fused int8")}
        for batch_rows, length in shapes:
            timing = measure(run, batch_of(tokenizer, batch_rows, length), repeats)
            rows.append({"rows": batch_rows, "length": length, **timing})
    header = (f"torch {torch.__version__}, onnxruntime {onnxruntime.__version__}, "
              f"{args.threads} threads (onnxruntime's not spinning), {os.cpu_count()} CPUs "
              f"visible; {described}; dev accuracy on {len(dev)} reviews; medians of 3 "
              f"blocks of {repeats} interleaved calls; ratios against eager: the median "
              "block's, and in brackets their range")
    table = markdown(rows, header, accuracy)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "serving.md").write_text(table)
    (args.out / "serving.json").write_text(json.dumps({"shapes": rows, "dev_accuracy": accuracy},
                                                      indent=1) + "\n")
    print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
