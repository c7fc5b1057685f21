"""The whole pipeline on a tiny config: tables agree with the records; reruns do nothing;
a kill -9 loses no finished record; bad input stops before any work."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from maxcode.records import read_jsonl
from tests.workflow_copy import SNAKEMAKE, make_workdir, snakemake, tiny_params

pytestmark = pytest.mark.slow


def test_every_table_is_written_and_agrees_with_the_records(finished_pipeline: Path):
    w = finished_pipeline
    for name in ("main", "ablation", "rerank", "budget", "kernelcompare"):
        for ext in ("md", "csv", "tex"):
            assert (w / "results" / "tables" / f"{name}.{ext}").stat().st_size > 0
    assert (w / "results" / "plots" / "speedup_vs_depth.png").stat().st_size > 1000
    rows = list(csv.DictReader((w / "results/tables/main.csv").read_text().splitlines()))
    for row in rows:
        files = sorted(
            (w / "results/rollouts" / row["suite"] / row["method"]).glob("*/seed*.jsonl")
        )
        assert len(files) == 3 * 2  # tasks x seeds
        bests = [list(read_jsonl(f))[-1]["best_reward"] for f in files]
        assert float(row["mean best speedup"]) == pytest.approx(sum(bests) / len(bests), rel=1e-5)
        assert "(offline)" in row["policy"]
    metrics = json.loads((w / "results/metrics.json").read_text())
    assert set(metrics["main"]) == {f"{r['method']}/{r['suite']}" for r in rows}
    # reranked methods ran on held-out tasks only
    held_out = {p.parent.name for p in (w / "results/reranked").rglob("seed*.jsonl")}
    trained = {
        json.loads(line)["task_id"]
        for line in (w / "data/r2g/train.jsonl").read_text().splitlines()
    }
    assert held_out and not held_out & trained


def test_second_run_does_no_work(finished_pipeline: Path):
    start = time.monotonic()
    proc = snakemake(finished_pipeline)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Nothing to be done" in proc.stdout + proc.stderr
    assert time.monotonic() - start < 60


@pytest.mark.integration
def test_kill_9_loses_no_finished_record(tmp_path: Path):
    params = tiny_params()
    params["tables"].update(main=["cuda-llm"], ablation=[], rerank=["maxcode+random-m"])
    params["r2g"]["train_methods"] = ["cuda-llm"]
    workdir = make_workdir(tmp_path / "w", params)
    proc = subprocess.Popen(
        SNAKEMAKE,
        cwd=workdir,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    rollouts = workdir / "results" / "rollouts"
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and len(list(rollouts.rglob("seed*.jsonl"))) < 2:
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    finished = {p: p.read_bytes() for p in rollouts.rglob("seed*.jsonl")}
    assert finished, "the run was killed before any rollout finished"

    rerun = snakemake(workdir)
    assert rerun.returncode == 0, rerun.stdout[-3000:] + rerun.stderr[-3000:]
    for path, content in finished.items():
        assert path.read_bytes() == content, f"{path} was recomputed"
    assert (workdir / "results/tables/main.csv").is_file()


def test_bad_param_stops_before_any_job(tmp_path: Path):
    params = tiny_params()
    params["search"]["depht"] = 3
    workdir = make_workdir(tmp_path / "w", params)
    proc = snakemake(workdir)
    assert proc.returncode != 0
    assert "search: unknown key(s) 'depht' (did you mean 'depth'?)" in proc.stderr
    assert not (workdir / "data" / "suites").exists() and not (workdir / "results").exists()


def test_malformed_task_record_is_named(tmp_path: Path):
    records = tmp_path / "records.jsonl"
    records.write_text(json.dumps({"problem_id": "p1", "src_code": "int main(){}"}) + "\n")
    (tmp_path / "tests" / "p1").mkdir(parents=True)
    params = tiny_params()
    params["suites"] = {
        "mine": {"kind": "pie", "records": str(records), "tests_root": str(tmp_path / "tests")}
    }
    params["kernelcompare"]["sources"]["suite"] = "mine"
    workdir = make_workdir(tmp_path / "w", params)
    proc = snakemake(workdir, "suites")
    assert proc.returncode != 0
    log = (workdir / "logs/suites/mine.log").read_text()
    assert "records.jsonl" in log and "p1" in log


def test_missing_records_file_is_named(tmp_path: Path):
    params = tiny_params()
    params["suites"] = {
        "mine": {"kind": "pie", "records": str(tmp_path / "nope.jsonl"), "tests_root": "x"}
    }
    params["kernelcompare"]["sources"]["suite"] = "mine"
    workdir = make_workdir(tmp_path / "w", params)
    proc = snakemake(workdir)
    assert proc.returncode != 0 and "nope.jsonl" in proc.stderr
    assert yaml.safe_load((workdir / "params.yaml").read_text())["suites"]["mine"]["kind"] == "pie"


def test_tables_without_a_rerank_table_train_no_reward_to_go_model(tmp_path: Path):
    """A quick look at two methods (the GPU check's slice) needs no reranker and no encoder."""
    params = tiny_params()
    params["suites"]["cpp_builtin"]["problems"] = ["io_prefix_sums_endl"]
    params["search"].update(depth=1, seeds=[0])
    params["tables"].update(ablation=[], rerank=[])
    workdir = make_workdir(tmp_path / "w", params)
    proc = snakemake(workdir, "results/tables/main.md")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "r2g" not in proc.stdout + proc.stderr
    assert not (workdir / "results" / "r2g").exists() and not (workdir / "models").exists()
    main = (workdir / "results" / "tables" / "main.md").read_text()
    assert "cuda-llm+maxcode" in main
    metrics = json.loads((workdir / "results" / "metrics.json").read_text())
    assert metrics["r2g"] == {} and metrics["rerank"] == {}
