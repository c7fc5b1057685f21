"""Reward-to-go examples and the held-out ranking on the corpus (fixtures in tests/runs)."""

from __future__ import annotations

from pathlib import Path

import pytest

from maxcode.r2g.corpus import corpus_dataset, pool_examples
from maxcode.r2g.corpus_ranking import per_problem, summarize
from maxcode.r2g.dataset import R2GExample
from maxcode.runs.corpus import SourceSpec, import_corpus
from maxcode.runs.pools import INVERSE_RUNTIME, SPEEDUP, build_pools
from maxcode.runs.record import read_corpus
from maxcode.search.types import Score
from tests.runs.public_layouts import (
    write_agentic,
    write_checkout,
    write_kernel_coder,
    write_kernelbench_runs,
)


@pytest.fixture
def records(tmp_path: Path):
    checkout = write_checkout(tmp_path / "kb")
    specs = [
        SourceSpec.parse(f"kernelbench-runs:{write_kernelbench_runs(tmp_path / 'ta')}"),
        SourceSpec.parse(f"kernel-coder:{write_kernel_coder(tmp_path / 'kc')}"),
        SourceSpec.parse(f"kernelbench-agentic:{write_agentic(tmp_path / 'ag')}"),
    ]
    import_corpus(specs, checkout, tmp_path / "corpus")
    return read_corpus(tmp_path / "corpus")


def test_one_label_source_per_problem_and_ours_win(records):
    pools = {p.problem: p for p in build_pools(records)}
    l1 = pools["L1/1_Relu1.py"]
    # Kernel-Coder's A6000 labels cover more of problem 1's programs than the A100's
    assert l1.label_source == "published/NVIDIA RTX A6000" and l1.reward_kind == INVERSE_RUNTIME
    assert {a.label.gpu for r, _ in l1.members for a in r.attempts if a.label.usable} >= {
        "NVIDIA RTX A6000"
    }
    assert pools["L2/1_Relu1.py"].reward_kind == SPEEDUP
    one = next(r for r, _ in l1.members)
    ours = {
        (one.code_hash, one.problem.reference_hash): {
            "evaluator": "e/1",
            "gpu": "H200",
            "status": "ok",
            "speedup": 3.0,
            "runtime_ms": 1.0,
        }
    }
    mine = {p.problem: p for p in build_pools(records, ours)}["L1/1_Relu1.py"]
    assert mine.label_source == "ours/e/1/H200" and len(mine.members) == 1


def test_trajectory_attempts_get_the_max_reward_return_and_what_they_saw(records):
    pool = next(p for p in build_pools(records) if p.problem == "L2/1_Relu1.py")
    examples = {
        e.observation_text: e for e in pool_examples(pool, gamma=0.5, max_prompt_chars=2048)
    }
    first = examples[""]
    assert first.reward == 0.0 and first.value == pytest.approx(0.25 * 3.0)  # turn 2 is 3x
    later = next(e for t, e in examples.items() if "turn 1" in t)
    assert "diagnosis of turn 1" in later.observation_text and later.value == pytest.approx(3.0)


def test_split_is_by_problem(records):
    ds = corpus_dataset(build_pools(records), 0.9, 0.5, 0, 2048)
    assert not {e.task_id for e in ds.train} & {e.task_id for e in ds.test}


def test_the_held_out_listing_is_the_ranking_s_test_split(records, tmp_path):
    from typer.testing import CliRunner

    from maxcode.cli import app
    from maxcode.params import load_params

    params = Path(__file__).resolve().parents[2] / "presets" / "offline.yaml"
    split = load_params(params).r2g.dataset
    ds = corpus_dataset(build_pools(records), 0.9, split.test_fraction, split.seed, 4096)
    corpus_dir = tmp_path / "corpus"
    result = CliRunner().invoke(app, ["r2g", "held-out", str(corpus_dir), "--params", str(params)])
    assert result.exit_code == 0, result.output
    listed = result.output.split()
    assert listed and set(listed) == {e.task_id for e in ds.test}
    assert not set(listed) & {e.task_id for e in ds.train}


def _pool(rewards: list[float], run_id: str = "published/X:L2/1_a.py") -> list[R2GExample]:
    return [
        R2GExample(
            task_id="L2/1_a.py",
            suite="kernelbench-L2",
            prompt="",
            target="",
            value=r,
            run_id=run_id,
            step=0,
            proposal_index=i,
            candidate_id=str(i),
            reward=r,
            observation_text="",
            source="",
        )
        for i, r in enumerate(rewards)
    ]


def test_ranking_metrics_of_a_perfect_and_a_reversed_model():
    rewards = [0.0, 1.0, 3.0, 2.0, 0.0, 0.5, 0.0, 4.0]  # k = 8, m = 2
    ex = _pool(rewards)
    perfect = per_problem(ex, [Score(r) for r in rewards])[0]
    assert perfect["spearman"] == pytest.approx(1.0)
    assert perfect["best_top_m"] == 4.0 and perfect["kept_top_m"] == 1.0
    assert perfect["correct_top_m"] == 1.0 and perfect["rank_model"] == 1.0
    assert perfect["best_random_m"] == pytest.approx(
        sum(max(rewards[i], rewards[j]) for i in range(8) for j in range(i + 1, 8)) / 28
    )
    reversed_ = per_problem(ex, [Score(-r) for r in rewards])[0]
    assert reversed_["best_top_m"] == 0.0 and reversed_["rank_model"] == 2.0
    assert per_problem(_pool([0.0] * 6), [Score(1.0)] * 6) == []  # nothing correct to rank
    s = summarize([perfect, reversed_], samples=200, confidence=0.95)
    assert s["model"]["avg_rank"]["mean"] == 1.5 and s["problems"] == 2
    lo, hi = s["model"]["avg_rank"]["ci"]
    assert lo <= 1.5 <= hi
