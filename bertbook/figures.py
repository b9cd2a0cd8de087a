"""The figures of chapters 06, 07 and 08: a pretraining run read against its yardsticks,
starts compared on few labels, two pretraining runs side by side, the plateau levers,
attention forming, and the label curve.

Drawing code is plumbing, so the chapter calls these and shows the pictures. The shipped
measurements come from `benchmarks/plateau_levers.py` and `benchmarks/attention_structure.py`
(loaded with `bertbook.runs.shipped_results`), so the chapter can show them without the
time those measurements take.
"""

import matplotlib.pyplot as plt
import torch

from bertbook.comparison import Comparison

__all__ = ["plot_pretraining_run", "plot_starts_on_tasks", "plot_pretraining_runs",
           "plot_plateau_levers", "plot_attention_structure", "attention_structure_summary",
           "plot_label_curve"]


def plot_pretraining_run(result, title: str) -> None:
    """Chapter 06's run in three panels: the training loss (smoothed over about 50 windows),
    held-out accuracy against the most frequent piece (and next-sentence accuracy against a
    coin, when the run has that task), and held-out perplexity against the unigram's."""
    curve, baselines = result.curve, result.baselines
    steps = [point["step"] for point in curve]
    losses = torch.tensor([record["loss"] for record in result.state.history])
    window = max(1, len(losses) // 50)
    smoothed = losses.unfold(0, window, window).mean(1)
    fig, axes = plt.subplots(1, 3, figsize=(14, 3.4))
    objective = ("masked LM + next sentence" if result.run.objective == "mlm+nsp"
                 else "masked LM")
    axes[0].plot(torch.arange(len(smoothed)) * window + window, smoothed, label=objective)
    axes[0].set_ylabel("training loss")
    axes[1].plot(steps, [p["mlm_accuracy"] for p in curve], marker="o", label="masked pieces")
    axes[1].axhline(baselines["most_frequent"], color="gray", linestyle="--",
                    label="most frequent piece")
    if "nsp_accuracy" in curve[0]:  # the paper's second task, apart from the first
        axes[1].plot(steps, [p["nsp_accuracy"] for p in curve], marker="s",
                     label="next sentence")
        axes[1].axhline(0.5, color="gray", linestyle=":", label="a coin")
    axes[1].set_ylabel("held-out accuracy")
    axes[2].plot(steps, [p["perplexity"] for p in curve], marker="o", label="held-out")
    axes[2].axhline(baselines["unigram_perplexity"], color="gray", linestyle=":",
                    label="unigram")
    axes[2].set_yscale("log")
    axes[2].set_ylabel("masked-piece perplexity")
    for ax in axes:
        ax.set_xlabel("step")
        ax.legend(fontsize=8)
    fig.suptitle(title)
    plt.tight_layout()
    plt.show()


def plot_starts_on_tasks(results: dict[tuple[str, str], Comparison], starts: list[str],
                         tasks: list[str], per_class: int) -> None:
    """Chapter 07's few-labels comparison: one bar per start and task, mean ± s.d. over label
    draws and seeds, against chance for two balanced classes."""
    fig, ax = plt.subplots(figsize=(7, 3))
    width = 0.25
    for offset, name in enumerate(starts):
        scores = [results[(task, name)] for task in tasks]
        ax.bar([i + (offset - 1) * width for i in range(len(tasks))], [r.mean for r in scores],
               width, yerr=[r.sd for r in scores], capsize=4, label=name)
    ax.axhline(0.5, color="grey", linestyle=":", label="chance (two balanced classes)")
    ax.set_xticks(range(len(tasks)), tasks)
    ax.set(ylabel="test accuracy", ylim=(0.3, 1.0),
           title=f"{per_class} labels per class (mean ± s.d. over draws and seeds)")
    ax.legend(fontsize=8, loc="upper left")
    plt.show()


def plot_pretraining_runs(runs: dict, labels: dict[str, str], device_type: str) -> None:
    """Held-out accuracy and loss above the unigram guess against tokens read, and accuracy
    against wall-clock minutes, for each pretraining result in `runs` (name -> result)."""
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.4))
    for name, run in runs.items():
        tokens = [p["tokens"] / 1e6 for p in run.curve]
        unigram = run.baselines["unigram_cross_entropy"]
        axes[0].plot(tokens, [p["mlm_accuracy"] for p in run.curve], marker=".",
                     label=labels[name])
        axes[1].plot(tokens, [p["loss"] - unigram for p in run.curve], marker=".",
                     label=labels[name])
        axes[2].plot([p["seconds"] / 60 for p in run.curve],
                     [p["mlm_accuracy"] for p in run.curve], marker=".", label=labels[name])
    axes[1].axhline(0, color="gray", linestyle="--", label="unigram guess")
    axes[1].axhline(-1, color="gray", linestyle=":", label="left the plateau")
    for ax, (x, y) in zip(axes, [("million tokens read", "held-out accuracy"),
                                 ("million tokens read", "held-out loss - unigram (nats)"),
                                 (f"minutes on this machine ({device_type})",
                                  "held-out accuracy")]):
        ax.set_xlabel(x)
        ax.set_ylabel(y)
        ax.legend(fontsize=8)
    fig.suptitle("The same rows, two objectives: scored on the same hidden pieces of held-out "
                 "text")
    plt.tight_layout()
    plt.show()


