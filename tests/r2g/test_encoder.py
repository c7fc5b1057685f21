from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from maxcode.r2g.base import Candidate
from maxcode.r2g.config import EncoderR2GConfig
from maxcode.r2g.dataset import R2GDataset
from maxcode.r2g.encoder import bundled_model_path, fit_ridge, task_folds, token_features
from maxcode.r2g.evaluate import evaluate_reranker
from maxcode.r2g.reranker import load_reranker, train
from maxcode.search.types import Observation, Proposal
from maxcode.tasks.model import Task


def test_bundled_minilm_is_found() -> None:
    path = bundled_model_path()
    assert (path / "model.safetensors").is_file() and (path / "tokenizer.json").is_file()


def test_task_folds_keep_tasks_together() -> None:
    keys = [f"s/t{i % 5}" for i in range(40)]
    folds = task_folds(keys, 3, seed=0)
    for t in set(keys):
        assert len({folds[i] for i, k in enumerate(keys) if k == t}) == 1
    assert set(folds) == {0, 1, 2}


def test_encoder_trains_scores_and_reloads(tmp_path: Path, dataset: R2GDataset) -> None:
    config = EncoderR2GConfig()
    metrics = train(dataset, config, tmp_path)
    assert metrics["alpha"] in config.ridge_alphas
    assert set(metrics["cv_mse_by_alpha"]) == {str(a) for a in config.ridge_alphas}
    assert json.loads((tmp_path / "metrics.json").read_text())["alpha"] == metrics["alpha"]
    ranking = metrics["test_ranking"]["all"]
    assert ranking["groups"] == len({e.group for e in dataset.test})
    assert ranking["fallback_share"] == 0.0
    # The synthetic rewards are written in the code (fast I/O, prefix sums): a model that
    # reads code must rank held-out tasks' candidates better than chance.
    assert ranking["spearman_pooled"] > 0.2
    assert ranking["avg_rank_model"] < ranking["avg_rank_random"]

    reranker = load_reranker(tmp_path)
    again = evaluate_reranker(reranker, dataset.test)["all"]
    assert again["spearman_pooled"] == pytest.approx(ranking["spearman_pooled"], abs=1e-6)

    example = dataset.test[0]
    task = Task(task_id=example.task_id, suite=example.suite, language="cpp", reference_source="")
    obs = Observation(task, 0, 3, [], None, 0.0, include_critique=False, method="m")
    scores = reranker.score(obs, [Proposal(source=example.source), Proposal(source=None)])
    assert not scores[0].fallback and np.isfinite(scores[0].value)
    assert scores[1].fallback
    same = reranker.score_candidates([Candidate("other obs", example.source)] * 2)
    assert same[0].value == pytest.approx(same[1].value)


def test_ridge_path_matches_the_normal_equations() -> None:
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(30, 50)), rng.normal(size=30)
    for alpha, (w, b) in fit_ridge(x, y, (0.5, 20.0)).items():
        xc = x - x.mean(axis=0)
        want = np.linalg.solve(xc.T @ xc + alpha * np.eye(50), xc.T @ (y - y.mean()))
        np.testing.assert_allclose(w, want, atol=1e-8)
        assert b == pytest.approx(y.mean() - x.mean(axis=0) @ want)


def test_token_features_see_one_character_edits() -> None:
    good = "for (int i = 0; i < n; ++i) { a.push_back(x); }"
    bad = "for (int i = 0; i <= n; ++i) { a.push_back(x) }"
    assert not np.allclose(token_features(good, 4096), token_features(bad, 4096))
    np.testing.assert_array_equal(token_features(good, 4096), token_features(good, 4096))
