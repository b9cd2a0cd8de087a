"""The one road to a pretrained BERT: `pretrain(texts, run, out)`, and what it returns.

A `PretrainingRun` names everything a run depends on (objective, model size, masking
recipe, training settings) and is checked when it is built; `pretrain` trains a WordPiece
vocabulary (or takes one), builds masked-LM (or next-sentence) examples, trains with the
`Trainer`, scores held-out text against the unigram baselines, and saves a folder that
`from_pretrained` and transformers load. It checks that a folder it resumes was started
by the same run on the same text.

How this file is made: written by hand (chapter 06 tells the road in prose).
"""

import hashlib
import json
import math
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from torch import nn

from bertlib.batch import IGNORE_INDEX
from bertlib.core.config import BertConfig
from bertlib.errors import CheckpointError, ConfigError, InputError
from bertlib.files import write_atomically
from bertlib.pretraining.masking import MaskingRecipe, PretrainingCollator
from bertlib.pretraining.models import (
    BertForMaskedLM,
    BertForPreTraining,
    BertLMHeadModel,
    evaluate_pretraining,
)
from bertlib.pretraining.sentence_pairs import SentencePair, sentence_documents, sentence_pairs
from bertlib.runtime import best_device, resolve_precision, seed_everything
from bertlib.tokenizer import BertTokenizer, train_wordpiece
from bertlib.training.trainer import Trainer, TrainingConfig, TrainingState, prepare_output_dir

__all__ = [
    "unigram_baselines",
    "PretrainingRun",
    "packed_rows",
    "PretrainingResult",
    "pretrain",
]


def unigram_baselines(train_pieces: list[list[int]], held_out_batches: list[dict],
                      tokenizer) -> dict[str, float]:
    """The yardstick of a masked LM: guesses that read no context, from each piece's
    frequency in the training text (add-one smoothed; special tokens are never hidden).
    most_frequent and unigram are accuracies (always the commonest piece; a piece drawn
    with its frequency); unigram_cross_entropy (nats per hidden piece) and
    unigram_perplexity are the losses to compare with the model's."""
    ids = torch.tensor([piece for pieces in train_pieces for piece in pieces])
    counts = torch.bincount(ids, minlength=tokenizer.vocab_size).double() + 1
    counts[sorted(tokenizer.special_ids)] = 0
    share = counts / counts.sum()
    targets = torch.cat([b["labels"][b["labels"] != IGNORE_INDEX] for b in held_out_batches])
    cross_entropy = float(-share[targets].log().mean())
    return {"most_frequent": float((targets == share.argmax()).double().mean()),
            "unigram": float(share[targets].mean()),
            "unigram_cross_entropy": cross_entropy,
            "unigram_perplexity": math.exp(cross_entropy)}


# Which model each objective trains: the paper's two tasks, the masked LM alone (its
# "No NSP" row), and the left-to-right LM (its "LTR & No NSP" row, built in chapter 08).
MODEL_FOR_OBJECTIVE: dict[str, type] = {
    "mlm+nsp": BertForPreTraining,
    "mlm": BertForMaskedLM,
    "left-to-right": BertLMHeadModel,
}


@dataclass(frozen=True)
class PretrainingRun:
    """Everything that decides what a pretraining run learns, and so everything a resumed
    run must share with the run it continues. Saved as run.json beside the model."""

    preset: str = "bert-tiny"
    vocab_size: int = 4000
    max_seq_length: int = 128
    objective: str = "mlm+nsp"
    masking: MaskingRecipe = field(default_factory=MaskingRecipe)
    dropout: float = 0.1
    training: TrainingConfig = field(default_factory=lambda: TrainingConfig(steps=1000))

    def __post_init__(self) -> None:
        if self.max_seq_length < 8:
            raise ConfigError(f"max_seq_length must be at least 8 pieces, not "
                              f"{self.max_seq_length}")
        if not 0 <= self.dropout < 1:
            raise ConfigError(f"dropout must lie in [0, 1), not {self.dropout}")
        if self.objective not in MODEL_FOR_OBJECTIVE:
            raise ConfigError(f"objective must be one of {sorted(MODEL_FOR_OBJECTIVE)}, not "
                              f"{self.objective!r}")

    def model_class(self) -> type:
        """The model this run's objective trains."""
        return MODEL_FOR_OBJECTIVE[self.objective]

    def description(self) -> dict:
        """The run as JSON-ready data. How it is shown and built is left out (a progress
        bar, torch.compile): a run resumed with either changed is still the same run."""
        described = asdict(self)
        for how in ("progress", "compile"):
            described["training"].pop(how)
        return described


