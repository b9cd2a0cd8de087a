"""Draw the book's diagrams into chapters/figures/ (SVG), with one palette and one font.

Each diagram is a function that draws on a blank matplotlib axis in "box units" (one unit is
about one line of text); `DIAGRAMS` names the file each one is saved to. The chapters show
them from markdown cells by relative path (`![...](figures/NAME.svg)`), which Jupyter, the
HTML book and GitHub resolve beside the notebook. Text is drawn as paths, so a diagram looks
the same wherever it is shown, whatever fonts the reader has.

    python tools/authoring/diagrams.py            # redraw every diagram (a few seconds)
    python tools/authoring/diagrams.py --png DIR  # also write PNG copies to DIR, to look at them
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Rectangle  # noqa: E402

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tools.chapters import ROOT  # noqa: E402

FIGURES = ROOT / "chapters" / "figures"
UNIT_INCHES = 0.42  # one box unit on the page: a 24-unit diagram is about 10 inches wide
PALETTE = {
    "token": "#dbe9f6", "segment": "#fde2c8", "position": "#dff2df", "sum": "#eeeeee",
    "attention": "#f6c89f", "ffn": "#b9e0b9", "norm": "#e6e6e6", "head": "#d9c8ec",
    "mask": "#f4b6b6", "random": "#fbe3a6", "keep": "#cfe8cf", "plain": "#ffffff",
    "edge": "#404040", "faint": "#9a9a9a", "accent": "#c0392b",
}
plt.rcParams.update({"font.family": "DejaVu Sans", "font.size": 10, "svg.fonttype": "path",
                     "svg.hashsalt": "bert-book"})


def canvas(width: float, height: float) -> tuple[plt.Figure, plt.Axes]:
    """A blank figure `width` × `height` box units, origin at the bottom left."""
    figure, axis = plt.subplots(figsize=(width * UNIT_INCHES, height * UNIT_INCHES))
    axis.set_xlim(0, width)
    axis.set_ylim(0, height)
    axis.set_aspect("equal")
    axis.axis("off")
    figure.subplots_adjust(0, 0, 1, 1)
    return figure, axis


def box(axis: plt.Axes, x: float, y: float, w: float, h: float, text: str = "",
        color: str = "plain", size: float = 10, weight: str = "normal",
        edge: str = "edge", dashed: bool = False) -> None:
    """A rounded box with centred text; (x, y) is its bottom-left corner."""
    axis.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0,rounding_size=0.15",
                                  facecolor=PALETTE[color], edgecolor=PALETTE[edge],
                                  linewidth=1.0, linestyle="--" if dashed else "-"))
    if text:
        axis.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=size,
                  weight=weight)


def arrow(axis: plt.Axes, start: tuple[float, float], end: tuple[float, float],
          color: str = "edge", curve: float = 0.0, width: float = 1.0,
          style: str = "-|>") -> None:
    """An arrow from `start` to `end`, bent by `curve` (0: straight)."""
    axis.add_patch(FancyArrowPatch(start, end, arrowstyle=style, mutation_scale=10,
                                   color=PALETTE[color], linewidth=width,
                                   connectionstyle=f"arc3,rad={curve}", shrinkA=1, shrinkB=1))


def label(axis: plt.Axes, x: float, y: float, text: str, size: float = 10,
          ha: str = "center", color: str = "edge", weight: str = "normal",
          style: str = "normal") -> None:
    axis.text(x, y, text, ha=ha, va="center", fontsize=size, color=PALETTE[color],
              weight=weight, style=style)


# --- the diagrams, in the order the chapters show them -----------------------------------

CHAPTERS = [("01", "reading one way"), ("02", "tokens"), ("03", "attention"),
            ("04", "the encoder"), ("05", "masking"), ("06", "pretraining"),
            ("07", "fine-tuning"), ("08", "what it buys"), ("09", "inside BERT"),
            ("10", "one device"), ("11", "many devices")]


def roadmap(axis: plt.Axes) -> None:
    """The book as a strip: what each chapter adds, grouped into build, train, use."""
    groups = [("build the model", 0, 4, "token"), ("train it", 4, 8, "attention"),
              ("look inside, make it fast", 8, 11, "ffn")]
    for title, first, last, color in groups:
        label(axis, 1.2 + first * 2.2 + (last - first) * 1.1 - 0.1, 3.55, title, size=10,
              weight="bold")
        for index in range(first, last):
            number, name = CHAPTERS[index]
            x = 0.3 + index * 2.2
            box(axis, x, 1.0, 2.0, 2.0, "", color=color)
            label(axis, x + 1.0, 2.45, number, size=12, weight="bold")
            label(axis, x + 1.0, 1.55, name.replace(" ", "\n", 1), size=7.5)
            if index < len(CHAPTERS) - 1:
                arrow(axis, (x + 2.0, 2.0), (x + 2.2, 2.0))
    label(axis, 12.3, 0.45, "bertlib grows by one piece per chapter; chapter 06 trains "
          "your BERT and 07–08 fine-tune it", size=8.5, style="italic")


def reading_directions(axis: plt.Axes) -> None:
    """Paper Figure 3 as this book tells it: what each model reads to represent a word."""
    words = ["the", "bank", "of", "the", "river"]
    rows = [("left to right (GPT-1)", 7.0, "one pass: a word sees only the words before it"),
            ("two one-way LSTMs (ELMo)", 4.2, "a left pass and a separate right pass, joined "
             "only at the top"),
            ("both ways at once (BERT)", 1.4, "every layer reads both sides; the word itself "
             "is masked")]

    def centre(index: int) -> float:
        return 0.4 + index * 3.2 + 1.2

    def read(y: float, source: int, color: str) -> None:
        """An arc under the boxes from word `source` to "bank", shallow when it is long."""
        distance = abs(centre(source) - centre(1))
        bend = min(0.6, 2.0 / distance) * (1 if source < 1 else -1)
        arrow(axis, (centre(source), y - 0.05), (centre(1) + (0.25 if source > 1 else -0.25),
                                                   y - 0.05), curve=bend, color=color)

    for title, y, note in rows:
        label(axis, 0.4, y + 1.45, title, ha="left", weight="bold")
        label(axis, 7.6, y + 1.45, note, ha="left", size=8.5, style="italic", color="faint")
        for index, word in enumerate(words):
            shown = "[MASK]" if index == 1 and "BERT" in title else word
            box(axis, 0.4 + index * 3.2, y, 2.4, 0.9, shown,
                color="mask" if index == 1 else "token", size=9)
        if "GPT" in title:
            read(y, 0, "edge")
        elif "ELMo" in title:
            read(y, 0, "edge")
            for source in (2, 3, 4):
                read(y, source, "faint")
        else:
            for source in (0, 2, 3, 4):
                read(y, source, "accent")


def wordpiece_split(axis: plt.Axes) -> None:
    """Greedy longest-match-first WordPiece on one word, against a small vocabulary."""
    label(axis, 0.2, 4.6, "word: unaffable", ha="left", weight="bold")
    label(axis, 0.2, 3.9, "vocabulary: un  ##aff  ##able  ##a  ##ff  a  b ...", ha="left",
          size=9, color="faint")
    steps = [("un", "longest prefix in the vocabulary"),
             ("##aff", "longest match of what is left, marked ##"),
             ("##able", "the rest: done")]
    letters = list("unaffable")
    spans = [(0, 2), (2, 5), (5, 9)]
    for index, letter in enumerate(letters):
        box(axis, 0.4 + index * 0.9, 2.3, 0.8, 0.9, letter, color="plain", size=10)
    for (start, stop), (piece, _), color in zip(spans, steps, ("token", "segment", "position")):
        x0, x1 = 0.4 + start * 0.9, 0.4 + stop * 0.9 - 0.1
        box(axis, x0, 0.6, x1 - x0, 0.9, piece, color=color, size=10, weight="bold")
        arrow(axis, ((x0 + x1) / 2, 2.25), ((x0 + x1) / 2, 1.55))
    for row, (piece, why) in enumerate(steps):
        label(axis, 9.2, 2.9 - row * 0.85, f"{row + 1}. {piece}: {why}", ha="left", size=9)


def attention_one_token(axis: plt.Axes) -> None:
    """Scaled dot-product attention for one query: scores, softmax, a weighted sum."""
    words = ["the", "bank", "of", "the", "river"]
    weights = [0.05, 0.20, 0.10, 0.05, 0.60]
    label(axis, 0.2, 6.6, "query: bank", ha="left", weight="bold")
    for index, (word, weight) in enumerate(zip(words, weights)):
        x = 0.4 + index * 2.6
        box(axis, x, 5.0, 2.2, 0.9, f"key: {word}", color="token", size=8.5)
        label(axis, x + 1.1, 4.45, "q·k / √d", size=8, color="faint")
        axis.add_patch(Rectangle((x + 0.5, 2.9), 1.2, 1.2 * weight / max(weights),
                                 facecolor=PALETTE["attention"], edgecolor=PALETTE["edge"],
                                 linewidth=0.8))
        label(axis, x + 1.1, 2.6, f"{weight:.2f}", size=9)
        box(axis, x, 1.2, 2.2, 0.9, f"value: {word}", color="ffn", size=8.5)
        arrow(axis, (x + 1.1, 2.35), (x + 1.1, 2.15), color="faint")
    label(axis, 13.6, 3.4, "softmax:\nweights\nsum to 1\n(made-up\nnumbers)", ha="left",
          size=8.5)
    box(axis, 4.6, 0.0, 4.2, 0.8, "output = Σ weight × value", color="sum", size=9)
    for index in range(len(words)):
        arrow(axis, (0.4 + index * 2.6 + 1.1, 1.15), (6.7, 0.85), color="faint")
    label(axis, 13.6, 5.45, "one score\nper key", ha="left", size=8.5)


def multi_head(axis: plt.Axes) -> None:
    """Queries, keys and values projected from each token, split into heads, each head
    attending on its own slice, merged back to one width."""
    label(axis, 0.2, 8.3, "hidden = heads × head size", ha="left", weight="bold")
    box(axis, 0.4, 6.9, 9.6, 0.9, "one token's vector (hidden, e.g. 768)", color="token",
        size=9)
    for index, name in enumerate(("query", "key", "value")):
        x = 0.4 + index * 3.3
        arrow(axis, (x + 1.5, 6.85), (x + 1.5, 6.15))
        box(axis, x, 5.2, 3.0, 0.9, f"{name}: linear", color="segment", size=9)
    label(axis, 10.4, 5.65, "three projections,\nhidden → hidden", ha="left", size=8.5)
    colors = ("attention", "segment", "head", "position")
    for head in range(4):
        x = 0.4 + head * 2.45
        box(axis, x, 2.5, 2.25, 0.9, f"head {head + 1}", color=colors[head], size=9)
        arrow(axis, (x + 1.1, 5.15), (x + 1.1, 3.45))
        arrow(axis, (x + 1.1, 2.45), (x + 1.1, 1.55))
    label(axis, 10.4, 4.3, "view(batch, seq,\nheads, head size)", ha="left", size=8.5)
    label(axis, 10.4, 2.95, "each head attends\non its own slice\nof q, k and v", ha="left",
          size=8.5)
    box(axis, 0.4, 0.6, 9.6, 0.9, "concatenate the heads, then one linear layer", color="sum",
        size=9)


def input_rows(axis: plt.Axes) -> None:
    """Paper Figure 2: token, segment and position embeddings, summed per position."""
    tokens = ["[CLS]", "my", "dog", "is", "cute", "[SEP]", "he", "likes", "play", "##ing", "[SEP]"]
    segments = ["A"] * 6 + ["B"] * 5
    rows = [("token", "E_{}", tokens, 3.6), ("segment", "E_{}", segments, 2.3),
            ("position", "E_{}", [str(i) for i in range(len(tokens))], 1.0)]
    label(axis, 0.2, 6.5, "input", ha="left", weight="bold", size=9)
    for index, token in enumerate(tokens):
        box(axis, 2.3 + index * 1.55, 6.1, 1.4, 0.8, token, color="plain", size=7.5)
    for name, pattern, values, y in rows:
        label(axis, 0.2, y + 0.4, name, ha="left", size=9, weight="bold")
        for index, value in enumerate(values):
            box(axis, 2.3 + index * 1.55, y, 1.4, 0.8, pattern.format(value), color=name,
                size=7.5)
        label(axis, 1.95, y + 0.4 + 0.65, "+" if name != "token" else "", size=12)
    for index in range(len(tokens)):
        arrow(axis, (2.3 + index * 1.55 + 0.7, 6.05), (2.3 + index * 1.55 + 0.7, 4.45),
              color="faint")
    label(axis, 2.3, 0.35, "summed, then LayerNorm and dropout: one vector per position",
          ha="left", size=8.5, style="italic")


def elbow(axis: plt.Axes, points: list[tuple[float, float]], color: str = "accent") -> None:
    """A line through `points` with an arrowhead on its last segment (a residual path)."""
    xs, ys = zip(*points[:-1])
    axis.plot(xs, ys, color=PALETTE[color], linewidth=1.0)
    arrow(axis, points[-2], points[-1], color=color)


def encoder_layer(axis: plt.Axes) -> None:
    """One post-LN encoder layer, and the stack of them with the pooler on [CLS]."""
    label(axis, 4.0, 11.0, "one encoder layer", weight="bold")
    parts = [("multi-head self-attention", "attention", 1.6),
             ("add & LayerNorm", "norm", 3.4), ("feed-forward: 4× wider, GELU, back",
                                                 "ffn", 5.2), ("add & LayerNorm", "norm", 7.0)]
    box(axis, 1.4, 0.2, 5.2, 0.8, "x (one vector per token)", color="token", size=9)
    arrow(axis, (4.0, 1.0), (4.0, 1.6))
    for text, color, y in parts:
        box(axis, 1.4, y, 5.2, 1.0, text, color=color, size=8.5)
        if y < 7.0:
            arrow(axis, (4.0, y + 1.0), (4.0, y + 1.8))
    arrow(axis, (4.0, 8.0), (4.0, 8.8))
    label(axis, 4.0, 9.2, "to the next layer", size=8.5)
    elbow(axis, [(4.0, 1.3), (0.7, 1.3), (0.7, 3.9), (1.4, 3.9)])
    elbow(axis, [(4.0, 4.8), (7.3, 4.8), (7.3, 7.5), (6.6, 7.5)])
    label(axis, 0.55, 2.6, "residual", size=7.5, color="accent", ha="right")
    label(axis, 7.45, 6.15, "residual", size=7.5, color="accent", ha="left")
    label(axis, 13.7, 11.0, "the stack", weight="bold")
    box(axis, 10.3, 0.2, 6.8, 0.8, "token + segment + position", color="token", size=8.5)
    for layer, y in enumerate((1.6, 3.1, 4.6, 6.6)):
        text = f"layer {layer + 1}" if layer < 3 else "layer L (12 in BERT-base)"
        box(axis, 10.3, y, 6.8, 1.0, text, color="attention", size=8.5)
        if layer < 3:
            arrow(axis, (13.7, y - 0.55), (13.7, y - 0.05))
    label(axis, 13.7, 6.1, "⋮", size=12)
    box(axis, 10.3, 8.1, 3.2, 1.0, "[CLS] vector", color="head", size=8.5)
    box(axis, 13.9, 8.1, 3.2, 1.0, "other tokens", color="token", size=8.5)
    arrow(axis, (11.9, 9.1), (11.9, 9.7))
    box(axis, 10.3, 9.7, 3.2, 0.9, "pooler: tanh(W·)", color="head", size=8.5)
    arrow(axis, (15.5, 9.1), (15.5, 9.7))
    label(axis, 15.5, 10.1, "per-token\noutputs", size=8)


def eighty_ten_ten(axis: plt.Axes) -> None:
    """BERT's masking of one sentence: choose 15%, then 80% [MASK], 10% random, 10% kept."""
    words = ["my", "dog", "is", "hairy", "and", "he", "likes", "to", "play", "fetch"]
    chosen = {3: ("[MASK]", "mask", "80%: [MASK]"), 6: ("apple", "random", "10%: a random word"),
              8: ("play", "keep", "10%: unchanged")}
    label(axis, 0.2, 5.0, "input", ha="left", weight="bold", size=9)
    label(axis, 0.2, 2.9, "model sees", ha="left", weight="bold", size=9)
    label(axis, 0.2, 0.8, "loss", ha="left", weight="bold", size=9)
    for index, word in enumerate(words):
        x = 2.4 + index * 1.6
        box(axis, x, 4.6, 1.4, 0.8, word, color="token", size=8.5)
        shown, color, _ = chosen.get(index, (word, "plain", ""))
        box(axis, x, 2.5, 1.4, 0.8, shown, color=color, size=8 if shown == "[MASK]" else 8.5)
        arrow(axis, (x + 0.7, 4.55), (x + 0.7, 3.35), color="faint" if index not in chosen
              else "accent")
        if index in chosen:
            box(axis, x, 0.4, 1.4, 0.8, f"= {word}?", color="sum", size=8)
            arrow(axis, (x + 0.7, 2.45), (x + 0.7, 1.25), color="accent")
    for index, (_, _, why) in chosen.items():
        label(axis, 2.4 + index * 1.6 + 0.7, 3.95, why, size=7, color="accent")
    label(axis, 18.9, 2.9, "15% of the tokens are chosen;\nonly they are scored",
          ha="left", size=8.5, style="italic")


