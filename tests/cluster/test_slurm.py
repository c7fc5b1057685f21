"""workflow/profiles/slurm for real: the offline pipeline on a one-node SLURM cluster gives the
same records and tables as a local run, and a rollout job cancelled on the cluster mid-run is
resubmitted (the profile's `retries`) and still ends with the local run's records.

Timing is by callgrind instruction counts, which are near-identical between runs, not
bit-identical: ids, statuses, which candidate won and every table's text are compared
exactly, numbers to a relative 1e-3.
"""

from __future__ import annotations

import csv
import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from maxcode.records import read_jsonl
from tests.workflow_copy import REPO, make_workdir, snakemake

from .conftest import small_params

pytestmark = [pytest.mark.slurm, pytest.mark.slow, pytest.mark.integration]

REL = 1e-3
NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")


def slurm_snakemake(workdir: Path, env: dict[str, str], log: Path) -> subprocess.Popen:
    """The profile as a user runs it, plus what this cluster lacks: no accounting database,
    so job state comes from squeue, polled often because the jobs are seconds long."""
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "--profile",
        str(REPO / "workflow" / "profiles" / "slurm"),
        "--slurm-status-command",
        "squeue",
        "--slurm-init-seconds-before-status-checks",
        "2",
    ]
    with open(log, "w") as out:
        return subprocess.Popen(cmd, cwd=workdir, env=env, stdout=out, stderr=subprocess.STDOUT)


