"""Replay through the real loop: corpus programs proposed per problem, scored by recorded
outcomes (our measurements first, published labels else), and the tables that say so."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from maxcode.cli import app
from maxcode.errors import ConfigError
from maxcode.params import KernelBenchSuite, Params
from maxcode.pipeline import PipelinePlan, build_suite, make_tables, run_rollout
from maxcode.runs.corpus import SourceSpec, import_corpus
from maxcode.runs.evaluate import evaluate_corpus
from maxcode.runs.replay import ReplayCorpus, ReplayMissing
from maxcode.search.config import method_from_params
from maxcode.tasks.kernelbench import load_problem_file
from tests.runs.public_layouts import (
    kernel,
    write_checkout,
    write_kernel_coder,
    write_kernelbench_runs,
)
from tests.runs.test_eval_runs import FakeEvaluation

PRESET = Path(__file__).resolve().parents[2] / "presets" / "real-candidates.yaml"
REPLAY_LLM = {"generator": {"backend": "replay"}, "critic": {"backend": "offline"}}


@pytest.fixture
def world(tmp_path: Path) -> dict:
    """A KernelBench checkout, a corpus of two layouts (A6000 and A100 labels, runtimes
    only) and the level-1 suite built from the checkout."""
    checkout = write_checkout(tmp_path / "kb")
    specs = [
        SourceSpec.parse(f"kernel-coder:{write_kernel_coder(tmp_path / 'kc')}@5a9fb0c"),
        SourceSpec.parse(f"kernelbench-runs:{write_kernelbench_runs(tmp_path / 'tr')}@9202a5c"),
    ]
    import_corpus(specs, checkout, tmp_path / "corpus")
    suite = tmp_path / "suite"
    tasks = build_suite("kb_l1", KernelBenchSuite(root=str(checkout), levels=(1,)), suite)
    return {"checkout": checkout, "corpus": tmp_path / "corpus", "suite": suite, "tasks": tasks}


def _rollout(
    world: dict, tmp_path: Path, method: str, override: dict, replay: dict, seed: int = 3
) -> list:
    """One replayed rollout of problem 1, its records."""
    out = tmp_path / "results" / method / f"seed{seed}.jsonl"
    run_rollout(
        suite_dir=world["suite"],
        task_id=world["tasks"][0].task_id,  # 1_Relu1.py
        method=method_from_params(
            method, {"seeds": [seed], "depth": 1, "k": 4}, override
        ).to_dict(),
        seed=seed,
        llm=REPLAY_LLM,
        evaluation={"reward": "speedup", "replay": replay},
        inflight=tmp_path / "inflight" / method / f"seed{seed}.jsonl",
        output=out,
        cache_dir=tmp_path / "cache",
        model_dir=None,
        params={},
        corpus=world["corpus"],
    )
    return [json.loads(line) for line in out.read_text().splitlines()]


def test_replayed_search_on_published_labels_pays_once_per_program(world, tmp_path):
    records = _rollout(
        world, tmp_path, "best-of-n", {"trajectory": "none"}, {"published_labels": True}
    )
    start = records[0]
    assert start["policy"]["name"] == "replay/1+seed3"
    assert "published label" in start["evaluator"]
    candidates = [r for r in records if r["kind"] == "candidate"]
    assert len(candidates) == 4 and all(c["meta"]["replay_seed"] == 3 for c in candidates)
    assert len({c["meta"]["code_hash"] for c in candidates}) == 4
    # The A6000 labels (the GPU that labelled most of the problem) give runtimes only:
    # a correct program at 3 ms is rewarded 1000/3; the A100 label of the shared program
    # is never mixed in.
    rewards = sorted(round(c["reward"], 6) for c in candidates)
    assert set(rewards) <= {0.0, round(1000 / 3, 6)} and rewards[-1] == round(1000 / 3, 6)
    again = _rollout(
        world, tmp_path, "maxcode+all-k", {"critique": True}, {"published_labels": True}
    )
    replayed = [r for r in again if r["kind"] == "candidate"]
    assert [c["meta"]["code_hash"] for c in replayed] == [
        c["meta"]["code_hash"] for c in candidates
    ]
    assert all(c["evaluation"]["cached"] for c in replayed)


def test_our_measurements_take_precedence_and_pools_never_mix(world, tmp_path):
    evaluate_corpus(world["corpus"], tmp_path / "eval", FakeEvaluation(), "fake/1", "GPU X")
    export = tmp_path / "eval" / "measurements.jsonl"
    rows = ReplayCorpus.load(world["corpus"], [export], published=True).rows
    sources = {row["label_source"] for row in rows.values()}
    assert sources == {"ours/fake/1/GPU X"}  # every problem of this corpus was measured
    only_ours = ReplayCorpus.load(world["corpus"], [export], published=False)
    task = load_problem_file(world["checkout"] / "level1" / "1_Relu1.py")
    with pytest.raises(ReplayMissing, match=r"measurements\.jsonl: no measurement of program"):
        only_ours.evaluator(str(export)).evaluate(task, kernel("never written"))


def test_published_labels_keep_the_one_gpu_of_a_problem(world):
    rows = ReplayCorpus.load(world["corpus"], published=True).rows
    by_problem = {}
    for row in rows.values():
        by_problem.setdefault(row["gpu"], []).append(row)
    assert set(by_problem) == {"NVIDIA RTX A6000", "NVIDIA A100-SXM4-40GB"}
    assert all("1000/runtime_ms" in r["evaluator"] for r in rows.values() if r["status"] == "ok")


def test_measuring_here_proposes_every_program_of_the_problem(world):
    everything = ReplayCorpus.load(world["corpus"])
    assert everything.rows is None and everything.evaluator("") is None
    task = load_problem_file(world["checkout"] / "level1" / "1_Relu1.py")
    # 8 Kernel-Coder attempts: the two empty ones are one program, one shares technoabsurdist's
    assert everything.policy(0).pool_size(task) == 7


def test_replayed_tables_say_replay_and_the_reward_unit(world, tmp_path):
    for seed in (3, 4):
        _rollout(
            world, tmp_path, "best-of-n", {"trajectory": "none"}, {"published_labels": True}, seed
        )
    tables = tmp_path / "tables"
    outputs = [str(tables / f"{n}.md") for n in ("main", "ablation", "rerank", "budget")]
    outputs += [str(tmp_path / "plots" / "curve.png"), str(tmp_path / "metrics.json")]
    outputs.append(str(tmp_path / "provenance.json"))
    make_tables(
        [tmp_path / "results" / "best-of-n" / f"seed{seed}.jsonl" for seed in (3, 4)],
        None,
        None,
        {"main": ["best-of-n"]},
        "real-candidates",
        REPLAY_LLM,
        outputs,
    )
    main = (tables / "main.md").read_text()
    assert "generator replay (programs of public LLM runs" in main
    # one row for the two seeds, naming both, and never "offline" (the programs are LLM-written)
    assert "replay/1 (replayed LLM programs), seeds 3, 4" in main
    assert "no effect under replay" in main
    assert "1000/runtime_ms: ranks within a problem are exact" in main
    assert "offline: non-LLM" not in main
    assert "left out under replay" in (tables / "ablation.md").read_text()


def test_the_preset_stops_naming_each_path_to_set():
    result = CliRunner().invoke(app, ["check-params", "--params", str(PRESET)])
    assert result.exit_code == 2
    for key in ("suites.kernelbench_l1.root", "suites.kernelbench_l2.root", "corpus.folder"):
        assert key in result.output


def test_the_preset_plans_replay_without_a_gpu(world, tmp_path):
    raw = yaml.safe_load(PRESET.read_text())
    for suite in raw["suites"].values():
        suite["root"] = str(world["checkout"])
    raw["corpus"].update(kernelbench=str(world["checkout"]), folder=str(world["corpus"]))
    plan = PipelinePlan.from_params(Params.from_dict(raw, "real-candidates.yaml"))
    assert plan.gpus("kernelbench_l1") == 0 and plan.reranker_dir.endswith("r2g-corpus/encoder")
    assert plan.held_out_problems and all(
        p.startswith(("L1/", "L2/")) for p in plan.held_out_problems
    )
    raw["llm"]["generator"] = {"backend": "offline"}
    with pytest.raises(ConfigError, match=r"evaluation.replay: recorded outcomes only score"):
        Params.from_dict(raw, "real-candidates.yaml")
    raw["llm"]["generator"] = {"backend": "replay"}
    raw["r2g"]["train_methods"] = ["best-of-n"]
    with pytest.raises(ConfigError, match=r"r2g.train_methods: under replay .* set it to \[\]"):
        Params.from_dict(raw, "real-candidates.yaml")