def plot_plateau_levers(levers: dict) -> None:
    """Held-out loss above the unigram guess, step by step, for each shipped lever run."""
    fig, ax = plt.subplots(figsize=(8, 3.8))
    for lever in levers["runs"]:
        ax.plot([p["step"] for p in lever["curve"]],
                [p["loss"] - lever["unigram_loss"] for p in lever["curve"]], marker=".",
                label=lever["lever"],
                linestyle="--" if "left-to-right" in lever["lever"] else "-")
    ax.axhline(-1, color="gray", linestyle=":")
    ax.set_xlabel("step (batch of 32 rows of 128 pieces, unless the lever changes it)")
    ax.set_ylabel("held-out loss - unigram (nats)")
    ax.legend(fontsize=7, ncol=2)
    plt.show()


def plot_attention_structure(structure: dict) -> None:
    """Three panels across training: held-out loss above the unigram guess, attention
    entropy per layer (1 = spread evenly), attention on the piece before."""
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.4))
    for run, style in zip(structure["runs"], ["-", "--"]):
        trained = run["points"][1:]  # step 0 (random weights) has no held-out loss
        axes[0].plot([p["step"] for p in trained],
                     [p["loss"] - run["unigram_cross_entropy"] for p in trained],
                     style, marker=".", label=run["run"])
        for layer in range(len(run["points"][0]["layers"])):
            for ax, measure in zip(axes[1:], ["entropy", "previous"]):
                ax.plot([p["step"] for p in run["points"]],
                        [p["layers"][layer][measure] for p in run["points"]],
                        style, marker=".", label=f"{run['run']}, layer {layer}")
    axes[0].axhline(0, color="gray", linestyle=":", label="unigram guess")
    for ax, label in zip(axes, ["held-out loss - unigram (nats)", "attention entropy / even",
                                "attention on the piece before"]):
        ax.set(xlabel="pretraining step", ylabel=label)
        ax.legend(fontsize=7)
    plt.tight_layout()
    plt.show()


def attention_structure_summary(structure: dict) -> list[str]:
    """One line per run: each layer's entropy and piece-before share, first step to last."""
    lines = []
    for run in structure["runs"]:
        first, last = run["points"][0], run["points"][-1]
        lines.append(f"{run['run']:14} step 0 -> {last['step']}: " + "; ".join(
            f"layer {i} entropy {a['entropy']:.2f} -> {b['entropy']:.2f}, piece before "
            f"{a['previous']:.2f} -> {b['previous']:.2f}"
            for i, (a, b) in enumerate(zip(first["layers"], last["layers"]))))
    return lines


def plot_label_curve(lines: dict[str, dict[int, Comparison]], counts: list[int],
                     dashed: set[str]) -> None:
    """Test accuracy (mean ± s.d.) against labels per class, on a log scale; the names in
    `dashed` (baselines) are drawn dashed."""
    fig, ax = plt.subplots(figsize=(9.5, 4))
    for name, points in lines.items():
        ax.errorbar(counts, [points[n].mean for n in counts],
                    yerr=[points[n].sd for n in counts], marker="o", capsize=3, label=name,
                    linestyle="--" if name in dashed else "-")
    ax.set(xscale="log", xlabel="labels per class (log scale)", ylabel="test accuracy",
           title="BBC topics: accuracy against labels per class (mean ± s.d.)")
    ax.minorticks_off()  # the log scale's own labels would overprint the counts
    ax.set_xticks(counts, [str(n) for n in counts])
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5))  # off the curves
    fig.tight_layout()
    plt.show()
