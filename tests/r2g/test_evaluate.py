from __future__ import annotations

import itertools

import pytest

from maxcode.r2g.dataset import R2GExample
from maxcode.r2g.evaluate import budget_m, expected_random_max, ranking_metrics
from maxcode.search.types import Score


def _group(run: str, values: list[float], rewards: list[float] | None = None) -> list[R2GExample]:
    rewards = rewards or values
    return [
        R2GExample(
            task_id=run,
            suite="s",
            prompt="",
            target=f" {v:.2f}",
            value=v,
            run_id=run,
            step=0,
            proposal_index=i,
            candidate_id=f"{run}{i}",
            reward=r,
            observation_text="",
            source="",
        )
        for i, (v, r) in enumerate(zip(values, rewards, strict=True))
    ]


def test_random_max_matches_enumeration() -> None:
    rewards = [0.0, 1.2, 3.0, 0.5, 2.2, 0.0, 4.1, 1.0]
    for m in (1, 2, 3, 8):
        subsets = list(itertools.combinations(rewards, m))
        brute = sum(max(s) for s in subsets) / len(subsets)
        assert expected_random_max(rewards, m) == pytest.approx(brute)


def test_perfect_and_reversed_predictors() -> None:
    examples = _group("r1", [0.0, 2.0, 1.0, 3.0, 0.5, 1.5, 0.2, 0.1]) + _group(
        "r2", [1.0, 4.0, 2.0, 3.0]
    )
    truth = [Score(e.value) for e in examples]
    perfect = ranking_metrics(examples, truth)["all"]
    assert perfect["avg_rank_model"] == 1.0
    assert perfect["spearman_pooled"] == pytest.approx(1.0)
    assert perfect["spearman_within_group"] == pytest.approx(1.0)
    assert perfect["kept_share_top_m_model"] == 1.0
    assert perfect["evaluations_top_m"] == budget_m(8) + budget_m(4) == 3
    assert perfect["avg_rank_random"] == pytest.approx((4.5 + 2.5) / 2)
    assert perfect["avg_rank_first"] == pytest.approx((8 + 4) / 2)  # both first proposals are worst

    reversed_ = ranking_metrics(examples, [Score(-e.value) for e in examples])["all"]
    assert reversed_["avg_rank_model"] == pytest.approx((8 + 4) / 2)
    assert reversed_["spearman_pooled"] == pytest.approx(-1.0)
    assert reversed_["kept_share_top_m_model"] < perfect["kept_share_top_m_random"]


def test_ties_go_to_the_first_proposal_and_fallbacks_are_counted() -> None:
    examples = _group("r", [0.0, 5.0, 1.0, 2.0])
    flat = ranking_metrics(examples, [Score(1.0, fallback=True)] * 4)["all"]
    assert flat["avg_rank_model"] == 4.0  # the loop would execute proposal 0, the worst
    assert flat["fallback_share"] == 1.0
    assert flat["spearman_pooled"] is None  # constant predictions have no correlation


def test_groups_of_one_are_not_ranked_and_all_zero_groups_not_shared() -> None:
    examples = _group("a", [1.0]) + _group("b", [0.0, 0.0, 0.0, 0.0])
    out = ranking_metrics(examples, [Score(0.0)] * 5)
    assert out["all"]["groups"] == 1
    assert out["all"]["kept_share_groups"] == 0 and out["all"]["kept_share_top_m_model"] is None
    assert set(out["suites"]) == {"s"}
