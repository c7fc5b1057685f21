"""A single-node SLURM cluster for the `slurm` tests, started by tests/cluster/slurm_single_node.sh.

Opt-in (`MAXCODE_SLURM_TEST=1`, set by .ci/run), because starting the daemons needs root and
the run adds minutes; without it the tests skip and say how to run them.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.workflow_copy import REPO

SCRIPT = REPO / "tests" / "cluster" / "slurm_single_node.sh"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "slurm: needs a single-node SLURM cluster (MAXCODE_SLURM_TEST=1 starts one)"
    )


@pytest.fixture(scope="session")
def slurm_cluster() -> Iterator[dict[str, str]]:
    """The environment (SLURM_CONF) under which sbatch/squeue reach the test cluster; a
    cluster already running (started by .ci/run) is used and left running."""
    if os.environ.get("MAXCODE_SLURM_TEST") != "1":
        pytest.skip("set MAXCODE_SLURM_TEST=1 to start a one-node SLURM cluster (needs root)")
    state = Path(os.environ.get("MAXCODE_SLURM_DIR", "/tmp/maxcode-slurm"))
    env = {**os.environ, "MAXCODE_SLURM_DIR": str(state)}
    proc = subprocess.run(
        [str(SCRIPT), "start"], env=env, capture_output=True, text=True, timeout=600
    )
    if proc.returncode == 2:
        pytest.skip(proc.stderr.strip())
    assert proc.returncode == 0, f"{SCRIPT} start failed:\n{proc.stdout}\n{proc.stderr}"
    yield {**env, "SLURM_CONF": str(state / "slurm.conf")}
    if "already running" not in proc.stdout:
        subprocess.run([str(SCRIPT), "stop"], env=env, capture_output=True, timeout=60)


def small_params() -> dict:
    """The offline preset cut to 3 problems x 3 methods x 1 seed at depth 2 (23 jobs)."""
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    params["suites"]["cpp_builtin"].update(
        n_tests=2, problems=["io_prefix_sums_endl", "const_pass_by_value", "algo_inversions"]
    )
    params["search"].update(depth=2, k=2, seeds=[0])
    keep = ["cuda-llm", "cuda-llm+maxcode", "critique-only"]
    params["methods"] = {m: params["methods"][m] for m in keep}
    params["r2g"]["train_methods"] = ["cuda-llm", "cuda-llm+maxcode"]
    params["tables"].update(
        main=["cuda-llm", "cuda-llm+maxcode"],
        ablation=["critique-only"],
        rerank=[],
        bootstrap_samples=200,
    )
    fixtures = REPO / "tests" / "kernelcompare" / "fixtures"
    params["kernelcompare"]["sources"].update(
        parboil=str(fixtures / "parboil"), rodinia=str(fixtures / "rodinia")
    )
    params["kernelcompare"]["split"]["train_fraction"] = 0.5
    return params
