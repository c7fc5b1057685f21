"""Ranking a problem's real candidates: the reward-to-go model against random m and all k.

Per held-out problem (one pool of distinct programs, k of them), with m = max(1, k // 4):
- Spearman correlation of the model's scores and the measured rewards;
- the best reward among the model's top m, against a uniformly random m (exact
  expectation) and all k; as a share of the best of all k, so pools rewarded by inverse
  runtime compare with pools rewarded by speedup; and in speedup units where the pool has them;
- the share of correct programs among the model's top m, against random m;
- average rank as MaxCode reports it: per problem, the selections (model top m, random m) are
  ranked by the best reward they execute (1 = best, ties share), then averaged over problems.
Every mean comes with a percentile bootstrap interval over problems.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np
from scipy.stats import spearmanr

from maxcode.r2g.dataset import R2GExample
from maxcode.r2g.evaluate import budget_m, expected_random_max
from maxcode.report.stats import bootstrap_ci
from maxcode.search.types import Score

MIN_CANDIDATES = 4


def per_problem(examples: list[R2GExample], scores: list[Score]) -> list[dict]:
    """One row of metrics per pool with at least MIN_CANDIDATES programs and a correct one
    (a pool where every program failed has nothing to rank)."""
    groups: dict[str, list[int]] = defaultdict(list)
    for i, e in enumerate(examples):
        groups[e.run_id].append(i)
    rows = []
    for run_id, idx in sorted(groups.items()):
        if len(idx) < MIN_CANDIDATES:
            continue
        idx = sorted(idx, key=lambda i: examples[i].proposal_index)
        rewards = np.array([examples[i].reward for i in idx])
        if rewards.max() <= 0:
            continue
        pred = np.array([scores[i].value for i in idx])
        k, m = len(idx), budget_m(len(idx))
        order = sorted(range(k), key=lambda j: (-pred[j], j))
        top = float(max(rewards[j] for j in order[:m]))
        rand = expected_random_max(list(rewards), m)
        best = float(rewards.max())
        correct = rewards > 0
        rank_model = 1.0 if top > rand else (2.0 if top < rand else 1.5)
        rho = None
        if np.ptp(rewards) > 0 and np.ptp(pred) > 0:
            rho = float(spearmanr(pred, rewards).statistic)
        label_source, problem = run_id.split(":", 1)
        rows.append(
            {
                "problem": problem,
                "level": int(problem[1 : problem.index("/")]),
                "label_source": label_source,
                "k": k,
                "m": m,
                "spearman": rho,
                "best_top_m": top,
                "best_random_m": rand,
                "best_all_k": best,
                "kept_top_m": top / best,
                "kept_random_m": rand / best,
                "correct_top_m": float(np.mean([correct[j] for j in order[:m]])),
                "correct_random_m": float(correct.mean()),
                "rank_model": rank_model,
                "rank_random": 3.0 - rank_model,
            }
        )
    return rows


METRICS = (
    ("spearman", "Spearman within problem"),
    ("kept_top_m", "best of top m / best of all k"),
    ("correct_top_m", "share correct in top m"),
    ("rank_model", "avg rank (paper)"),
)


def summarize(rows: list[dict], samples: int, confidence: float, seed: int = 0) -> dict:
    """Means with bootstrap intervals over problems, for the model and for random m."""

    def stat(key: str) -> dict:
        values = [r[key] for r in rows if r[key] is not None]
        if not values:
            return {"mean": None, "ci": [None, None], "problems": 0}
        lo, hi = bootstrap_ci(values, samples, confidence, seed)
        return {"mean": float(np.mean(values)), "ci": [lo, hi], "problems": len(values)}

    return {
        "problems": len(rows),
        "candidates": int(sum(r["k"] for r in rows)),
        "model": {
            "spearman": stat("spearman"),
            "kept": stat("kept_top_m"),
            "correct": stat("correct_top_m"),
            "avg_rank": stat("rank_model"),
            "best": stat("best_top_m"),
        },
        "random_m": {
            "kept": stat("kept_random_m"),
            "correct": stat("correct_random_m"),
            "avg_rank": stat("rank_random"),
            "best": stat("best_random_m"),
        },
        "all_k": {"best": stat("best_all_k")},
    }


def breakdown(rows: list[dict], samples: int, confidence: float) -> dict:
    """The summary over all held-out problems, per level and per label source."""
    out = {"all": summarize(rows, samples, confidence)}
    for level in sorted({r["level"] for r in rows}):
        out[f"level{level}"] = summarize(
            [r for r in rows if r["level"] == level], samples, confidence
        )
    for src in sorted({r["label_source"] for r in rows}):
        out[src] = summarize([r for r in rows if r["label_source"] == src], samples, confidence)
    return out


def flat_metrics(block: dict, prefix: str = "") -> dict:
    """Nested metric blocks as one flat mapping (``"top_m.share_correct"``), numbers only."""
    flat = {}
    for key, value in block.items():
        if isinstance(value, dict):
            flat.update(flat_metrics(value, f"{prefix}{key}."))
        elif isinstance(value, int | float) and not isinstance(value, bool):
            flat[f"{prefix}{key}"] = value
    return flat


def corpus_rerank_summary(report: dict, kind: str) -> dict:
    """The corpus ranking of one model kind in the shape the rerank table reads."""
    block = report["kinds"][kind]
    return {
        "model": {"kind": kind, "name": block["model"]},
        "metrics": flat_metrics(block["summary"]["all"]),
    }
