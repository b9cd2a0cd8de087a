"""Serving a fine-tuned bertlib classifier on the CPU: eager torch, torch.compile and
onnxruntime, side by side on the same inputs.

The model is MiniLM (all-MiniLM-L6-v2: BERT's architecture, 6 layers, width 384) fine-tuned
briefly on Rotten Tomatoes reviews with bertlib's fine_tune_classifier; the table's first
line gives its dev accuracy, so the model served is seen to be a real one. It is exported
with torch's ONNX exporter (dynamic batch and length), and onnxruntime's and the compiled
model's logits are checked against eager torch before anything is timed. The three then
take turns on each batch shape (eager, compiled, onnx, onnx, compiled, eager, ...), so a
slow spell of the machine hits all alike; the table gives medians and each one's speed
relative to eager. All three use the same number of threads.

    python benchmarks/serving.py            # the table in benchmarks/results/ (about 3 min)
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
from bertlib import (
    BertConfig,
    BertForSequenceClassification,
    BertTokenizer,
    FineTuningRecipe,
    classify,
    fine_tune_classifier,
)

RESULTS = Path(__file__).resolve().parent / "results"
INPUTS = ("input_ids", "attention_mask", "token_type_ids")
RUNTIMES = ("eager", "compiled", "onnxruntime")


def fine_tuned_minilm(tokenizer: BertTokenizer,
                      examples: int) -> tuple[BertForSequenceClassification, str]:
    """MiniLM with a sentiment head, fine-tuned on the first `examples` training reviews,
    and a line saying how well it classifies dev reviews."""
    data = rotten_tomatoes()
    train, dev = data["train"][:examples], data["dev"][:200]
    recipe = FineTuningRecipe(learning_rate=1e-4, epochs=3, batch_size=32, progress=False)
    model = fine_tune_classifier(minilm_dir(), tokenizer, [e.text for e in train],
                                 [e.label for e in train], recipe, max_length=128,
                                 device=torch.device("cpu"))
    predicted = classify(model, tokenizer, [e.text for e in dev])
    accuracy = np.mean([p == e.label for p, e in zip(predicted, dev, strict=True)])
    return model.eval(), (f"MiniLM fine-tuned by bertlib ({recipe.epochs:g} epochs on "
                          f"{len(train)} Rotten Tomatoes reviews; dev accuracy {accuracy:.3f} "
                          f"on {len(dev)})")


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


def runtimes(model: torch.nn.Module, onnx_path: Path, threads: int):
    """name -> a function from a batch to logits (a numpy array), for each runtime."""
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    session = onnxruntime.InferenceSession(str(onnx_path), options,
                                           providers=["CPUExecutionProvider"])
    compiled = torch.compile(model)

    def torch_logits(module):
        def run(batch):
            with torch.no_grad():
                return module(**batch).logits.numpy()
        return run

    def onnx_logits(batch):
        return session.run(None, {key: batch[key].numpy() for key in INPUTS})[0]

    return {"eager": torch_logits(model), "compiled": torch_logits(compiled),
            "onnxruntime": onnx_logits}


def measure(run, batch: dict[str, torch.Tensor], repeats: int, blocks: int = 3) -> dict:
    """Median seconds per batch of each runtime and its speed relative to eager, after
    checking that the runtimes agree with eager. The calls are timed in `blocks` blocks;
    the ratio is the median of the blocks' ratios, and their range says how far it can be
    trusted."""
    expected = run["eager"](batch)
    for name in RUNTIMES[1:]:
        difference = float(np.abs(run[name](batch) - expected).max())
        if difference > 1e-3:
            raise SystemExit(f"{name} differs from eager by {difference:.2e}: not timing it")
    steps = {name: (lambda name=name: run[name](batch)) for name in RUNTIMES}
    timed = [interleaved_timings(steps, repeats=repeats, warmup_calls=2) for _ in range(blocks)]
    seconds = medians({name: [t for block in timed for t in block[name]] for name in RUNTIMES})
    ratios = [{name: block["eager"] / block[name] for name in RUNTIMES}
              for block in map(medians, timed)]
    return {"seconds": seconds,
            "speedup": {name: statistics.median(r[name] for r in ratios) for name in RUNTIMES},
            "speedup_range": {name: (min(r[name] for r in ratios), max(r[name] for r in ratios))
                              for name in RUNTIMES}}


def markdown(rows: list[dict], header: str) -> str:
    lines = [header, "",
             "| batch x seq | eager ms | compiled ms | onnxruntime ms "
             "| compiled vs eager | onnxruntime vs eager |",
             "|---|---|---|---|---|---|"]
    for row in rows:
        ms = {name: row["seconds"][name] * 1000 for name in RUNTIMES}
        ratio = {name: f"{row['speedup'][name]:.2f}x ({row['speedup_range'][name][0]:.2f}"
                       f"-{row['speedup_range'][name][1]:.2f})" for name in RUNTIMES}
        lines.append(f"| {row['rows']} x {row['length']} | {ms['eager']:.1f} | "
                     f"{ms['compiled']:.1f} | {ms['onnxruntime']:.1f} | "
                     f"{ratio['compiled']} | {ratio['onnxruntime']} |")
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
    with tempfile.TemporaryDirectory() as folder:
        onnx_path = export(model, batch_of(tokenizer, 2, 16), Path(folder))
        run = runtimes(model, onnx_path, args.threads)
        for batch_rows, length in shapes:
            timing = measure(run, batch_of(tokenizer, batch_rows, length), repeats)
            rows.append({"rows": batch_rows, "length": length, **timing})
    header = (f"torch {torch.__version__}, onnxruntime {onnxruntime.__version__}, "
              f"{args.threads} threads, {os.cpu_count()} CPUs visible; "
              f"{described}; "
              f"medians of 3 blocks of {repeats} interleaved calls; ratios: the median "
              "block's, and in brackets their range")
    table = markdown(rows, header)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "serving.md").write_text(table)
    (args.out / "serving.json").write_text(json.dumps(rows, indent=1) + "\n")
    print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
