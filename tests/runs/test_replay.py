"""Replay: corpus programs proposed per problem, and exported measurements served without a GPU."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from maxcode.runs.corpus import SourceSpec, import_corpus
from maxcode.runs.evaluate import evaluate_corpus
from maxcode.runs.replay import ReplayEvaluator, ReplayMissing, ReplayPolicy
from maxcode.search.types import Observation
from maxcode.tasks.kernelbench import load_problem_file
from tests.runs.public_layouts import kernel, write_checkout, write_kernel_coder
from tests.runs.test_eval_runs import FakeEvaluation


@pytest.fixture
def corpus(tmp_path: Path) -> tuple[Path, Path]:
    checkout = write_checkout(tmp_path / "kb")
    spec = SourceSpec.parse(f"kernel-coder:{write_kernel_coder(tmp_path / 'kc')}@5a9fb0c")
    import_corpus([spec], checkout, tmp_path / "corpus")
    return tmp_path / "corpus", checkout


def _obs(task) -> Observation:
    return Observation(
        task=task,
        step=0,
        depth=1,
        trajectory=[],
        best=None,
        best_discounted_reward=0.0,
        include_critique=False,
        method="best-of-n",
    )


def test_draws_without_replacement_in_a_seeded_order(corpus):
    corpus_dir, checkout = corpus
    task = load_problem_file(checkout / "level1" / "1_Relu1.py")
    policy = ReplayPolicy.from_corpus(corpus_dir, seed=3)
    assert policy.pool_size(task) == 7  # 8 attempts, the two empty kernels are one program
    drawn = []
    for _ in range(4):
        drawn += policy.propose(_obs(task), 2, random.Random(0))
    codes = [p.source for p in drawn if p.source is not None]
    assert len(codes) == 7 == len(set(codes))
    assert drawn[-1].source is None and "no more programs" in drawn[-1].reason
    again = ReplayPolicy.from_corpus(corpus_dir, seed=3).propose(_obs(task), 7, random.Random(9))
    assert [p.source for p in again] == codes
    assert all(p.meta["replay"] and p.meta["code_hash"] for p in drawn if p.source)


def test_a_problem_outside_the_corpus_has_no_pool(corpus):
    corpus_dir, checkout = corpus
    task = load_problem_file(checkout / "level2" / "1_Relu1.py")
    proposals = ReplayPolicy.from_corpus(corpus_dir).propose(_obs(task), 2, random.Random(0))
    assert [p.source for p in proposals] == [None, None]


def test_replayed_measurements_and_a_refusal_for_unmeasured_code(corpus, tmp_path):
    corpus_dir, checkout = corpus
    evaluate_corpus(corpus_dir, tmp_path / "eval", FakeEvaluation(), "fake/1", "GPU X")
    replay = ReplayEvaluator.from_file(tmp_path / "eval" / "measurements.jsonl")
    task = load_problem_file(checkout / "level1" / "1_Relu1.py")
    ok = replay.evaluate(task, kernel("bon_level1-0"))
    assert ok.status.value == "ok" and ok.speedup == pytest.approx(2.0)
    assert "fake/1 on GPU X" in ok.evaluator
    with pytest.raises(ReplayMissing, match="no measurement of program"):
        replay.evaluate(task, kernel("never written"))
