"""Fair comparisons of where fine-tuning starts: the same labels, a learning rate chosen on
dev for each start, several label draws and seeds, mean and spread; a frozen-encoder probe;
and a words-only baseline to set beside them."""

import math
import random
import re
import statistics
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from bertlib.batch import PaddingCollator
from bertlib.core.config import BertConfig
from bertlib.errors import InputError
from bertlib.finetuning.examples import TextExample
from bertlib.finetuning.models import BertForSequenceClassification, classification_features
from bertlib.finetuning.run import (
    FineTuningRecipe,
    evaluate_classification,
    fine_tune,
    new_head_expected,
)
from bertlib.runtime import seed_everything
from bertlib.tokenizer import BertTokenizer

__all__ = [
    "steps_to_leave_plateau",
    "Start",
    "start_from",
    "scratch_like",
    "label_draw",
    "fine_tuned_classifier",
    "accuracy_on",
    "Comparison",
    "models_trained",
    "compare_start",
    "clear_win",
    "sentence_vectors",
    "frozen_probe_accuracy",
    "frozen_probes",
    "scores_only",
    "words_of",
    "words_only_accuracy",
    "labels_to_match",
    "objective_verdict",
]


def steps_to_leave_plateau(result, nats_below_unigram: float = 1.0) -> int | None:
    """The first evaluated step of a pretraining result whose held-out loss lies
    nats_below_unigram under its unigram cross-entropy. None: the run never got there."""
    line = result.baselines["unigram_cross_entropy"] - nats_below_unigram
    return next((point["step"] for point in result.curve if point["loss"] <= line), None)


@dataclass(frozen=True)
class Start:
    """Where fine-tuning starts: a tokenizer, and a function from the number of labels to a
    fresh classifier (a checkpoint's weights, or random ones)."""

    tokenizer: BertTokenizer
    build: Callable[[int], nn.Module]


def start_from(folder) -> Start:
    """The checkpoint in folder, with a new classification head."""
    def load(num_labels: int) -> BertForSequenceClassification:
        with new_head_expected():
            return BertForSequenceClassification.from_pretrained(folder, num_labels=num_labels)

    return Start(BertTokenizer.from_pretrained(folder), load)


def scratch_like(folder) -> Start:
    """Random weights of the checkpoint's architecture and vocabulary: no pretraining."""
    return Start(BertTokenizer.from_pretrained(folder),
                 lambda n: BertForSequenceClassification(BertConfig.from_json(folder),
                                                         num_labels=n))


def label_draw(examples: list[TextExample], per_class: int, draw: int) -> list[TextExample]:
    """per_class examples of every label, drawn at random; the same draw number gives the
    same examples to every start."""
    by_label: dict[int, list[TextExample]] = {}
    for example in examples:
        by_label.setdefault(example.label, []).append(example)
    short = {label: len(group) for label, group in by_label.items() if len(group) < per_class}
    if short:
        raise InputError(f"fewer than {per_class} examples of labels {short}; ask for fewer "
                         "per class")
    rng = random.Random(f"label draw {draw}")
    chosen = [e for label in sorted(by_label) for e in rng.sample(by_label[label], per_class)]
    rng.shuffle(chosen)
    return chosen


def fine_tuned_classifier(start: Start, train: list[TextExample], recipe: FineTuningRecipe,
                          num_labels: int, max_length: int, device: torch.device) -> nn.Module:
    """A fresh model from start, fine-tuned on train."""
    tokenizer = start.tokenizer.with_max_length(max_length)
    seed_everything(recipe.seed)  # the new head's initial weights
    model = start.build(num_labels)
    fine_tune(model, classification_features(tokenizer, train), recipe,
              PaddingCollator(tokenizer.pad_id), device)
    return model


def accuracy_on(model: nn.Module, start: Start, scored: list[TextExample], max_length: int,
                device: torch.device) -> float:
    """The fine-tuned model's accuracy on scored, read with start's tokenizer."""
    tokenizer = start.tokenizer.with_max_length(max_length)
    scores = evaluate_classification(model, classification_features(tokenizer, scored),
                                     PaddingCollator(tokenizer.pad_id), device)
    return scores["accuracy"]


