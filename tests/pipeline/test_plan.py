"""The plan owns the paths and the cleanup; roles keep what the user set."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from maxcode.cli import app
from maxcode.evaluate.cpp import CppEvalConfig
from maxcode.evaluate.cuda.config import CudaEvalConfig
from maxcode.params import EvaluationParams
from maxcode.pipeline import (
    CACHE_DIR,
    INFLIGHT,
    INFLIGHT_DIR,
    ROLLOUT,
    SUITE_DIR,
    PipelinePlan,
    clean_inflight,
)
from maxcode.roles import build_evaluator
from maxcode.stages.kernelcompare_cli import app as kernelcompare_app
from tests.fakes.small_pch import small_pch_headers  # noqa: F401

REPO = Path(__file__).resolve().parents[2]


def test_the_methods_profile_flag_never_turns_off_the_users_profile(tmp_path):
    evaluation = EvaluationParams(
        cpp=CppEvalConfig(profile=True), cuda=CudaEvalConfig(profile=True)
    )
    for language in ("cpp", "cuda"):
        evaluator = build_evaluator(language, evaluation, tmp_path, profile=False)
        assert evaluator.evaluator.config.profile is True, language
    plain = build_evaluator("cpp", EvaluationParams(), tmp_path, profile=True)
    assert plain.evaluator.config.profile is True  # Effi-Learner's flag still adds it


@pytest.mark.usefixtures("small_pch_headers")
def test_a_cuda_evaluator_starts_its_precompiled_headers_as_it_is_built(tmp_path):
    """Rollouts, KernelCompare and ``optimize`` build their evaluator before the LLM writes
    the first candidates: its precompiled headers build meanwhile (a small header stands in
    for torch's)."""
    evaluation = EvaluationParams(cuda=CudaEvalConfig(cuda_arch="9.0"))
    inner = build_evaluator("cuda", evaluation, tmp_path).evaluator
    try:
        assert inner._pch_ahead is not None
    finally:
        inner.close()
    assert inner.pch_ahead_seconds is not None and inner.pch_ahead_seconds > 0


def test_rollouts_of_cuda_suites_get_the_gpu_env():
    raw = yaml.safe_load((REPO / "presets" / "gpu.yaml").read_text())
    plan = PipelinePlan.from_config(raw)
    assert {plan.conda_env(s) for s in plan.tasks} == {"../../envs/gpu-eval.yaml"}
    cpu = PipelinePlan.from_config(yaml.safe_load((REPO / "params.yaml").read_text()))
    assert cpu.conda_env("cpp_builtin") == "../../envs/cpu-eval.yaml"


def _unit(root: Path, task: str) -> tuple[Path, Path]:
    keys = {"stage": "rollouts", "suite": "s", "method": "m", "task": task, "seed": 0}
    inflight, published = root / INFLIGHT.format(**keys), root / ROLLOUT.format(**keys)
    inflight.parent.mkdir(parents=True, exist_ok=True)
    return inflight, published


def test_a_finished_run_leaves_no_inflight_copies_but_keeps_unfinished_work(tmp_path):
    linked, linked_out = _unit(tmp_path, "t1")  # published by hard link
    linked.write_text('{"type": "run_end"}\n')
    linked.with_name(linked.name + ".lock").touch()
    linked_out.parent.mkdir(parents=True, exist_ok=True)
    os.link(linked, linked_out)
    copied, copied_out = _unit(tmp_path, "t2")  # published by copy (another filesystem)
    copied.write_text("same\n")
    copied_out.parent.mkdir(parents=True, exist_ok=True)
    copied_out.write_text("same\n")
    unfinished, _ = _unit(tmp_path, "t3")  # killed mid-run: nothing published
    unfinished.write_text('{"type": "run_start"}\n')
    stale, stale_out = _unit(tmp_path, "t4")  # published bytes differ: keep, never guess
    stale.write_text("a\n")
    stale_out.parent.mkdir(parents=True, exist_ok=True)
    stale_out.write_text("b\n")

    removed = clean_inflight(tmp_path)

    assert not linked.exists() and not copied.exists() and len(removed) == 3
    assert linked_out.read_text() == '{"type": "run_end"}\n' and copied_out.exists()
    assert unfinished.exists() and stale.exists()
    assert clean_inflight(tmp_path) == []


def test_cleanup_removes_the_inflight_folder_when_empty(tmp_path):
    inflight, published = _unit(tmp_path, "t")
    inflight.write_text("x\n")
    published.parent.mkdir(parents=True)
    published.write_text("x\n")
    clean_inflight(tmp_path)
    assert not (tmp_path / "results" / ".inflight").exists()


def test_kernelcompare_commands_refuse_a_missing_params_file(tmp_path):
    result = CliRunner().invoke(
        kernelcompare_app,
        [
            "split",
            "--tasks",
            str(tmp_path / "t.jsonl"),
            "--out",
            str(tmp_path / "s.json"),
            "--params",
            str(tmp_path / "nope.yaml"),
        ],
    )
    assert result.exit_code != 0
    assert "nope.yaml: parameter file not found" in str(result.exception)


def test_bad_input_is_one_line_and_exit_code_2(tmp_path, capsys, monkeypatch):
    from maxcode.cli import main

    monkeypatch.setattr(
        "sys.argv",
        [
            "maxcode",
            "kernelcompare",
            "split",
            "--tasks",
            "t",
            "--out",
            "o",
            "--params",
            str(tmp_path / "nope.yaml"),
        ],
    )
    with pytest.raises(SystemExit) as exit_:
        main()
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.strip().count("\n") == 0 and "parameter file not found" in err
    assert "Traceback" not in err


@pytest.mark.slow
def test_a_rollout_by_hand_writes_where_the_rules_do(tmp_path, monkeypatch):
    """`maxcode build-suite` and `maxcode rollout` take every path from the plan: the suite,
    the rollout, the caches, and the in-flight records the rules use, so results/rollouts
    holds the rollout alone (no hidden in-flight copy or lock inside a DVC output) and the
    pipeline's clean-up removes the copy."""
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    params["suites"] = {
        "s": {"kind": "builtin_cpp", "n_tests": 2, "problems": ["io_prefix_sums_endl"]}
    }
    params["evaluation"]["cpp"].update(timing="wall", repeats=1)
    params["search"].update(depth=1, k=1, seeds=[0])
    params["methods"] = {"m": {"trajectory": "none"}}
    params["r2g"]["train_methods"] = ["m"]
    params["tables"].update(main=["m"], ablation=[], rerank=[], reference=None)
    del params["kernelcompare"]
    monkeypatch.chdir(tmp_path)
    Path("params.yaml").write_text(yaml.safe_dump(params))
    runner = CliRunner()
    built = runner.invoke(app, ["build-suite", "s"])
    assert built.exit_code == 0, built.output
    assert Path(SUITE_DIR.format(suite="s"), "tasks.jsonl").is_file()
    ran = runner.invoke(app, ["rollout", "s", "io_prefix_sums_endl", "m"])
    assert ran.exit_code == 0, ran.output
    keys = {"stage": "rollouts", "suite": "s", "method": "m", "task": "io_prefix_sums_endl"}
    published = Path(ROLLOUT.format(**keys, seed=0))
    assert [p for p in Path("results/rollouts").rglob("*") if p.is_file()] == [published]
    assert Path(INFLIGHT.format(**keys, seed=0)).read_bytes() == published.read_bytes()
    assert Path(CACHE_DIR).is_dir()
    clean_inflight(tmp_path)
    assert not Path(INFLIGHT_DIR).exists() and published.is_file()
