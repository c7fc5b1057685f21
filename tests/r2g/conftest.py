"""Shared rollouts for the r2g tests: synthetic runs in the docs/records.md format."""

from __future__ import annotations

from pathlib import Path

import pytest

from maxcode.r2g.dataset import R2GDataset, build_dataset
from maxcode.r2g.synthetic import write_synthetic_rollouts


@pytest.fixture(scope="session")
def rollout_paths(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    root = tmp_path_factory.mktemp("rollouts")
    return write_synthetic_rollouts(root, n_tasks=10, seeds=1, depth=3, k=4, seed=1)


@pytest.fixture(scope="session")
def dataset(rollout_paths: list[Path]) -> R2GDataset:
    return build_dataset(rollout_paths, gamma=0.9, test_fraction=0.3, seed=0, max_prompt_chars=1024)