@dataclass
class Comparison:
    """One start at one number of labels: the rate dev chose, and the test accuracies."""

    learning_rate: float
    dev: dict[float, float]
    scores: list[float] = field(default_factory=list)

    @property
    def mean(self) -> float:
        return statistics.mean(self.scores)

    @property
    def sd(self) -> float:
        return statistics.stdev(self.scores) if len(self.scores) > 1 else 0.0

    def __str__(self) -> str:
        return f"{self.mean:.3f} ± {self.sd:.3f}"


def models_trained(rates: int, draws: int, seeds: int) -> int:
    """How many models compare_start fine-tunes: one dev run per rate, then draws x seeds
    test runs, less the chosen dev run, which is also the first test run."""
    return rates + draws * seeds - 1


def compare_start(start: Start, splits: dict[str, list[TextExample]], per_class: int,
                  recipe: FineTuningRecipe, learning_rates: list[float], draws: int = 3,
                  seeds: int = 2, max_length: int = 128,
                  device: torch.device | None = None) -> Comparison:
    """Choose the learning rate on dev (first label draw, first seed), then fine-tune on
    draws x seeds and score each on test. Test never chooses anything. Trains
    `models_trained` models: the chosen dev run is reused."""
    device = device or torch.device("cpu")
    num_labels = 1 + max(e.label for e in splits["train"])

    def run(learning_rate: float, draw: int, seed: int) -> nn.Module:
        chosen = label_draw(splits["train"], per_class, draw)
        tuned = FineTuningRecipe(**{**vars(recipe), "learning_rate": learning_rate, "seed": seed})
        return fine_tuned_classifier(start, chosen, tuned, num_labels, max_length, device)

    def score(model: nn.Module, split: str) -> float:
        return accuracy_on(model, start, splits[split], max_length, device)

    dev, best, best_model = {}, None, None
    for rate in learning_rates:
        model = run(rate, 0, 0)
        dev[rate] = score(model, "dev")
        if best is None or dev[rate] > dev[best]:  # the first of equals, as max() picks
            best, best_model = rate, model
    result = Comparison(best, dev)
    # The dev run at the chosen rate is also the first test run (draw 0, seed 0): the same
    # labels, seed and rate train the same weights, so it is scored, not trained again.
    result.scores = [score(best_model if (draw, seed) == (0, 0) else run(best, draw, seed),
                           "test") for draw in range(draws) for seed in range(seeds)]
    return result


def clear_win(ours: Comparison, theirs: Comparison) -> bool:
    """Our mean beats theirs by more than the two spreads together: a difference that the
    luck of the draws and seeds is unlikely to have made."""
    return ours.mean - theirs.mean > ours.sd + theirs.sd


@torch.no_grad()
def sentence_vectors(model: nn.Module, tokenizer, texts: list[str], max_length: int = 128,
                     batch_size: int = 64) -> torch.Tensor:
    """Each text's last-layer vectors averaged over its tokens (padding left out)."""
    model.eval()
    device = next(model.parameters()).device
    tokenizer = tokenizer.with_max_length(max_length)
    rows = []
    for first in range(0, len(texts), batch_size):
        batch = {k: v.to(device) for k, v in tokenizer(texts[first:first + batch_size]).items()}
        hidden = model(**batch).last_hidden_state
        mask = batch["attention_mask"][..., None].to(hidden.dtype)
        rows.append(((hidden * mask).sum(1) / mask.sum(1)).float().cpu())
    return torch.cat(rows)