def next_sentence(axis: plt.Axes) -> None:
    """How a next-sentence pair is built from one document (and a random other one)."""
    label(axis, 0.2, 5.4, "a document", ha="left", weight="bold", size=9)
    for index in range(5):
        box(axis, 0.4 + index * 2.5, 4.3, 2.3, 0.8, f"sentence {index + 1}", color="token",
            size=8.5)
    box(axis, 0.4, 2.3, 4.8, 0.8, "A: sentences 1–2", color="segment", size=8.5)
    box(axis, 5.6, 2.3, 4.8, 0.8, "B: sentence 3 (IsNext)", color="keep", size=8.5)
    box(axis, 5.6, 0.5, 4.8, 0.8, "B: from another document", color="mask", size=8.5)
    arrow(axis, (2.8, 4.25), (2.8, 3.15))
    arrow(axis, (6.65, 4.25), (7.6, 3.15))
    label(axis, 10.8, 2.7, "half the time", ha="left", size=8.5)
    label(axis, 10.8, 0.9, "half the time: NotNext", ha="left", size=8.5)
    label(axis, 0.4, 1.2, "[CLS] A [SEP] B [SEP]\nsegments 0 … 0 1 … 1", ha="left", size=8.5,
          style="italic")


def pretraining_heads(axis: plt.Axes) -> None:
    """Paper Figure 1, left: one encoder, two heads, the sum of two losses."""
    tokens = ["[CLS]", "my", "[MASK]", "is", "[SEP]", "he", "likes", "[SEP]"]
    for index, token in enumerate(tokens):
        x = 0.4 + index * 1.9
        box(axis, x, 0.3, 1.7, 0.8, token, color="mask" if token == "[MASK]" else "token",
            size=8.5)
        arrow(axis, (x + 0.85, 1.15), (x + 0.85, 1.75), color="faint")
    box(axis, 0.4, 1.8, 15.0, 1.6, "BERT encoder (chapter 04): one vector per token, both ways",
        color="attention", size=9.5)
    box(axis, 0.4, 4.1, 3.0, 1.0, "NSP head:\nIsNext / NotNext", color="head", size=8)
    box(axis, 3.6, 4.1, 3.0, 1.0, "MLM head: 'dog'\nout of 30,522", color="head", size=8)
    arrow(axis, (1.25, 3.45), (1.25, 4.05), color="accent", width=1.4)
    arrow(axis, (5.05, 3.45), (5.05, 4.05), color="accent", width=1.4)
    label(axis, 7.0, 4.85, "the NSP head reads [CLS]; the MLM head reads each masked position",
          ha="left", size=8.5, style="italic")
    label(axis, 7.0, 4.2, "loss = MLM loss (masked positions only) + NSP loss", ha="left",
          size=9, weight="bold")