def cancel_a_running_rollout(workdir: Path, env: dict[str, str], proc: subprocess.Popen) -> str:
    """scancel a rollout job while it runs, once a rollout has records in flight, so the
    resubmitted job has a partial run to continue; its SLURM job id."""
    inflight = workdir / "results" / ".inflight"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None:
        listing = subprocess.run(
            ["squeue", "-h", "-t", "R", "-o", "%i|%k"],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        running = [
            line.split("|", 1)[0]
            for line in listing.splitlines()
            if line.split("|", 1)[1].startswith("rule_rollout_")
        ]
        started = any(p.stat().st_size for p in inflight.rglob("*.jsonl"))
        if running and started:
            job = running[0]
            subprocess.run(["scancel", "--state=RUNNING", job], env=env, capture_output=True)
            time.sleep(1.0)
            state = subprocess.run(
                ["squeue", "-h", "-t", "all", "-j", job, "-o", "%T"],
                env=env,
                capture_output=True,
                text=True,
            ).stdout.strip()
            if state == "CANCELLED":  # not finished just before the signal
                return job
        time.sleep(0.2)
    raise AssertionError("no rollout job was seen running with records in flight")


def deterministic_view(path: Path) -> tuple[list[tuple], list[float]]:
    """What a rerun must reproduce exactly, and the numbers it must reproduce to REL."""
    exact: list[tuple] = []
    numbers: list[float] = []
    for rec in read_jsonl(path):
        if rec["kind"] == "candidate":
            ev = rec["evaluation"] or {}
            exact.append(
                (
                    rec["step"],
                    rec["proposal_index"],
                    rec["candidate_id"],
                    rec["parent_id"],
                    rec["executed"],
                    ev.get("status"),
                    tuple(t["status"] for t in ev.get("tests", [])),
                    (rec["critique"] or {}).get("text"),
                )
            )
            numbers.append(rec["reward"] if rec["reward"] is not None else -1.0)
        elif rec["kind"] == "run_end":
            exact.append((rec["best_candidate_id"], rec["evaluations"], rec["stopped_by"]))
            numbers += [rec["best_reward"], *rec["step_rewards"]]
    return exact, numbers


def split_numbers(text: str) -> tuple[str, list[float]]:
    return NUMBER.sub("#", text), [float(x) for x in NUMBER.findall(text)]


def assert_same_table(local: Path, cluster: Path) -> None:
    """Cell by cell, except wall-clock columns (real time differs between any two runs)."""
    rows_l = list(csv.reader(local.read_text().splitlines()))
    rows_c = list(csv.reader(cluster.read_text().splitlines()))
    assert rows_c[:1] == rows_l[:1], f"{cluster.name}: header differs from the local run's"
    assert len(rows_l) == len(rows_c), f"{cluster.name}: {len(rows_c)} rows, local {len(rows_l)}"
    timed = {i for i, name in enumerate(rows_l[0]) if "wall" in name}
    for row_l, row_c in zip(rows_l[1:], rows_c[1:], strict=True):
        for i, (cell_l, cell_c) in enumerate(zip(row_l, row_c, strict=True)):
            if i in timed:
                continue
            text_l, nums_l = split_numbers(cell_l)
            text_c, nums_c = split_numbers(cell_c)
            assert text_c == text_l, f"{cluster.name}: {cell_c!r} != local {cell_l!r}"
            assert nums_c == pytest.approx(nums_l, rel=REL, abs=1e-6), (
                f"{cluster.name}: {cell_c!r} != local {cell_l!r}"
            )


def test_slurm_run_matches_local_run_and_retries_a_cancelled_job(
    slurm_cluster: dict[str, str], tmp_path: Path
) -> None:
    params = small_params()
    on_cluster = make_workdir(tmp_path / "slurm", params)
    local = make_workdir(tmp_path / "local", params)
    log = tmp_path / "slurm.log"

    start = time.monotonic()
    proc = slurm_snakemake(on_cluster, slurm_cluster, log)
    cancelled = cancel_a_running_rollout(on_cluster, slurm_cluster, proc)
    local_run = snakemake(local)  # meanwhile, the same config on this machine
    assert local_run.returncode == 0, local_run.stdout[-3000:] + local_run.stderr[-3000:]
    rc = proc.wait(timeout=900)
    text = log.read_text()
    print(f"SLURM run: {time.monotonic() - start:.0f} s wall, cancelled job {cancelled}")
    assert rc == 0, text[-6000:]

    # the cancelled job was reported and resubmitted, and every job ran on the cluster
    assert re.search(rf"SLURM-job '{cancelled}' failed, SLURM status is: 'CANCELLED'", text), text[
        -6000:
    ]
    assert "Trying to restart job" in text, text[-6000:]
    assert set(re.findall(r"^localrule (\w+):", text, re.M)) <= {"all"}, "a job ran locally"
    submitted = len(re.findall(r"has been submitted with SLURM jobid", text))
    assert submitted >= 22 + 1, f"{submitted} sbatch jobs: 22 (all but `all`) + 1 resubmission"

    rollouts_l = sorted(p.relative_to(local) for p in local.glob("results/rollouts/**/*.jsonl"))
    rollouts_c = sorted(
        p.relative_to(on_cluster) for p in on_cluster.glob("results/rollouts/**/*.jsonl")
    )
    assert rollouts_c == rollouts_l and len(rollouts_l) == 3 * 3
    for rel in rollouts_l:
        exact_l, nums_l = deterministic_view(local / rel)
        exact_c, nums_c = deterministic_view(on_cluster / rel)
        assert exact_c == exact_l, f"{rel}: candidates differ between SLURM and local runs"
        assert nums_c == pytest.approx(nums_l, rel=REL), f"{rel}: rewards differ"

    for name in ("main", "ablation", "budget", "kernelcompare"):
        assert_same_table(
            local / "results" / "tables" / f"{name}.csv",
            on_cluster / "results" / "tables" / f"{name}.csv",
        )
    metrics_l, m_nums_l = split_numbers(
        json.dumps(json.loads((local / "results/metrics.json").read_text()), sort_keys=True)
    )
    metrics_c, m_nums_c = split_numbers(
        json.dumps(json.loads((on_cluster / "results/metrics.json").read_text()), sort_keys=True)
    )
    assert metrics_c == metrics_l and m_nums_c == pytest.approx(m_nums_l, rel=REL, abs=1e-6)
