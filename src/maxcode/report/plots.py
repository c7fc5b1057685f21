"""Plots written by the pipeline (PNG, headless)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt


def plot_scaling(curve: list[dict], path: Path, title_note: str, confidence: float) -> None:
    """Best speedup vs evaluations spent, one line per method, with CI bands."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=120)
    methods = list(dict.fromkeys(p["method"] for p in curve))
    for method in methods:
        pts = [p for p in curve if p["method"] == method]
        x = [p["evaluations"] for p in pts]
        ax.plot(x, [p["mean"] for p in pts], marker="o", label=method)
        ax.fill_between(x, [p["ci_low"] for p in pts], [p["ci_high"] for p in pts], alpha=0.15)
    ax.set_xlabel("evaluations spent (search depth x executed per step)")
    ax.set_ylabel("mean best speedup")
    ax.set_title(f"Speedup vs search depth ({title_note}; {int(confidence * 100)}% CI)", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    tmp = path.with_suffix(".tmp.png")
    fig.savefig(tmp)
    plt.close(fig)
    tmp.replace(path)
