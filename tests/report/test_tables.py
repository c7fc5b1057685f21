from __future__ import annotations

import csv
import json

import pytest

from maxcode.errors import ConfigError, RolloutIncompleteError
from maxcode.pipeline import make_tables
from maxcode.records import read_jsonl
from maxcode.report.config import TablesParams
from maxcode.report.runs import read_run, read_runs
from maxcode.report.stats import average_ranks, bootstrap_ci, paired_difference
from maxcode.report.tables import write_all
from maxcode.search.config import MethodConfig
from maxcode.search.loop import RunContext, run_search
from maxcode.tasks.model import Task

from ..search.conftest import EchoCritic, ScriptedEvaluator, ScriptedPolicy

# method -> per task: speedups proposed at steps 0 and 1
SPEEDS = {
    "slow-method": {"a": ["ok:1.1", "ok:1.2"], "b": ["wrong", "ok:1.5"]},
    "fast-method": {"a": ["ok:2.0", "ok:1.0"], "b": ["ok:1.4", "compile_error"]},
}


@pytest.fixture
def rollouts(tmp_path):
    paths = []
    for method, per_task in SPEEDS.items():
        for task_id, script in per_task.items():
            for seed in (0, 1):
                task = Task(task_id=task_id, suite="s", language="cpp", reference_source="x")
                ctx = RunContext(
                    task=task,
                    method=MethodConfig(name=method, depth=2, k=1, critique=True),
                    seed=seed,
                    policy=ScriptedPolicy(
                        [[f"{script[0]} {seed}"], [f"{script[1]} {seed}"]],
                        name="rules",
                        offline=True,
                    ),
                    evaluator=ScriptedEvaluator(),
                    critic=EchoCritic(),
                    provenance={"hardware": {"cpu": "TestCPU", "cores": 3, "gpus": ["H100"]}},
                )
                path = tmp_path / "r" / method / task_id / f"seed{seed}.jsonl"
                path.parent.mkdir(parents=True, exist_ok=True)
                run_search(ctx, path)
                paths.append(path)
    return paths


def test_tables_agree_with_the_records(rollouts, tmp_path):
    runs = read_runs(rollouts)
    tables = TablesParams(
        main=("slow-method", "fast-method"), ablation=("fast-method",), bootstrap_samples=500
    )
    ranking = {"model": {"kind": "encoder", "name": "m"}, "metrics": {"avg_rank_model": 1.25}}
    write_all(
        runs,
        tables,
        ranking,
        {"counts": {"train": 3}},
        {"preset": "offline", "budgets": {"slow-method": "2 x 1 = 2 evals"}},
        tmp_path / "t",
        tmp_path / "p",
        tmp_path / "metrics.json",
    )

    rows = {
        r["method"]: r
        for r in csv.DictReader((tmp_path / "t" / "main.csv").read_text().splitlines())
    }
    for method in SPEEDS:
        bests = [
            list(read_jsonl(p))[-1]["best_reward"] for p in rollouts if f"/{method}/" in str(p)
        ]
        assert float(rows[method]["mean best speedup"]) == pytest.approx(sum(bests) / len(bests))
        lo, hi = (float(x) for x in rows[method]["95% CI"].strip("[]").split(","))
        assert lo <= float(rows[method]["mean best speedup"]) <= hi
    # per task: a -> fast 2.0 beats slow 1.2; b -> slow 1.5 beats fast 1.4 => ranks tie at 1.5
    assert float(rows["fast-method"]["avg rank"]) == pytest.approx(1.5)
    assert rows["fast-method"]["evals/run"] == "2.0"
    # paired per task x seed against the table's first method: a +0.8 twice, b -0.1 twice
    assert float(rows["fast-method"]["paired diff vs slow-method"]) == pytest.approx(0.35)
    lo, hi = (float(x) for x in rows["fast-method"]["paired diff 95% CI"].strip("[]").split(","))
    assert lo < 0.35 < hi
    assert rows["slow-method"]["paired diff vs slow-method"] == ""
    md = (tmp_path / "t" / "main.md").read_text()
    assert "rules (offline)" in md and "preset: offline" in md
    assert "budget per run (params): slow-method: 2 x 1 = 2 evals" in md
    assert "hardware: TestCPU (3 cores); GPU H100" in md
    # CSV: one plain table; the run context rides in constant trailing columns
    assert rows["fast-method"]["preset"] == "offline"
    assert rows["fast-method"]["seeds"] == "[0, 1]"
    page = (tmp_path / "t" / "main.html").read_text()
    assert page.count("<tr>") == 3 and "preset: offline" in page and "<script" not in page
    assert (tmp_path / "t" / "main.tex").read_text().count("\\\\") == 3  # header + 2 rows
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert metrics["main"]["fast-method/s"]["mean_best_speedup"] == pytest.approx(1.7)
    assert metrics["main"]["fast-method/s"]["paired_diff_vs_first"] == pytest.approx(0.35)
    assert "paired_diff_vs_first" not in metrics["main"]["slow-method/s"]
    assert metrics["r2g"] == {"avg_rank_model": 1.25}
    assert (
        "held-out ranking metric avg_rank_model: 1.250"
        in (tmp_path / "t" / "rerank.md").read_text()
    )

    curve = list(csv.DictReader((tmp_path / "p" / "speedup_vs_depth.csv").read_text().splitlines()))
    fast = [float(r["mean"]) for r in curve if r["method"] == "fast-method"]
    assert fast == pytest.approx([1.7, 1.7])  # best never regresses: step 1 adds nothing
    slow = [float(r["mean"]) for r in curve if r["method"] == "slow-method"]
    assert slow == pytest.approx([0.55, 1.35])
    assert (tmp_path / "p" / "speedup_vs_depth.png").stat().st_size > 1000


