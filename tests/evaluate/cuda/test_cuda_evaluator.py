"""Evaluator paths that need no GPU: static rejection, syntax errors, config, the CLI's JSON."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from maxcode.errors import GpuUnavailable
from maxcode.evaluate.cuda import CudaEvalConfig, CudaEvaluator
from maxcode.evaluate.cuda_cli import app
from maxcode.evaluate.result import Status
from maxcode.tasks.model import Task

from .cuda_fixtures import HOSTILE, hostile


@pytest.fixture
def evaluator(tmp_path):
    return CudaEvaluator(CudaEvalConfig(cuda_arch="9.0", host_pch=False), tmp_path, gpus=[])


def test_static_rejection_needs_no_gpu(evaluator, saxpy_task):
    result = evaluator.evaluate(saxpy_task, hostile("torch_only"))
    assert result.status is Status.REJECTED
    assert result.reason.startswith("no_custom_kernel: ")
    assert result.figures["failed_check"] == "no_custom_kernel"
    assert result.evaluator == evaluator.name and result.speedup is None


def test_invalid_python_is_a_compile_error_with_the_line(evaluator, saxpy_task):
    result = evaluator.evaluate(saxpy_task, "class ModelNew(:\n    pass\n")
    assert result.status is Status.COMPILE_ERROR and "line 1" in result.reason


def test_warn_severity_lets_the_candidate_through_to_the_gpu_stage(tmp_path, saxpy_task):
    cfg = CudaEvalConfig(
        cuda_arch="9.0", host_pch=False, check_severity={"no_custom_kernel": "warn"}
    )
    ev = CudaEvaluator(cfg, tmp_path, gpus=[])
    with pytest.raises(GpuUnavailable, match="no NVIDIA GPU"):
        ev.evaluate(saxpy_task, hostile("torch_only"))


def test_non_cuda_task_is_refused(evaluator):
    task = Task("p1", "pie", "cpp", "int main(){}")
    with pytest.raises(ValueError, match="'cuda' tasks"):
        evaluator.evaluate(task, "x")


def test_name_changes_with_config(tmp_path):
    a = CudaEvaluator(CudaEvalConfig(), tmp_path)
    b = CudaEvaluator(CudaEvalConfig(correctness_trials=3), tmp_path)
    assert a.name.startswith("maxcode-cuda/") and a.name != b.name


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"correctness_trials": 0}, "correctness_trials"),
        ({"check_severity": {"no_such_check": "error"}}, "unknown check id 'no_such_check'"),
        ({"check_severity": {"result_reuse": "loud"}}, "choose one of"),
        ({"cuda_arch": "sm90"}, "look like '9.0'"),
        ({"excessive_speedup": 0.5}, "excessive_speedup"),
        ({"hold_us": -1.0}, "hold_us"),
        ({"hold_us": 200.0, "hold_max_us": 100.0}, "hold_max_us"),
    ],
)
def test_config_validation_says_how_to_fix(kwargs, match):
    with pytest.raises(ValueError, match=match):
        CudaEvalConfig(**kwargs)


def test_config_loading_is_strict():
    with pytest.raises(ValueError, match=r"params\.yaml:cuda: unknown key\(s\) 'trials'"):
        CudaEvalConfig.from_dict({"trials": 3}, origin="params.yaml:cuda")
    assert CudaEvalConfig.from_dict({"timing_trials": 7}).timing_trials == 7


def test_cli_json_for_a_rejected_candidate_exits_zero(tmp_path, saxpy_task, monkeypatch):
    monkeypatch.setenv("MAXCODE_CACHE", str(tmp_path))
    task_file = tmp_path / "task.py"
    task_file.write_text(saxpy_task.reference_source)
    out = CliRunner().invoke(
        app, [str(HOSTILE / "torch_only.py"), "--task", str(task_file), "--json"]
    )
    assert out.exit_code == 0, out.output
    record = json.loads(out.output)
    assert record["status"] == "rejected" and record["failed_check"] == "no_custom_kernel"
    assert record["correct"] is False and record["speedup_vs_eager"] is None


def test_cli_bad_task_file_fails_with_a_message(tmp_path):
    task_file = tmp_path / "task.py"
    task_file.write_text("import torch\n")
    out = CliRunner().invoke(app, [str(HOSTILE / "good.py"), "--task", str(task_file), "--json"])
    assert out.exit_code != 0
    assert "missing top-level Model, get_inputs, get_init_inputs" in str(out.exception)


def test_each_result_is_reported_as_it_finishes(evaluator, saxpy_task):
    seen = []
    results = evaluator.evaluate_items(
        [(saxpy_task, hostile("torch_only")), (saxpy_task, "class ModelNew(:\n")],
        on_result=lambda index, result: seen.append((index, result.status)),
    )
    assert seen == [(0, Status.REJECTED), (1, Status.COMPILE_ERROR)]
    assert [r.status for r in results] == [s for _, s in seen]


def test_half_precision_code_is_a_downgrade_only_when_the_evaluation_runs_at_fp32(
    tmp_path, saxpy_task
):
    half = hostile("good").replace("ext.saxpy(a, b,", "ext.saxpy(a.half().float(), b,")
    assert half != hostile("good")
    at_fp32 = CudaEvaluator(CudaEvalConfig(cuda_arch="9.0", host_pch=False), tmp_path, gpus=[])
    assert at_fp32._static(_job(saxpy_task, half, tmp_path)).figures["failed_check"] == (
        "precision_downgrade"
    )
    at_fp16 = CudaEvaluator(
        CudaEvalConfig(
            cuda_arch="9.0", host_pch=False, semantics="kernelbench-head", precision="fp16"
        ),
        tmp_path,
        gpus=[],
    )
    assert at_fp16._static(_job(saxpy_task, half, tmp_path)) is None


def _job(task, source, tmp_path):
    from maxcode.evaluate.cuda.evaluator import _Job

    return _Job(0, task, source, tmp_path / "job")


def test_cli_records_the_tf32_setting_in_every_result(tmp_path, saxpy_task, monkeypatch):
    monkeypatch.setenv("MAXCODE_CACHE", str(tmp_path))
    task_file = tmp_path / "task.py"
    task_file.write_text(saxpy_task.reference_source)
    argv = [str(HOSTILE / "torch_only.py"), "--task", str(task_file), "--json", "--tf32", "off"]
    record = json.loads(CliRunner().invoke(app, argv).output)
    assert record["status"] == "rejected" and record["figures"]["tf32"] == "off"


def test_cli_bad_tf32_value_is_one_line_and_exit_2(tmp_path, saxpy_task):
    import subprocess
    import sys

    task_file = tmp_path / "task.py"
    task_file.write_text(saxpy_task.reference_source)
    argv = [str(HOSTILE / "good.py"), "--task", str(task_file), "--tf32", "strict"]
    out = subprocess.run(
        [sys.executable, "-m", "maxcode", "eval", "cuda", *argv], capture_output=True, text=True
    )
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [
        "error: --tf32 'strict': choose one of torch-default, off"
    ]


def test_cli_without_a_visible_gpu_is_one_line_and_exit_2(tmp_path, saxpy_task):
    """A machine without a GPU (or with every GPU hidden): what to do, not a traceback."""
    import os
    import subprocess
    import sys

    task_file = tmp_path / "task.py"
    task_file.write_text(saxpy_task.reference_source)
    argv = [str(HOSTILE / "good.py"), "--task", str(task_file), "--cache-dir", str(tmp_path)]
    out = subprocess.run(
        [sys.executable, "-m", "maxcode", "eval", "cuda", *argv],
        capture_output=True,
        text=True,
        env={**os.environ, "CUDA_VISIBLE_DEVICES": ""},
    )
    assert out.returncode == 2, out.stderr
    (line,) = out.stderr.strip().splitlines()
    assert line.startswith("error: no NVIDIA GPU") and "run it on a machine with a GPU" in line