def packed_rows(tokenizer, documents: list[list[str]], length: int) -> list[list[int]]:
    """All documents' pieces end to end, a [SEP] after each document, cut into rows of
    exactly `length` ids that open with [CLS] and close with [SEP]. A tail too short for a
    row is dropped."""
    stream: list[int] = []
    for paragraphs in documents:
        for paragraph in paragraphs:
            stream += tokenizer.encode(paragraph).ids[1:-1]
        stream.append(tokenizer.sep_id)
    width = length - 2
    rows = [[tokenizer.cls_id, *stream[start:start + width], tokenizer.sep_id]
            for start in range(0, len(stream) - width + 1, width)]
    if not rows:
        raise InputError(f"the text holds {len(stream)} pieces, fewer than one row of "
                         f"{length}; give more text or a smaller max_seq_length")
    return rows


def _text_digest(documents: list[list[str]]) -> str:
    """A short fingerprint of the training text: a resumed run must read the same text."""
    text = "\n\n".join("\n".join(paragraphs) for paragraphs in documents)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _vocabulary_digest(tokenizer: BertTokenizer) -> str:
    """A fingerprint of the pieces and their ids: a resumed run must read the same ones."""
    pieces = "\n".join(sorted(tokenizer.vocab, key=tokenizer.vocab.__getitem__))
    return hashlib.sha256(pieces.encode("utf-8")).hexdigest()[:16]


_RUN_FILES = ("checkpoint.pt", "run.json", "vocabulary", "model")


def _claim(folder: Path, resume: bool, overwrite: bool) -> None:
    """Make sure a run may start (or go on) in folder: an existing run is continued only
    when asked (resume), replaced only when asked (overwrite), and otherwise left alone."""
    if resume and overwrite:
        raise ConfigError("resume=True continues the run in the folder and overwrite=True "
                          "replaces it: ask for one of them")
    held = [name for name in _RUN_FILES if (folder / name).exists()]
    held += sorted(path.name for path in folder.glob("step-*"))
    if resume and "checkpoint.pt" not in held:
        raise CheckpointError(f"{folder} holds no checkpoint.pt to resume from; start the "
                              "run without resuming")
    if held and not resume and not overwrite:
        choices = ("resume it (resume=True), replace it (overwrite=True)"
                   if "checkpoint.pt" in held else "replace it (overwrite=True)")
        raise CheckpointError(f"{folder} already holds a run ({', '.join(held)}); {choices}, "
                              "or choose another folder")
    if held and overwrite:
        for name in held:
            path = folder / name
            if path.is_dir():
                shutil.rmtree(path)
            else:
                path.unlink()


def _run_vocabulary(folder: Path, documents: list[list[str]], size: int, resume: bool,
                    given: BertTokenizer | None) -> BertTokenizer:
    """The run's vocabulary, kept in folder/vocabulary: learned (or given) at the start,
    read back on resume."""
    kept = folder / "vocabulary"
    if not resume:
        tokenizer = given or train_wordpiece([p for d in documents for p in d], size)
        tokenizer.save_pretrained(kept)
        return tokenizer
    if not (kept / "vocab.txt").is_file():
        raise CheckpointError(f"{folder} keeps no vocabulary/vocab.txt, so the pieces its "
                              "checkpoint was trained on are unknown; start a new run in "
                              "another folder")
    saved = BertTokenizer.from_pretrained(kept)
    if given is not None and given.vocab != saved.vocab:
        raise ConfigError(f"the tokenizer given differs from the one the run in {folder} "
                          "was trained with; resume without one (the run's is read back)")
    return saved


