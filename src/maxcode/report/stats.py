"""Summary statistics for tables: means with bootstrap intervals, paired differences,
average ranks."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy.stats import rankdata


def bootstrap_ci(
    values: Sequence[float], samples: int = 2000, confidence: float = 0.95, seed: int = 0
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean (seeded: tables are reproducible)."""
    arr = np.asarray(values, dtype=float)
    if arr.size == 0:
        return (float("nan"), float("nan"))
    if arr.size == 1:
        return (float(arr[0]), float(arr[0]))
    rng = np.random.default_rng(seed)
    means = rng.choice(arr, size=(samples, arr.size), replace=True).mean(axis=1)
    alpha = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(means, [alpha, 1.0 - alpha])
    return float(lo), float(hi)


def paired_difference(
    scores_by_unit: dict[object, dict[str, float]],
    method: str,
    baseline: str,
    samples: int = 2000,
    confidence: float = 0.95,
) -> tuple[float, float, float, int]:
    """Mean of ``method`` minus ``baseline`` over the units (task x seed) both ran, with a
    percentile bootstrap interval of that mean, and the number of units.

    Pairing removes the spread between tasks, which dominates the methods' own intervals:
    two methods whose intervals overlap can still differ on every task.
    """
    diffs = [
        s[method] - s[baseline] for s in scores_by_unit.values() if method in s and baseline in s
    ]
    if not diffs:
        return (float("nan"), float("nan"), float("nan"), 0)
    lo, hi = bootstrap_ci(diffs, samples, confidence)
    return (float(np.mean(diffs)), lo, hi, len(diffs))


def average_ranks(scores_by_unit: dict[object, dict[str, float]]) -> dict[str, float]:
    """Mean rank of each method over units (task x seed); 1 = fastest, ties share the mean rank.

    Only units where every method has a score count, so no method is ranked on easier tasks.
    """
    methods = sorted({m for scores in scores_by_unit.values() for m in scores})
    totals = dict.fromkeys(methods, 0.0)
    n = 0
    for scores in scores_by_unit.values():
        if set(scores) != set(methods):
            continue
        ranks = rankdata([-scores[m] for m in methods], method="average")
        for m, r in zip(methods, ranks, strict=True):
            totals[m] += float(r)
        n += 1
    return {m: (totals[m] / n if n else float("nan")) for m in methods}
