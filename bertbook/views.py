"""Views that work wherever a chapter runs: in Jupyter, in the HTML book, on GitHub, and as a
plain script (`python chapters/NN.py`, as on a GPU machine without Jupyter).

bertviz's attention views are JavaScript: they draw in a live notebook with a network, and
stay blank offline, on GitHub (which runs no JavaScript) and in a script. So every view of
attention here is first a static heatmap, drawn with matplotlib, and then, where bertviz
can draw (it is installed and the code runs in a notebook kernel), its interactive view.
"""

from __future__ import annotations

import sys

import matplotlib.pyplot as plt
import torch

__all__ = ["in_notebook", "show_markdown", "show_attention"]


def in_notebook() -> bool:
    """Whether this code runs in a Jupyter kernel (where HTML and JavaScript display): a
    kernel has imported IPython and runs its shell for Jupyter, ZMQInteractiveShell (or,
    on Colab, a subclass of it)."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    return any(kind.__name__ == "ZMQInteractiveShell" for kind in type(shell).__mro__)


def show_markdown(text: str) -> None:
    """Markdown rendered in a notebook; the text itself in a script."""
    if in_notebook():
        from IPython.display import Markdown, display
        display(Markdown(text))
    else:
        print(text)


def plot_heads(weights: torch.Tensor, tokens: list[str], title: str, columns: int = 4) -> None:
    """Each head's (tokens x tokens) weights of one layer, one small heatmap a head: rows
    are the token attending, columns the token attended to."""
    heads = weights.shape[0]
    rows = -(-heads // columns)
    width = min(columns, heads)
    fig, axes = plt.subplots(rows, width, figsize=(2.6 * width, 2.6 * rows), squeeze=False)
    for head, ax in enumerate(axes.flat):
        ax.axis("off")
        if head >= heads:
            continue
        ax.imshow(weights[head].float().cpu(), cmap="Blues", vmin=0, vmax=1)
        ax.set_title(f"head {head}", fontsize=9)
        if len(tokens) <= 24:  # labels stay readable up to about two dozen tokens
            ax.axis("on")
            ax.set_xticks(range(len(tokens)), tokens, rotation=90, fontsize=6)
            ax.set_yticks(range(len(tokens)), tokens, fontsize=6)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    plt.show()


def show_attention(attentions: tuple[torch.Tensor, ...], tokens: list[str], layer: int,
                   sentence_b_start: int | None = None, interactive: str = "head") -> None:
    """One layer's heads as static heatmaps (first row of the batch), then bertviz's
    interactive `head` or `model` view of every layer where it can draw."""
    plot_heads(attentions[layer][0], tokens, f"layer {layer + 1}: where each token attends")
    if not in_notebook():
        print("(bertviz's interactive view draws in a notebook; the heatmaps above are the "
              "same weights)")
        return
    try:
        import bertviz
    except ImportError:
        print("(bertviz is not installed: pip install bertviz for the interactive view)")
        return
    view = bertviz.head_view if interactive == "head" else bertviz.model_view
    view(attentions, tokens, sentence_b_start=sentence_b_start)
