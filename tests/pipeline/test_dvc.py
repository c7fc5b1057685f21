"""DVC over the Snakemake stages: `dvc repro`, then an experiment with one param changed."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from .conftest import REPO, make_workdir, tiny_params

pytestmark = pytest.mark.slow


def run(cmd: list[str], cwd: Path, timeout: float = 900) -> str:
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{cmd}: {proc.stdout[-2000:]} {proc.stderr[-3000:]}"
    return proc.stdout


def test_dvc_repro_then_experiment_with_changed_depth(tmp_path: Path):
    params = tiny_params()
    params["tables"].update(
        main=["cuda-llm", "cuda-llm+maxcode"], ablation=[], rerank=["maxcode+random-m"]
    )
    params["r2g"]["train_methods"] = ["cuda-llm"]
    w = make_workdir(tmp_path / "w", params)
    shutil.copy(REPO / "dvc.yaml", w / "dvc.yaml")
    shutil.copytree(REPO / "src", w / "src", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / ".gitignore", w / ".gitignore")
    run(["git", "init", "-q"], w)
    run(["dvc", "init", "-q"], w)
    run(["git", "add", "-A"], w)
    run(["git", "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "init"], w)

    run(["dvc", "repro"], w)
    metrics = json.loads((w / "results/metrics.json").read_text())
    assert set(metrics["main"]) == {"cuda-llm/cpp_builtin", "cuda-llm+maxcode/cpp_builtin"}
    assert "Data and pipelines are up to date" in run(["dvc", "repro"], w)

    run(["git", "add", "-A"], w)
    run(["git", "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "baseline"], w)
    run(["dvc", "exp", "run", "-n", "depth1", "-S", "search.depth=1"], w)
    shown = json.loads(run(["dvc", "exp", "show", "--json"], w))
    text = json.dumps(shown)
    assert "depth1" in text and "mean_best_speedup" in text
    # the experiment ran with depth 1: its rollouts stopped after one step
    assert yaml.safe_load((w / "params.yaml").read_text())["search"]["depth"] == 1
    runs = list((w / "results/rollouts").rglob("seed*.jsonl"))
    assert runs and all(
        len(json.loads(r.read_text().splitlines()[-1])["step_rewards"]) == 1 for r in runs
    )
