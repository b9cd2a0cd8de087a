"""Pretrain a BERT on the book's corpus: the same code as chapter 06, from the shell.

    python -m bertbook.pretrain --size cpu --out runs/cpu            # start
    python -m bertbook.pretrain --size cpu --out runs/cpu --resume   # continue after a stop
"""

import argparse
import math
import sys
from pathlib import Path

from bertbook.corpora import load_corpus, split_articles
from bertbook.runs import finished_run, has_checkpoint, run_folder, shipped_run
from bertlib.errors import BertlibError
from bertlib.pretraining.masking import MaskingRecipe
from bertlib.pretraining.run import PretrainingRun, pretrain
from bertlib.training.trainer import TrainingConfig

__all__ = ["SIZES", "run_for", "book_documents", "chapter_06_model", "main"]


# smoke and cpu train the recipe that transfers (chapter 08 measures why): a 40% mask, no
# dropout, the masked LM alone, on Wikipedia plus the BBC articles' unlabelled training
# text. gpu follows the paper: 15%, dropout 0.1, with next-sentence prediction.
SIZES = {
    "smoke": dict(corpus="wikipedia+bbc", articles=None, vocab_size=2000, model="bert-tiny",
                  max_seq_length=64, batch_size=32, steps=400, learning_rate=2e-3, warmup_steps=40,
                  eval_every=100, precision="fp32", mask_probability=0.4, dropout=0.0,
                  objective="mlm"),
    "cpu": dict(corpus="wikipedia+bbc", articles=None, vocab_size=4000, model="bert-tiny",
                max_seq_length=128, batch_size=32, steps=1600, learning_rate=2e-3, warmup_steps=160,
                eval_every=200, precision="fp32", mask_probability=0.4, dropout=0.0,
                objective="mlm"),
    "gpu": dict(corpus="wikitext-103", articles=5000, vocab_size=30522, model="bert-small",
                max_seq_length=128, batch_size=128, steps=12000, learning_rate=5e-4,
                warmup_steps=1200,
                eval_every=1500, precision="auto", mask_probability=0.15, dropout=0.1,
                objective="mlm+nsp"),
}


def run_for(settings: dict, progress: bool = True) -> PretrainingRun:
    """The PretrainingRun a size's settings describe (chapter 08's too: its tables add
    objective, mask_probability, dropout and seed). What a table leaves out takes the
    library's default (the paper's: mlm+nsp, 15% masked, dropout 0.1)."""
    length = settings["max_seq_length"]
    probability = settings.get("mask_probability", MaskingRecipe.probability)
    checkpoint_every = settings["eval_every"] if settings.get("checkpoints", True) else 0
    chosen = {name: settings[name] for name in ("objective", "dropout") if name in settings}
    seed = {"seed": settings["seed"]} if "seed" in settings else {}
    return PretrainingRun(
        preset=settings["model"], vocab_size=settings["vocab_size"], max_seq_length=length,
        masking=MaskingRecipe(probability=probability,
                              max_predictions=math.ceil(probability * length)),
        **chosen,
        training=TrainingConfig(
            steps=settings["steps"], batch_size=settings["batch_size"],
            learning_rate=settings["learning_rate"], warmup_steps=settings["warmup_steps"],
            precision=settings["precision"], eval_every=settings["eval_every"],
            checkpoint_every=checkpoint_every, progress=progress, **seed))


