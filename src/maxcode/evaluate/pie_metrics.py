"""PIE's headline metrics over tasks, each from the best of the first k candidates.

As in PIE: a candidate counts only when correct on 100% of tests; a task's best@k speedup is
the largest speedup among its correct candidates among the first k; a task with none keeps
the original program (speedup 1.0). %Opt is the share of tasks with best speedup >= 1.1,
%Correct the share with at least one correct candidate. PIE floors speedups at 1.0 (a slower
candidate would not be adopted); ``floor`` switches that, and the label names it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from maxcode.evaluate.result import EvalResult

OPT_THRESHOLD = 1.1


@dataclass(frozen=True)
class Outcome:
    correct: bool
    speedup: float | None  # None when not correct or not timed

    @classmethod
    def of(cls, result: EvalResult) -> Outcome:
        return cls(result.status.correct, result.speedup)


def best_at_k(candidates: Sequence[Outcome | EvalResult], k: int) -> float | None:
    """Largest speedup among correct candidates in the first ``k``; None if none is correct."""
    if k < 1:
        raise ValueError(f"k={k}: best@k needs k >= 1")
    outcomes = [c if isinstance(c, Outcome) else Outcome.of(c) for c in candidates[:k]]
    speedups = [o.speedup for o in outcomes if o.correct and o.speedup is not None]
    return max(speedups) if speedups else None


@dataclass(frozen=True)
class PieMetrics:
    k: int
    floor: bool
    n_tasks: int
    mean_speedup: float
    pct_opt: float
    pct_correct: float

    @property
    def speedup_label(self) -> str:
        return f"speedup best@{self.k}" + (" (floored at 1.0)" if self.floor else " (not floored)")

    def to_dict(self) -> dict:
        return {
            "k": self.k,
            "speedup_floor_1": self.floor,
            "speedup_label": self.speedup_label,
            "n_tasks": self.n_tasks,
            "mean_speedup": self.mean_speedup,
            "pct_opt": self.pct_opt,
            "pct_correct": self.pct_correct,
        }


def pie_metrics(
    per_task: Mapping[str, Sequence[Outcome | EvalResult]], k: int, floor: bool = True
) -> PieMetrics:
    """Mean best@k speedup, %Opt and %Correct (percentages 0-100) over ``per_task``."""
    if not per_task:
        raise ValueError("pie_metrics needs at least one task")
    speedups, opt, correct = [], 0, 0
    for task_id, candidates in per_task.items():
        if not candidates:
            raise ValueError(f"task {task_id!r} has no candidates; count it with an empty proposal")
        best = best_at_k(candidates, k)
        if best is not None:
            correct += 1
            opt += best >= OPT_THRESHOLD
        value = 1.0 if best is None else best
        speedups.append(max(value, 1.0) if floor else value)
    n = len(per_task)
    return PieMetrics(k, floor, n, sum(speedups) / n, 100.0 * opt / n, 100.0 * correct / n)
