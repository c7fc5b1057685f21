"""A copy of the workflow in a temporary folder with a tiny config, run by real Snakemake
(the pipeline and cluster tests share it)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
# The README's run command, on 2 cores.
SNAKEMAKE = [
    sys.executable,
    "-m",
    "snakemake",
    "--profile",
    "workflow/profiles/local",
    "--cores",
    "2",
]


def tiny_params() -> dict:
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    params["suites"]["cpp_builtin"].update(
        n_tests=3, problems=["io_prefix_sums_endl", "const_pass_by_value", "algo_inversions"]
    )
    params["search"].update(depth=2, k=2, seeds=[0, 1])
    keep = ["cuda-llm", "cuda-llm+maxcode", "critique-only", "maxcode+r2g", "maxcode+random-m"]
    params["methods"] = {m: params["methods"][m] for m in keep}
    for m in ("maxcode+r2g", "maxcode+random-m"):
        params["methods"][m].update(k=4, execute_top_m=1)
    params["r2g"]["train_methods"] = ["cuda-llm", "cuda-llm+maxcode"]
    params["tables"].update(
        main=["cuda-llm", "cuda-llm+maxcode"],
        ablation=["critique-only"],
        rerank=["maxcode+r2g", "maxcode+random-m"],
        bootstrap_samples=200,
    )
    params["evaluation"]["cpp"]["repeats"] = 1
    fixtures = REPO / "tests" / "kernelcompare" / "fixtures"
    params["kernelcompare"]["sources"].update(
        parboil=str(fixtures / "parboil"), rodinia=str(fixtures / "rodinia")
    )
    params["kernelcompare"]["split"]["train_fraction"] = 0.5
    return params


def make_workdir(path: Path, params: dict) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    shutil.copy(REPO / "Snakefile", path / "Snakefile")
    shutil.copytree(REPO / "workflow", path / "workflow")
    shutil.copytree(REPO / "envs", path / "envs")
    (path / "data").mkdir(exist_ok=True)
    shutil.copy(REPO / "data" / "paper_reference.yaml", path / "data" / "paper_reference.yaml")
    (path / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    return path


def snakemake(
    workdir: Path, *args: str, timeout: float = 900, env: dict | None = None
) -> subprocess.CompletedProcess:
    cmd = [*SNAKEMAKE, *args]
    return subprocess.run(
        cmd, cwd=workdir, capture_output=True, text=True, timeout=timeout, env=env
    )