def book_documents(settings: dict) -> tuple[list[tuple[str, ...]], list[tuple[str, ...]]]:
    """The size's corpus as (training, held-out) documents, each its paragraphs: 10% of
    the articles are held out, always the same ones. "+bbc" adds the BBC articles of
    chapter 07's training split as unlabelled text (headline first), and its dev split's
    to the held-out text; its test split is read by nothing here."""
    corpus, with_bbc = settings["corpus"].removesuffix("+bbc"), settings["corpus"].endswith("+bbc")
    articles = load_corpus(corpus, settings["articles"])
    train, held_out = split_articles(articles, held_out=0.1, seed=0)
    train, held_out = [a.paragraphs for a in train], [a.paragraphs for a in held_out]
    if with_bbc:
        from bertbook.datasets import bbc_news, split_of
        news = [(a.name, (a.headline, *a.paragraphs)) for a in bbc_news()]
        train += [text for name, text in news if split_of(name) == "train"]
        held_out += [text for name, text in news if split_of(name) == "dev"]
    return train, held_out


def chapter_06_model(size: str) -> Path:
    """The model folder of chapter 06's run at this size, for chapters 07 and 08, which
    fine-tune it. A finished run is reused as it is. Without one (a chapter run on its own)
    a copy of chapter 06's run made with the current recipe is used where the book ships
    one (the `cpu` size), so a chapter alone stays within its time; elsewhere the model is
    pretrained now, as chapter 06 pretrains it. The cell says which, and why. (A re-run of
    chapter 06 may land near the copy's scores rather than on them.)"""
    finished = finished_run(f"ch06-{size}")
    if finished is not None:
        return finished
    shipped = shipped_run(f"ch06-{size}", run_for(SIZES[size]).description())
    if shipped is not None:
        print(f"chapter 06 has not run at the {size} size here: using a copy of its run "
              "with the current recipe, shipped with the book (run chapter 06 first to "
              "fine-tune a model you pretrained yourself)")
        return shipped
    folder = run_folder(f"ch06-{size}")  # a run cut short: resumed where it is kept
    settings = SIZES[size]
    print(f"chapter 06's model is not in {folder}: pretraining it now, as chapter 06 does "
          f"({settings['steps']:,} steps; about 4 minutes at the cpu size)")
    train, held_out = book_documents(settings)
    resume = has_checkpoint(folder)  # anything else there is a run cut short: start again
    pretrain(train, run_for(settings, progress=False), folder, held_out, resume=resume,
             overwrite=not resume)
    return folder / "model"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bertbook.pretrain",
                                     description="Pretrain a BERT on the book's corpus.")
    parser.add_argument("--size", choices=sorted(SIZES), required=True)
    parser.add_argument("--out", type=Path, required=True, help="folder for the run")
    parser.add_argument("--resume", action="store_true", help="continue the run in --out")
    parser.add_argument("--overwrite", action="store_true", help="replace the run in --out")
    parser.add_argument("--steps", type=int, help="override the size's number of steps")
    parser.add_argument("--corpus", help="override the size's corpus (wikipedia, lee-news...)")
    parser.add_argument("--mask-probability", type=float,
                        help="override the share of pieces hidden")
    parser.add_argument("--objective", choices=["mlm+nsp", "mlm"])
    args = parser.parse_args(argv)
    settings = dict(SIZES[args.size])
    for name in ("steps", "corpus", "mask_probability", "objective"):
        if getattr(args, name) is not None:
            settings[name] = getattr(args, name)
    settings["warmup_steps"] = min(settings["warmup_steps"], settings["steps"] - 1)
    if args.resume and args.overwrite:
        parser.error("--resume continues the run in --out and --overwrite replaces it: "
                     "pass one of them")
    if (args.out / "checkpoint.pt").exists() and not (args.resume or args.overwrite):
        parser.error(f"{args.out} already holds a run; pass --resume to continue it, "
                     "--overwrite to replace it, or choose another --out")
    try:
        train, held_out = book_documents(settings)
        result = pretrain(train, run_for(settings), args.out, held_out, resume=args.resume,
                          overwrite=args.overwrite)
    except BertlibError as error:  # a clear message is enough: no traceback
        print(f"error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # the trainer has said where the run stands
        return 130
    print(f"done: {result.state.step} steps; held-out {result.evaluation}; "
          f"baselines {result.baselines}; model saved in {result.folder}")
    return 0
