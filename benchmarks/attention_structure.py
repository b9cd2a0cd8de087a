"""Does structure form in attention while the loss leaves the plateau?

Chapter 08's two pretraining runs (bert-tiny on the unlabelled text of the BBC training
articles: the masked LM with 40% masked and dropout off, 1,200 steps; the left-to-right LM,
600 steps) are repeated here with a checkpoint kept every 100 steps. Each checkpoint, and
the random weights every run starts from, reads the same held-out rows, and for each layer
this script measures where its attention goes:

* normalised entropy: the entropy of each query's attention over the keys it may see,
  divided by the entropy of attending to all of them evenly (1: spread evenly, as random
  weights do; near 0: each query looks at one key);
* the share of attention on the query's own position, and on the piece just before it.

Chen et al. (2023, "Sudden drops in the loss: syntax acquisition, phase transitions, and
simplicity bias in MLMs") found the masked LM's loss drop coincides with attention heads
specialising. These numbers let chapter 08 ask that of its own runs. One process per run,
one thread each: run it alone.

    python benchmarks/attention_structure.py                 # about 8 minutes on 2 cores
    python benchmarks/attention_structure.py --steps 20 --out /tmp/attention.json   # try it
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import torch

import bertlib.pretraining.models  # noqa: F401  (registers the left-to-right objective)
from bertbook.datasets import bbc_news, split_of
from bertbook.pretrain import run_for
from bertlib.batch import IGNORE_INDEX
from bertlib.core.config import BertConfig
from bertlib.core.encoder import BertModel
from bertlib.pretraining.run import pretrain
from bertlib.runtime import seed_everything
from bertlib.tokenizer import train_wordpiece

# Shipped in the book package, so that chapter 08 draws the figure on Colab too.
RESULTS = Path(__file__).parents[1] / "bertbook" / "resources" / "attention_structure.json"
TINY = dict(model="bert-tiny", vocab_size=4000, max_seq_length=128, batch_size=32,
            learning_rate=2e-3,
            eval_every=100, precision="fp32", checkpoints=False)
RUNS = {"masked LM": dict(TINY, steps=1200, warmup_steps=120, objective="mlm", mask_probability=0.4,
                          dropout=0.0),
        "left-to-right": dict(TINY, steps=600, warmup_steps=60, objective="left-to-right")}
ROWS_MEASURED = 64


def allowed_keys(length: int, causal: bool) -> torch.Tensor:
    """[query, key] True where the query may attend to the key."""
    everything = torch.ones(length, length, dtype=torch.bool)
    return everything.tril() if causal else everything


@torch.no_grad()
def attention_structure(model: BertModel, batch: dict, causal: bool) -> list[dict]:
    """Per layer: normalised entropy, share on the query itself, share on the piece before.
    Rows are packed text (no padding), so every position is a real piece."""
    model.eval()
    attentions = model(input_ids=batch["input_ids"], output_attentions=True,
                       causal=causal).attentions
    length = batch["input_ids"].shape[1]
    allowed = allowed_keys(length, causal)
    even = allowed.sum(-1).float().log()  # entropy of attending evenly, per query
    seen = even > 0  # the first query of a causal row sees one key: nothing to spread
    layers = []
    for weights in attentions:  # [rows, heads, query, key]
        entropy = -(weights * weights.clamp_min(1e-12).log()).sum(-1)
        diagonal = weights.diagonal(dim1=-2, dim2=-1)
        before = weights.diagonal(offset=-1, dim1=-2, dim2=-1)
        layers.append({"entropy": float((entropy[..., seen] / even[seen]).mean()),
                       "self": float(diagonal.mean()),
                       "previous": float(before.mean())})
    return layers


def held_out_text(batches: list[dict]) -> torch.Tensor:
    """The held-out rows with their hidden pieces put back: attention is measured on the
    text as fine-tuning will show it, with no [MASK] in it."""
    ids = torch.cat([b["input_ids"] for b in batches])
    labels = torch.cat([b["labels"] for b in batches])
    return torch.where(labels == IGNORE_INDEX, ids, labels)


def measure_run(name: str, steps: int | None) -> dict:
    """Pretrain one run keeping every evaluated step; measure attention at each."""
    torch.set_num_threads(1)
    settings = dict(RUNS[name])
    if steps is not None:
        settings.update(steps=steps, warmup_steps=steps // 10, eval_every=max(1, steps // 4))
    every = settings["eval_every"]
    keep_at = tuple(range(every, settings["steps"] + 1, every))
    articles = bbc_news()
    texts = {part: [a.text for a in articles
                    if split_of(a.name) == part] for part in ("train", "dev")}
    causal = settings["objective"] == "left-to-right"
    with tempfile.TemporaryDirectory() as folder:
        tokenizer = train_wordpiece(texts["train"], settings["vocab_size"])  # chapter 08's, shared
        run = pretrain(texts["train"], run_for(settings, progress=False), folder, texts["dev"],
                       tokenizer, keep_at=keep_at, device=torch.device("cpu"))
        batch = {"input_ids": held_out_text(run.held_out_batches)[:ROWS_MEASURED]}
        seed_everything(0)
        random_weights = BertModel(BertConfig.from_json(run.folder))
        points = [{"step": 0, "layers": attention_structure(random_weights, batch, causal)}]
        for step, checkpoint in sorted(run.kept.items()):
            model = BertModel.from_pretrained(checkpoint)
            curve = next(p for p in run.curve if p["step"] == step)
            points.append({"step": step, "loss": curve["loss"],
                           "layers": attention_structure(model, batch, causal)})
    return {"run": name, "settings": settings, "causal": causal,
            "unigram_cross_entropy": run.baselines["unigram_cross_entropy"],
            "points": points}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, help="shorten the runs (to try the script)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    with ProcessPoolExecutor(max_workers=len(RUNS)) as pool:
        results = list(pool.map(measure_run, RUNS, [args.steps] * len(RUNS)))
    for result in results:
        print(f"{result['run']} (unigram cross-entropy "
              f"{result['unigram_cross_entropy']:.2f} nats)")
        for point in result["points"]:
            loss = f"loss {point['loss']:.2f}" if "loss" in point else "random weights"
            layers = "  ".join(f"L{i}: entropy {layer['entropy']:.2f} self "
                               f"{layer['self']:.2f} previous {layer['previous']:.2f}"
                               for i, layer in enumerate(point["layers"]))
            print(f"  step {point['step']:5} {loss:15} {layers}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"command": " ".join(["python", *sys.argv]),
                                    "rows_measured": ROWS_MEASURED, "runs": results},
                                   indent=1) + "\n", encoding="utf-8")
    print(f"written: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
