"""Chapter 08's "watching attention form": the shipped measurements and their plot.

`benchmarks/attention_structure.py` pretrains the chapter's two small models with a
checkpoint every 100 steps and measures, per layer, how spread out each query's attention
is and how much of it falls on the piece just before. Its results ship with the book
(`bertbook.runs.shipped_results("attention_structure")`), so the chapter can show them
without the eight minutes the measurement takes.
"""

import matplotlib.pyplot as plt

__all__ = ["plot_attention_structure", "attention_structure_summary"]


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
