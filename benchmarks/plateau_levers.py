"""The masked LM's plateau, lever by lever: chapter 08's table comes from this script.

Every run pretrains bert-tiny on the unlabelled text of the BBC training articles with
`bertlib.pretraining.run.pretrain`, changing one setting of BERT's recipe at a time (and
the two best together), and is scored on the same hidden pieces of the dev articles. For
each it records the learning curve and the step at which the held-out loss first lies a
nat below the unigram line (`steps_to_leave_plateau`). Runs use one thread each, `--jobs`
of them at once; run it alone on the machine, since the minutes are part of the result.

    python benchmarks/plateau_levers.py                 # all levers, about 30 min on 2 cores
    python benchmarks/plateau_levers.py --steps 40 --only "BERT's recipe" --out /tmp/x.json
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import torch

from bertbook.comparison import steps_to_leave_plateau
from bertbook.corpora import load_corpus
from bertbook.datasets import bbc_news, split_of
from bertbook.pretrain import run_for
from bertlib.pretraining.run import pretrain

# Shipped in the book package, so that the chapter shows the table on Colab too.
RESULTS = Path(__file__).parents[1] / "bertbook" / "resources" / "plateau_levers.json"
BERT = dict(model="bert-tiny", vocab_size=4000, max_seq_length=128, batch_size=32, steps=1200,
            learning_rate=2e-3,
            warmup_steps=120, mask_probability=0.15, dropout=0.1, eval_every=100, precision="fp32",
            objective="mlm", checkpoints=False)
LEVERS = {  # name: (changes to BERT's recipe, pretrain on general text instead of the task's)
    "BERT's recipe": ({}, False),
    "mask 40%": ({"mask_probability": 0.4}, False),
    "dropout off": ({"dropout": 0.0}, False),
    "mask 40% + dropout off": ({"mask_probability": 0.4, "dropout": 0.0}, False),
    "rows of 64 (batch 64)": ({"max_seq_length": 64, "batch_size": 64}, False),
    "vocabulary 2,000": ({"vocab_size": 2000}, False),
    "learning rate 5e-3": ({"learning_rate": 5e-3}, False),
    "Wikipedia, not the task's text": ({}, True),
    "left-to-right (for reference)": ({"objective": "left-to-right", "steps": 600,
                                       "warmup_steps": 60}, False),
}


def article_texts() -> dict[str, list[str]]:
    """The BBC articles' text by split, as chapter 08 builds it."""
    texts: dict[str, list[str]] = {"train": [], "dev": []}
    for article in bbc_news():
        part = split_of(article.name)
        if part in texts:
            texts[part].append(article.text)
    return texts


def general_text(words: int) -> list[str]:
    """Wikipedia paragraphs (the offline sample) up to about `words` words."""
    chosen, total = [], 0
    for article in load_corpus("wikipedia"):
        for paragraph in article.paragraphs:
            if total >= words:
                return chosen
            chosen.append(paragraph)
            total += len(paragraph.split())
    return chosen


def run_lever(name: str, steps: int | None) -> dict:
    """One lever's run, in its own process with one thread."""
    torch.set_num_threads(1)
    changes, general = LEVERS[name]
    settings = {**BERT, **changes}
    if steps is not None:
        settings.update(steps=steps, warmup_steps=steps // 10, eval_every=max(1, steps // 4))
    texts = article_texts()
    train = general_text(sum(len(t.split()) for t in texts["train"])) if general else texts["train"]
    with tempfile.TemporaryDirectory() as folder:
        run = pretrain(train, run_for(settings, progress=False), folder, texts["dev"],
                       device=torch.device("cpu"))
    return {"lever": name, "settings": settings,
            "curve": [dict(point, accuracy=point["mlm_accuracy"]) for point in run.curve],
            "unigram_loss": run.baselines["unigram_cross_entropy"],
            "train_tokens": run.train_tokens, "steps_to_leave_plateau": steps_to_leave_plateau(run)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", nargs="+", choices=sorted(LEVERS), help="levers to run")
    parser.add_argument("--steps", type=int, help="shorten every run (to try the script)")
    parser.add_argument("--jobs", type=int, default=2, help="runs at once, one thread each")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    names = args.only or list(LEVERS)
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        results = list(pool.map(run_lever, names, [args.steps] * len(names)))
    for result in results:
        last = result["curve"][-1]
        print(f"{result['lever']:32} accuracy {last['accuracy']:.3f}  loss - unigram "
              f"{last['loss'] - result['unigram_loss']:+.2f}  left the plateau at "
              f"{result['steps_to_leave_plateau']}  ({last['seconds'] / 60:.1f} min)")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"command": " ".join(["python", *sys.argv]),
                                    "runs": results}, indent=1) + "\n", encoding="utf-8")
    print(f"written: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
