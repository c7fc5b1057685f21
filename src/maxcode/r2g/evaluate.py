"""Ranking quality of a reward-to-go model on held-out tasks, as the paper reports it.

A group is one (run, step): the candidates the reranker would have chosen among.
- Average rank (1 = best true return) of the candidate the model picks, against a
  uniformly random pick (exact expectation) and the policy's first proposal.
- Spearman correlation of predicted and true returns, pooled and within groups.
- Equal budget: executing only the top m = max(1, k // 4) by predicted value keeps
  what share of the best-of-k reward, against a random m (exact expectation).
"""

from __future__ import annotations

import time
from collections import defaultdict
from math import comb

import numpy as np
from scipy.stats import spearmanr

from maxcode.r2g.base import Candidate, R2GReranker
from maxcode.r2g.dataset import R2GExample
from maxcode.search.types import Score


def budget_m(k: int) -> int:
    """Evaluations per step at the paper's quarter budget."""
    return max(1, k // 4)


def evaluate_reranker(reranker: R2GReranker, examples: list[R2GExample]) -> dict:
    """Score each group as one batch (as the search does) and compute :func:`ranking_metrics`."""
    groups = _groups(examples)
    scores: dict[int, Score] = {}
    latencies = []
    for members in groups.values():
        t0 = time.perf_counter()
        out = reranker.score_candidates([Candidate.of(examples[i]) for i in members])
        latencies.append(time.perf_counter() - t0)
        scores.update(zip(members, out, strict=True))
    ordered = [scores[i] for i in range(len(examples))]
    metrics = ranking_metrics(examples, ordered)
    metrics["reranker"] = reranker.name
    metrics["score_latency_s_per_group"] = float(np.median(latencies)) if latencies else None
    return metrics


def ranking_metrics(examples: list[R2GExample], scores: list[Score]) -> dict:
    """Metrics over all examples and per suite; groups with one candidate have nothing to rank."""
    if len(examples) != len(scores):
        raise ValueError(f"{len(examples)} examples but {len(scores)} scores")
    out = {"all": _metrics(examples, scores), "suites": {}}
    for suite in sorted({e.suite for e in examples}):
        idx = [i for i, e in enumerate(examples) if e.suite == suite]
        out["suites"][suite] = _metrics([examples[i] for i in idx], [scores[i] for i in idx])
    return out


def expected_random_max(rewards: list[float], m: int) -> float:
    """E[max reward of a uniformly random m-subset], exactly: sorted r_i is the max w.p. C(i-1, m-1)/C(k, m)."""
    r = sorted(rewards)
    k = len(r)
    return sum(r[i] * comb(i, m - 1) for i in range(m - 1, k)) / comb(k, m)


def _groups(examples: list[R2GExample]) -> dict[tuple[str, int], list[int]]:
    groups: dict[tuple[str, int], list[int]] = defaultdict(list)
    for i, e in enumerate(examples):
        groups[e.group].append(i)
    return dict(groups)


def _metrics(examples: list[R2GExample], scores: list[Score]) -> dict:
    pred = np.array([s.value for s in scores], dtype=float)
    true = np.array([e.value for e in examples], dtype=float)
    ranks_model, ranks_random, ranks_first = [], [], []
    kept_model, kept_random = [], []
    reward_model, reward_random, reward_all = [], [], []
    within = []
    evals_m = evals_k = 0
    for members in _groups(examples).values():
        if len(members) < 2:
            continue
        members = sorted(members, key=lambda i: examples[i].proposal_index)
        values = true[members]
        rank_of = [1 + int((values > v).sum()) for v in values]
        # The loop breaks ties by proposal order: sorted by (-score, index).
        order = sorted(range(len(members)), key=lambda j: (-pred[members[j]], j))
        ranks_model.append(rank_of[order[0]])
        ranks_random.append(float(np.mean(rank_of)))
        ranks_first.append(rank_of[0])

        k, m = len(members), budget_m(len(members))
        rewards = [examples[i].reward for i in members]
        best, top = max(rewards), max(rewards[j] for j in order[:m])
        rand = expected_random_max(rewards, m)
        reward_model.append(top)
        reward_random.append(rand)
        reward_all.append(best)
        evals_m += m
        evals_k += k
        if best > 0:
            kept_model.append(top / best)
            kept_random.append(rand / best)
        if np.ptp(values) > 0 and np.ptp(pred[members]) > 0 and k >= 3:
            within.append(float(spearmanr(pred[members], values).statistic))

    pooled = None
    if len(true) >= 3 and np.ptp(true) > 0 and np.ptp(pred) > 0:
        pooled = float(spearmanr(pred, true).statistic)
    mean = lambda xs: float(np.mean(xs)) if xs else None  # noqa: E731
    return {
        "candidates": len(examples),
        "groups": len(ranks_model),
        "fallback_share": float(np.mean([s.fallback for s in scores])) if scores else None,
        "avg_rank_model": mean(ranks_model),
        "avg_rank_random": mean(ranks_random),
        "avg_rank_first": mean(ranks_first),
        "spearman_pooled": pooled,
        "spearman_within_group": mean(within),
        "spearman_groups": len(within),
        "budget_rule": "m = max(1, k // 4) of k executed per step",
        "evaluations_top_m": evals_m,
        "evaluations_all_k": evals_k,
        "kept_share_top_m_model": mean(kept_model),
        "kept_share_top_m_random": mean(kept_random),
        "kept_share_groups": len(kept_model),
        "reward_top_m_model": mean(reward_model),
        "reward_top_m_random": mean(reward_random),
        "reward_all_k": mean(reward_all),
    }