def frozen_probe_accuracy(encoder: nn.Module, tokenizer, train: list[TextExample],
                          scored: list[TextExample], max_length: int = 128) -> float:
    """Nearest centroid on frozen sentence vectors: each scored text goes to the label whose
    mean training direction is closest in cosine. Nothing is trained, so it measures what
    the encoder already separates, not what fine-tuning can make of it."""
    train_vectors = F.normalize(sentence_vectors(encoder, tokenizer, [e.text for e in train],
                                                 max_length), dim=-1)
    labels = torch.tensor([e.label for e in train])
    centroids = torch.stack([train_vectors[labels == k].mean(0)
                             for k in range(int(labels.max()) + 1)])
    vectors = sentence_vectors(encoder, tokenizer, [e.text for e in scored], max_length)
    guesses = (F.normalize(vectors, dim=-1) @ F.normalize(centroids, dim=-1).T).argmax(1)
    return float((guesses == torch.tensor([e.label for e in scored])).float().mean())


def words_of(text: str) -> list[str]:
    """Lower-cased words and numbers, punctuation dropped."""
    return re.findall(r"[a-z0-9']+", text.lower())


def scores_only(scores: list[float]) -> Comparison:
    """A Comparison with no learning rate chosen: a probe's or a baseline's test scores, so
    they print and compare (clear_win) like fine-tuned ones."""
    return Comparison(0.0, {}, scores)


def frozen_probes(encoders: dict[str, tuple[Callable[[], nn.Module], str]],
                  draws: dict[int, list[list[TextExample]]], scored: list[TextExample],
                  max_length: int, device: torch.device) -> dict[str, dict[int, Comparison]]:
    """Every encoder's frozen-probe accuracy on `scored`, for each label count's draws.
    `encoders` maps a name to (a function that builds the encoder, its tokenizer's folder);
    the seed is fixed before each build, so a random encoder is the same one every time."""
    probes = {}
    for name, (build, folder) in encoders.items():
        torch.manual_seed(0)
        encoder, tokenizer = build().to(device), BertTokenizer.from_pretrained(folder)
        probes[name] = {n: scores_only([frozen_probe_accuracy(encoder, tokenizer, train, scored,
                                                              max_length) for train in chosen])
                        for n, chosen in draws.items()}
    return probes


def words_only_accuracy(train: list[TextExample], scored: list[TextExample]) -> float:
    """Multinomial naive Bayes on words (add-one smoothing): what the words alone tell,
    with no encoder at all. Words never seen in training are skipped."""
    counts: dict[int, Counter] = {}
    for example in train:
        counts.setdefault(example.label, Counter()).update(words_of(example.text))
    vocabulary = set().union(*counts.values())
    priors = Counter(example.label for example in train)

    def log_likelihood(label: int, words: list[str]) -> float:
        total = sum(counts[label].values()) + len(vocabulary)
        return math.log(priors[label]) + sum(math.log((counts[label][w] + 1) / total)
                                             for w in words if w in vocabulary)

    right = 0
    for example in scored:
        words = words_of(example.text)
        right += max(counts, key=lambda label: log_likelihood(label, words)) == example.label
    return right / len(scored)


def labels_to_match(curve: dict[int, float], accuracy: float) -> float | None:
    """How many labels per class a start needs to reach `accuracy`, read off its curve
    (labels per class -> mean accuracy) between measured points, on a log scale of labels.
    None: not reached within the curve. The curve's running best is used, since one more
    draw of labels can score a little lower by luck."""
    best, previous = 0.0, None
    for count in sorted(curve):
        best = max(best, curve[count])
        if best >= accuracy:
            if previous is None or previous[1] >= accuracy:
                return float(count)
            low, low_accuracy = previous
            share = (accuracy - low_accuracy) / (best - low_accuracy)
            return low * (count / low) ** share
        previous = (count, best)
    return None


def objective_verdict(mlm: Comparison, ltr: Comparison, chance: float | None = None) -> str:
    """Chapter 08's reading of one task of the paper's Table 5 at book scale: which
    objective wins beyond the spread, or none; a task neither learned (within 0.05 of
    `chance`) gives no verdict at all."""
    if chance is not None and max(mlm.mean, ltr.mean) <= chance + 0.05:
        return "neither learned it: no verdict"
    if clear_win(mlm, ltr):
        return "reading both ways wins, as in the paper"
    if clear_win(ltr, mlm):
        return "left to right wins"
    return "no difference beyond the spread"