def fine_tuning_setups(axis: plt.Axes) -> None:
    """Paper Figure 4: the four ways a task sits on the same pretrained encoder."""
    panels = [("pair classification (MNLI, QQP)", "[CLS] A [SEP] B [SEP]", "class from [CLS]"),
              ("single sentence (SST-2, CoLA)", "[CLS] sentence [SEP]", "class from [CLS]"),
              ("question answering (SQuAD)", "[CLS] question [SEP] passage [SEP]",
               "start and end scores per passage token"),
              ("tagging (CoNLL-2003 NER)", "[CLS] w1 w2 w3 … [SEP]",
               "a tag per word's first piece")]
    for index, (title, text, output) in enumerate(panels):
        x = 0.3 + (index % 2) * 9.4
        y = 4.4 - (index // 2) * 4.2
        label(axis, x + 4.4, y + 3.45, title, weight="bold", size=9)
        box(axis, x, y, 8.8, 0.8, text, color="token", size=8.5)
        arrow(axis, (x + 4.4, y + 0.85), (x + 4.4, y + 1.25), color="faint")
        box(axis, x, y + 1.3, 8.8, 0.8, "pretrained BERT", color="attention", size=8.5)
        arrow(axis, (x + 4.4, y + 2.15), (x + 4.4, y + 2.45), color="accent")
        box(axis, x + 1.0, y + 2.5, 6.8, 0.6, output, color="head", size=8)


def two_masks(axis: plt.Axes) -> None:
    """Which position may read which: BERT's mask (all) against a left-to-right one."""
    words = ["the", "bank", "of", "the", "river"]
    for panel, (title, causal) in enumerate([("masked LM: every token reads all", False),
                                             ("left to right: itself and earlier", True)]):
        x0 = 1.6 + panel * 9.0
        label(axis, x0 + 3.0, 7.9, title, weight="bold", size=9)
        for row, word in enumerate(words):
            label(axis, x0 - 0.15, 5.9 - row * 1.2 + 0.5, word, ha="right", size=8.5)
            label(axis, x0 + row * 1.2 + 0.55, 7.2, word, size=8)
            for column in range(len(words)):
                allowed = column <= row or not causal
                box(axis, x0 + column * 1.2, 5.9 - row * 1.2, 1.1, 1.0, "",
                    color="attention" if allowed else "plain",
                    edge="edge" if allowed else "faint")
    label(axis, 9.0, 0.0, "rows: the position predicting; columns: what it may read",
          size=8.5, style="italic")


def probing(axis: plt.Axes) -> None:
    """A linear probe on each layer's vectors of a frozen encoder (chapter 09)."""
    label(axis, 2.6, 10.6, "frozen encoder", weight="bold", size=9)
    names = ["embeddings"] + [f"layer {n}" for n in range(1, 7)]
    for index, name in enumerate(names):
        y = 0.4 + index * 1.4
        box(axis, 0.4, y, 4.4, 1.0, name, color="norm" if index == 0 else "attention", size=9)
        if index:
            arrow(axis, (2.6, y - 0.38), (2.6, y - 0.02), color="faint")
            arrow(axis, (4.85, y + 0.5), (7.0, y + 0.5))
            box(axis, 7.05, y + 0.1, 4.4, 0.8, "linear probe", color="head", size=8.5)
            arrow(axis, (11.5, y + 0.5), (12.4, y + 0.5), color="faint")
            label(axis, 12.5, y + 0.5, f"score {index}", ha="left", size=8.5)
    label(axis, 9.25, 10.6, "trained alone, one per layer", weight="bold", size=9)
    label(axis, 7.0, -0.5, "a property a linear classifier reads off a layer is held there plainly",
          size=8.5, style="italic")


def step_time(axis: plt.Axes) -> None:
    """One training step, in the order it runs; forward and backward drawn in the ratio of
    their FLOPs (1 : 2), the other parts small."""
    parts = [("batch to the device", "plain", 3.2, ""), ("forward", "attention", 4.0, "1×"),
             ("loss", "mask", 1.2, ""), ("backward", "ffn", 8.0, "2×: input and weight\n"
                                                               "gradients"),
             ("AdamW step", "head", 2.4, "")]
    x = 0.3
    for name, color, width, note in parts:
        box(axis, x, 1.6, width, 1.2, name, color=color, size=9)
        if note:
            label(axis, x + width / 2, 0.9, note, size=8.5)
        x += width + 0.15
    label(axis, 10.0, 3.55, "one step: the matrix products' FLOPs ≈ 3 × the forward's",
          weight="bold", size=9)
    label(axis, 10.0, 0.0, "the profiler shows which operators take the time; MFU, how much of "
          "the chip's peak the products reach", size=8.5, style="italic")


def all_reduce(axis: plt.Axes) -> None:
    """Data parallelism: each process its slice of the batch, the gradients averaged."""
    for rank in range(3):
        y = 5.6 - rank * 2.4
        box(axis, 0.3, y, 3.4, 1.0, f"batch slice {rank + 1}", color="token", size=9)
        arrow(axis, (3.75, y + 0.5), (4.55, y + 0.5))
        box(axis, 4.6, y, 3.8, 1.0, f"model copy (rank {rank})", color="attention", size=9)
        arrow(axis, (8.45, y + 0.5), (9.25, y + 0.5))
        box(axis, 9.3, y, 2.8, 1.0, "gradients", color="ffn", size=9)
        arrow(axis, (12.15, y + 0.5), (13.45, 3.7), color="accent")
        arrow(axis, (16.05, 3.7), (17.2, y + 0.5), color="accent")
        box(axis, 17.25, y, 3.4, 1.0, "the same update", color="head", size=9)
    box(axis, 13.5, 3.2, 2.5, 1.0, "all-reduce:\naverage", color="mask", size=9)
    label(axis, 10.5, 7.35, "every rank starts from the same weights and ends each step with "
          "them", weight="bold", size=9)


DIAGRAMS: dict[str, tuple[Callable[[plt.Axes], None], tuple[float, float]]] = {
    "roadmap": (roadmap, (24.6, 4.0)),
    "reading_directions": (reading_directions, (19.0, 9.2)),
    "wordpiece": (wordpiece_split, (19.0, 5.0)),
    "attention": (attention_one_token, (16.2, 7.0)),
    "multi_head": (multi_head, (13.5, 8.7)),
    "input_rows": (input_rows, (19.6, 7.2)),
    "encoder": (encoder_layer, (17.4, 11.4)),
    "masking": (eighty_ten_ten, (24.0, 5.6)),
    "next_sentence": (next_sentence, (15.0, 5.8)),
    "pretraining": (pretraining_heads, (19.0, 5.6)),
    "fine_tuning": (fine_tuning_setups, (18.6, 8.0)),
    "attention_masks": (two_masks, (18.6, 8.3)),
    "probing": (probing, (15.2, 11.0)),
    "step_time": (step_time, (20.2, 4.0)),
    "all_reduce": (all_reduce, (21.0, 7.8)),
}


def draw(name: str, folder: Path, png: Path | None = None) -> Path:
    """Draw one diagram into `folder` as NAME.svg (and a PNG copy into `png`)."""
    function, (width, height) = DIAGRAMS[name]
    figure, axis = canvas(width, height)
    function(axis)
    path = folder / f"{name}.svg"
    figure.savefig(path, metadata={"Date": None}, bbox_inches="tight", pad_inches=0.08)
    if png is not None:
        figure.savefig(png / f"{name}.png", dpi=110, bbox_inches="tight", pad_inches=0.08)
    plt.close(figure)
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--png", type=Path, help="also write PNG copies here")
    args = parser.parse_args(argv)
    FIGURES.mkdir(exist_ok=True)
    if args.png:
        args.png.mkdir(parents=True, exist_ok=True)
    for name in DIAGRAMS:
        print(f"drew {draw(name, FIGURES, args.png).relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