def _changes(saved, wanted, prefix: str = "") -> list[str]:
    """'field: old then, new now' for every leaf where two JSON descriptions differ."""
    if isinstance(saved, dict) and isinstance(wanted, dict):
        return [change for key in sorted(set(saved) | set(wanted))
                for change in _changes(saved.get(key), wanted.get(key), f"{prefix}{key}.")]
    return [] if saved == wanted else [f"{prefix[:-1]}: {saved!r} then, {wanted!r} now"]


def _check_run(folder: Path, record: dict, resume: bool) -> None:
    """A new run writes its record (the run's description, its text's digest) to
    run.json; a resumed one must match it, or it is refused with what differs."""
    path = folder / "run.json"
    if not resume:
        _write_json(path, record)
        return
    if not path.is_file():
        raise CheckpointError(f"{folder} has no run.json, so its settings cannot be "
                              "checked; start a new run in another folder")
    try:
        saved = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise CheckpointError(f"{path} cannot be read ({type(error).__name__}), so the run's "
                              "settings cannot be checked; start a new run in another "
                              "folder") from None
    changed = _changes(saved, json.loads(json.dumps(record)))  # JSON's types on both sides
    if changed:
        raise ConfigError(f"resuming would continue the run in {folder} with other "
                          f"settings ({'; '.join(changed)}); resume with the run's own "
                          "settings, or start a new run in another folder")


def _save(model: nn.Module, tokenizer, run: "PretrainingRun", folder: Path) -> Path:
    """The model, its tokenizer and the run it came from in one folder, as from_pretrained
    (bertlib's and transformers') reads it. The model goes back to its device."""
    device = next(model.parameters()).device
    model.cpu().save_pretrained(folder)
    model.to(device)
    # The saved tokenizer cuts texts where the model's position table ends, so a pipeline
    # asked to truncate a long text cuts it to a length the model can read.
    positions = model.config.max_position_embeddings
    tokenizer.with_max_length(min(tokenizer.max_length, positions)).save_pretrained(folder)
    _write_json(folder / "run.json", run.description())
    return folder


def _write_json(path: Path, data: dict) -> None:
    text = json.dumps(data, indent=2) + "\n"
    write_atomically(path, lambda temporary: temporary.write_text(text, encoding="utf-8"),
                     CheckpointError)


@dataclass
class PretrainingResult:
    """What pretrain leaves: the model folder, the trained model and tokenizer, the
    trainer's state, the learning curve (one held-out evaluation per eval_every steps), the
    final held-out scores and the unigram yardstick to read them against, and a folder for
    each step of keep_at (the same run, stopped earlier)."""

    folder: Path
    run: PretrainingRun
    model: nn.Module
    tokenizer: BertTokenizer
    state: TrainingState
    evaluation: dict[str, float]
    baselines: dict[str, float]
    held_out_batches: list[dict]
    train_tokens: int
    kept: dict[int, Path]

    @property
    def curve(self) -> list[dict]:
        return self.state.evaluations


def _examples(run: PretrainingRun, tokenizer, documents: list[list[str]], seed: int) -> list:
    """Sentence pairs for a run with next-sentence prediction, else packed rows."""
    if run.objective == "mlm+nsp":
        tokenized = sentence_documents(documents, lambda s: tokenizer.encode(s).ids[1:-1])
        return sentence_pairs(tokenized, max_seq_length=run.max_seq_length, seed=seed)
    return packed_rows(tokenizer, documents, run.max_seq_length)


def _as_documents(texts) -> list[list[str]]:
    """Each document as a list of paragraphs: a string is a one-paragraph document. A
    document or paragraph that is not text is named by its position, before any work."""
    if isinstance(texts, str):
        raise InputError("pretrain takes a list of documents, not one string; wrap it: "
                         "[text]")
    documents = []
    for number, text in enumerate(texts):
        if not isinstance(text, (str, list, tuple)):
            raise InputError(f"document {number} is {type(text).__name__}, not a string or a "
                             "list of paragraphs (strings)")
        paragraphs = [text] if isinstance(text, str) else list(text)
        for place, paragraph in enumerate(paragraphs):
            if not isinstance(paragraph, str):
                raise InputError(f"document {number}, paragraph {place} is "
                                 f"{type(paragraph).__name__}, not a string")
        documents.append(paragraphs)
    return documents