def test_the_tables_stage_reads_its_block_through_the_one_loader(rollouts, tmp_path):
    """A misspelt key of `tables` is named with its fix, not passed over while the tables
    quietly keep the default it meant to change (the stage restated no default)."""
    offline = {"backend": "offline"}
    with pytest.raises(ConfigError, match=r"^tables: unknown key\(s\) 'confidenc' \(did you mean"):
        make_tables(
            rollouts,
            None,
            None,
            {"main": ["slow-method"], "ablation": [], "rerank": [], "confidenc": 0.9},
            "offline",
            {"generator": offline, "critic": offline},
            [
                str(tmp_path / "t" / n)
                for n in ("main.md", "m.png", "metrics.json", "provenance.json")
            ],
        )
    assert not (tmp_path / "t").exists()


def test_floor_at_one_is_applied_and_named(rollouts, tmp_path):
    runs = read_runs(rollouts)
    tables = TablesParams(main=("slow-method",), floor_speedup_at_1=True)
    write_all(
        runs,
        tables,
        {},
        {},
        {"preset": "offline"},
        tmp_path / "t",
        tmp_path / "p",
        tmp_path / "m.json",
    )
    row = next(csv.DictReader((tmp_path / "t" / "main.csv").read_text().splitlines()))
    assert float(row["mean best speedup"]) == pytest.approx((1.2 + 1.5) / 2)
    assert "floored at 1.0" in (tmp_path / "t" / "main.md").read_text()


def test_incomplete_rollout_is_refused_by_name(rollouts, tmp_path):
    torn = tmp_path / "torn.jsonl"
    torn.write_text("".join(rollouts[0].read_text().splitlines(keepends=True)[:-1]))
    with pytest.raises(RolloutIncompleteError, match=r"torn\.jsonl"):
        read_run(torn)


def test_average_ranks_skip_units_missing_a_method():
    units = {("a", 0): {"x": 2.0, "y": 1.0}, ("b", 0): {"x": 1.0, "y": 1.0}, ("c", 0): {"x": 5.0}}
    assert average_ranks(units) == {"x": 1.25, "y": 1.75}


def test_bootstrap_ci_is_seeded_and_brackets_the_mean():
    values = [1.0, 2.0, 3.0, 10.0]
    assert bootstrap_ci(values, 1000) == bootstrap_ci(values, 1000)
    lo, hi = bootstrap_ci(values, 1000)
    assert lo < 4.0 < hi


def test_paired_difference_separates_methods_whose_own_intervals_overlap():
    """Tasks spread from 1x to 5x; one method is 0.1x faster on every one of them."""
    base = {(f"t{i}", 0): {"a": 1.0 + 0.4 * i, "b": 1.1 + 0.4 * i} for i in range(11)}
    _, a_hi = bootstrap_ci([u["a"] for u in base.values()], 1000)
    b_lo, _ = bootstrap_ci([u["b"] for u in base.values()], 1000)
    assert b_lo < a_hi  # unpaired: the intervals overlap
    mean, lo, hi, n = paired_difference(base | {("x", 0): {"a": 9.0}}, "b", "a", 1000)
    assert n == 11  # the unit only one method ran is left out
    assert mean == pytest.approx(0.1) and 0 < lo <= hi
