"""Fixtures every test directory may use, and how many workers pytest-xdist starts."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

if os.environ.get("PYTEST_XDIST_WORKER"):
    # The workers share the cores: an OpenMP team per worker oversubscribes them. Set before
    # torch is imported; the processes the tests start inherit it.
    os.environ.setdefault("OMP_NUM_THREADS", "1")

from tests.workflow_copy import make_workdir, snakemake, tiny_params


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto` (pyproject's addopts): two workers, one per core of the 2-core CI machine; none
    (one process) where an NVIDIA GPU is present, so that the `gpu` tests never time kernels
    on a GPU another test is using."""
    return 0 if shutil.which("nvidia-smi") else 2


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """For `--dist loadgroup` (pyproject's addopts): a module's tests run on one worker, so its
    module fixtures are built once, and so do all tests of the shared ``finished_pipeline``,
    whatever their module, so that the pipeline runs once. (Before pytest-xdist reads the
    groups: ``tryfirst``.) That group, the longest, is handed out first, so that it does not
    run alone at the end."""
    shared = {item for item in items if "finished_pipeline" in getattr(item, "fixturenames", ())}
    for item in items:
        group = "finished_pipeline" if item in shared else item.nodeid.split("::")[0]
        item.add_marker(pytest.mark.xdist_group(group))
    items.sort(key=lambda item: item not in shared)  # stable: the order is otherwise kept


@pytest.fixture(scope="session")
def finished_pipeline(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The whole workflow run once on the tiny config (``tiny_params``), shared by every test
    that reads its results or plans against them. Tests that write into it (a rerun, a report)
    leave its results as they were; one that changes params works on ``copy_of_finished``."""
    workdir = make_workdir(tmp_path_factory.mktemp("pipeline"), tiny_params())
    proc = snakemake(workdir)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    return workdir


@pytest.fixture
def copy_of_finished(finished_pipeline: Path, tmp_path: Path) -> Path:
    """A copy of the finished run (timestamps and Snakemake's records kept) to change freely."""
    copy = tmp_path / "w"
    shutil.copytree(finished_pipeline, copy, symlinks=True)
    return copy