def pretrain(documents, run: PretrainingRun, output_dir: str | Path, held_out,
             tokenizer: BertTokenizer | None = None, resume: bool = False,
             keep_at: tuple[int, ...] = (), device: str | torch.device | None = None,
             overwrite: bool = False) -> PretrainingResult:
    """Pretrain a fresh model on documents (each a string, or a list of paragraphs) and
    score it on held_out every run.training.eval_every steps; save it in output_dir/model.

    A vocabulary is learned from the documents unless a tokenizer is given. resume
    continues the run whose checkpoint is in output_dir, after checking that it was asked for
    the same run on the same text. A folder that holds a run is never written over unless
    overwrite=True says to replace it; either way nothing in it changes before every check
    on the arguments has passed."""
    output_dir, device, training = Path(output_dir), best_device(device), run.training
    model_class = run.model_class()
    if any(not 0 < step <= training.steps or not training.eval_every
           or step % training.eval_every for step in keep_at):
        raise ConfigError(f"keep_at {keep_at} must name evaluated steps (multiples of "
                          f"eval_every={training.eval_every}, at most steps={training.steps})")
    documents, held_out = _as_documents(documents), _as_documents(held_out)
    _claim(output_dir, resume, overwrite)
    prepare_output_dir(output_dir)
    seed_everything(training.seed)
    tokenizer = _run_vocabulary(output_dir, documents, run.vocab_size, resume, tokenizer)
    _check_run(output_dir, {"run": run.description(), "text": _text_digest(documents),
                     "vocabulary": _vocabulary_digest(tokenizer)}, resume)
    examples = _examples(run, tokenizer, documents, training.seed)
    next_sentence = run.objective == "mlm+nsp"
    scoring = PretrainingCollator(tokenizer, MaskingRecipe(
        max_predictions=run.masking.max_predictions), training.seed + 1, next_sentence)
    held_out_examples = _examples(run, tokenizer, held_out, training.seed + 1)
    held_out_batches = [scoring(held_out_examples[i:i + 64])
                        for i in range(0, len(held_out_examples), 64)]
    config = BertConfig.preset(run.preset, vocab_size=tokenizer.vocab_size,
                               max_position_embeddings=run.max_seq_length,
                               hidden_dropout_prob=run.dropout,
                               attention_probs_dropout_prob=run.dropout)
    model = model_class(config)
    precision = resolve_precision(training.precision, device)
    kept: dict[int, Path] = {}
    started = time.perf_counter()

    def evaluate(trained: nn.Module) -> dict:
        step = trainer.state.step
        scores = evaluate_pretraining(trained, held_out_batches, device, precision)
        trained.train()
        if step in keep_at:
            kept[step] = _save(trained, tokenizer, run, output_dir / f"step-{step}")
        tokens = step * training.batch_size * run.max_seq_length
        return dict(tokens=tokens, seconds=round(time.perf_counter() - started, 1),
                    loss=math.log(scores["perplexity"]), **scores)

    collator = PretrainingCollator(tokenizer, run.masking, training.seed, next_sentence)
    trainer = Trainer(model, examples, collator, training, device, output_dir, evaluate=evaluate)
    state = trainer.train(resume=resume)
    if training.checkpoint_every:
        trainer.save_checkpoint()
    baselines = unigram_baselines([_pieces(e) for e in examples], held_out_batches, tokenizer)
    return PretrainingResult(
        _save(model, tokenizer, run, output_dir / "model"), run, model, tokenizer, state,
        evaluate_pretraining(model, held_out_batches, device, precision),
        baselines, held_out_batches, len(examples) * run.max_seq_length, kept)


def _pieces(example) -> list[int]:
    """The ids of one training example: a sentence pair's two segments, or a packed row."""
    if isinstance(example, SentencePair):
        return [*example.tokens_a, *example.tokens_b]
    return example
