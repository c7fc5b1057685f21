"""Max-reward returns (action values) from rollout records.

MaxCode's objective is the best reward ever reached, not the sum, so the return of
step t is ``G_t = max_{k>=t} gamma^(k-t) * r_k``. For one candidate, the return is
the same max taken over the candidate and its descendants in the search tree
(children are the candidates proposed from it), which is what the reward-to-go
model learns to predict.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence


def step_returns(step_rewards: Sequence[float], gamma: float) -> list[float]:
    """``G_t = max_{k>=t} gamma^(k-t) r_k`` for every t, computed backwards in O(T)."""
    _check_gamma(gamma)
    returns = [0.0] * len(step_rewards)
    running = float("-inf")
    for t in range(len(step_rewards) - 1, -1, -1):
        running = max(step_rewards[t], gamma * running)
        returns[t] = running
    return returns


def candidate_returns(
    candidates: Iterable[tuple[str, str | None, float]], gamma: float
) -> dict[str, float]:
    """Return of each candidate over its descendants.

    ``candidates`` are ``(candidate_id, parent_id, reward)``; a parent that is not a
    candidate (the reference program) is a root. Each edge discounts by ``gamma``:
    ``G(c) = max(r(c), gamma * max_{child} G(child))``.
    """
    _check_gamma(gamma)
    reward: dict[str, float] = {}
    children: dict[str, list[str]] = defaultdict(list)
    for cid, parent, r in candidates:
        # The same source proposed twice is one node; keep its best measured reward.
        reward[cid] = max(r, reward.get(cid, float("-inf")))
        if parent is not None and parent != cid:
            children[parent].append(cid)

    memo: dict[str, float] = {}
    visiting: set[str] = set()

    def value(cid: str) -> float:
        if cid in memo:
            return memo[cid]
        if cid in visiting:  # a rewrite back to an ancestor: no further gain on this path
            return reward[cid]
        visiting.add(cid)
        best_child = max((value(ch) for ch in children.get(cid, ()) if ch in reward), default=None)
        visiting.discard(cid)
        v = reward[cid] if best_child is None else max(reward[cid], gamma * best_child)
        memo[cid] = v
        return v

    return {cid: value(cid) for cid in reward}


def _check_gamma(gamma: float) -> None:
    if not 0.0 < gamma <= 1.0:
        raise ValueError(f"discount gamma must be in (0, 1], got {gamma}")
