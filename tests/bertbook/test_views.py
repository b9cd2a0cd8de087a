"""bertbook.views: a static figure wherever a chapter runs, the interactive view only where
a notebook can draw it."""

import matplotlib
import torch

from bertbook import views

matplotlib.use("Agg")


def test_outside_a_notebook_the_heads_are_drawn_and_bertviz_is_not_called(monkeypatch, capsys):
    shown = []
    monkeypatch.setattr(views.plt, "show", lambda: shown.append(views.plt.gcf()))
    weights = torch.softmax(torch.randn(1, 3, 5, 5), -1)
    views.show_attention((weights,), list("abcde"), layer=0)
    (figure,) = shown
    assert len([ax for ax in figure.axes if ax.images]) == 3  # one heatmap a head
    assert "draws in a notebook" in capsys.readouterr().out


def test_markdown_is_printed_outside_a_notebook(capsys):
    views.show_markdown("| a | b |")
    assert capsys.readouterr().out == "| a | b |\n"
