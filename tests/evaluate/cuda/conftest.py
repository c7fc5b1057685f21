"""Fixtures: the built-in tasks, keyed by problem file name."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from maxcode.tasks.builtin_cuda import load_builtin_cuda

# benchmarks/cuda_candidates.py generates the candidates that tests and the benchmark share.
sys.path.insert(0, str(Path(__file__).parents[3] / "benchmarks"))


@pytest.fixture(scope="session")
def builtin_tasks():
    return {t.metadata["file_name"]: t for t in load_builtin_cuda()}


@pytest.fixture(scope="session")
def saxpy_task(builtin_tasks):
    return builtin_tasks["1_Scaled_vector_add.py"]
