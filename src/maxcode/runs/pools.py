"""A problem's pool of corpus programs, each with its measured outcome under one label source.

Our own measurements win where a problem has any (the evaluator and GPU that measured most of
its programs); otherwise the usable published labels of the GPU that labelled most of them. A
pool never mixes label sources. Where the labels give runtimes but no reference time, the
reward is ``1000 / runtime_ms``: ranks and ratios are exact, absolute values are not speedups.
The reward-to-go dataset and the replay policy both read pools from here.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass

from maxcode.runs.record import Attempt, CorpusRecord

SPEEDUP = "speedup"
INVERSE_RUNTIME = "1000/runtime_ms (speedup up to the pool's reference time)"


@dataclass(frozen=True)
class Measured:
    """A program's measured outcome under one label source."""

    correct: bool
    speedup: float | None
    runtime_ms: float | None


@dataclass(frozen=True)
class Pool:
    problem: str  # "L2/12_Gemm_Multiply_LeakyReLU.py"
    level: int
    label_source: str  # "ours/<evaluator>/<gpu>" or "published/<gpu>"
    reward_kind: str
    members: list[tuple[CorpusRecord, Measured]]


def build_pools(
    records: list[CorpusRecord],
    measurements: dict[tuple[str, str], dict] | None = None,
    published: bool = True,
) -> list[Pool]:
    """One pool per problem; ``published=False`` keeps only problems we measured."""
    by_problem: dict[str, list[CorpusRecord]] = defaultdict(list)
    for r in records:
        by_problem[r.problem.key].append(r)
    pools = []
    for key, members in sorted(by_problem.items()):
        pool = _ours(key, members, measurements or {})
        if pool is None and published:
            pool = _published(key, members)
        if pool is not None:
            pools.append(pool)
    return pools


def _ours(key: str, members: list[CorpusRecord], measurements: dict) -> Pool | None:
    rows = [(r, measurements.get((r.code_hash, r.problem.reference_hash))) for r in members]
    rows = [(r, m) for r, m in rows if m is not None]
    if not rows:
        return None
    source = Counter(f"ours/{m['evaluator']}/{m['gpu']}" for _, m in rows).most_common(1)[0][0]
    chosen = [
        (r, Measured(m["status"] == "ok", m.get("speedup"), m.get("runtime_ms")))
        for r, m in rows
        if f"ours/{m['evaluator']}/{m['gpu']}" == source
    ]
    return Pool(key, members[0].problem.level, source, SPEEDUP, chosen)


def _published(key: str, members: list[CorpusRecord]) -> Pool | None:
    usable: dict[str, list[tuple[CorpusRecord, Attempt]]] = defaultdict(list)
    for r in members:
        seen = set()
        for a in r.attempts:
            if a.label.usable and a.label.gpu and a.label.gpu not in seen:
                seen.add(a.label.gpu)
                usable[a.label.gpu].append((r, a))
    if not usable:
        return None
    gpu = max(sorted(usable), key=lambda g: len(usable[g]))
    rows = usable[gpu]
    with_speedup = all(a.label.speedup is not None for _, a in rows if a.label.correct)
    chosen = []
    for r, a in rows:
        runtime = a.label.runtime_ms
        speedup = a.label.speedup if with_speedup else (1000.0 / runtime if runtime else None)
        if a.label.correct and speedup is None:
            continue  # correct but never timed: no reward to give it
        chosen.append((r, Measured(bool(a.label.correct), speedup, runtime)))
    kind = SPEEDUP if with_speedup else INVERSE_RUNTIME
    return Pool(key, members[0].problem.level, f"published/{gpu}", kind, chosen)


def reward(m: Measured) -> float:
    return float(m.speedup) if m.correct and m.speedup is not None else 0.0
