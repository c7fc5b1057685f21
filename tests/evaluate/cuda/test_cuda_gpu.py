"""End-to-end on a GPU: verdicts, timing fields, figures, build-cache reuse, the CLI."""

from __future__ import annotations

import dataclasses
import json

import pytest
from typer.testing import CliRunner

from maxcode.evaluate.cuda import CudaEvalConfig, CudaEvaluator
from maxcode.evaluate.cuda_cli import app
from maxcode.evaluate.result import Status

from .cuda_fixtures import HOSTILE, requires_gpu

pytestmark = [pytest.mark.gpu, requires_gpu]

CASES = [
    ("1_Scaled_vector_add.py", "fast", Status.OK),
    ("1_Scaled_vector_add.py", "wrong", Status.WRONG_ANSWER),
    ("1_Scaled_vector_add.py", "compile_error", Status.COMPILE_ERROR),
    ("5_Softmax.py", "fast", Status.OK),
    ("6_LayerNorm.py", "fast", Status.OK),
    ("8_Square_matmul.py", "fast", Status.OK),
    ("1_Linear_ReLU_BiasAdd.py", "fast", Status.OK),
]


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("cuda-cache")


@pytest.fixture(scope="module")
def results(builtin_tasks, cache_dir):
    from cuda_candidates import candidate_source

    items = [(builtin_tasks[f], candidate_source(f, v)) for f, v, _ in CASES]
    with CudaEvaluator(CudaEvalConfig(timing_trials=30, timing_seconds=0), cache_dir) as ev:
        ev._ensure_workers()
        assert ev._workers[0].probe_error is None, "compiler preload fell back: see gpu0.log"
        return ev.evaluate_items(items)


@pytest.mark.parametrize(
    ("i", "case"), list(enumerate(CASES)), ids=[f"{c[0]}-{c[1]}" for c in CASES]
)
def test_verdicts(results, i, case):
    result = results[i]
    assert result.status is case[2], f"{result.reason}\n{result.figures.get('output_tail', '')}"


def test_ok_result_carries_timing_env_and_roofline(results):
    r = results[0]
    assert r.timing.mode == "cuda_events" and r.timing.unit == "ms" and r.timing.repeats == 30
    assert r.speedup == pytest.approx(r.figures["speedup_vs_eager"], rel=1e-3)
    assert r.figures["speedup_vs_compiled"] > 0
    assert set(r.figures["runtime_ms"]) == {"candidate", "eager", "compiled", "eager_this_process"}
    for stats in r.figures["runtime_ms"].values():
        assert stats["host_median"] > 0 and 100.0 <= stats["hold_us_median"] <= 1000.0
    env = r.figures["env"]
    assert env["gpu"] and env["driver"] and env["torch"] and env["cuda"] and env["sm_clock_mhz"]
    for key in ("achieved_bandwidth_gbs", "peak_bandwidth_gbs", "achieved_tflops", "peak_tflops"):
        assert r.figures[key] is not None and r.figures[key] >= 0
    assert 0 < r.figures["achieved_bandwidth_gbs"] < r.figures["peak_bandwidth_gbs"] * 1.2
    assert len(r.tests) == 5 and all(t.status is Status.OK for t in r.tests)


def test_stages_are_timed_separately(results):
    stages = results[0].figures["stage_seconds"]
    for name in ("load", "construct", "result_reuse", "correctness", "shapes", "forward_trace"):
        assert stages[name] >= 0, stages
    assert stages["timing"] >= 0 and stages["drift_check"] >= 0
    assert "torch_compile" not in stages  # done once per task, in the reference process


def test_short_kernels_get_more_timed_rounds(builtin_tasks, cache_dir):
    from cuda_candidates import candidate_source

    config = CudaEvalConfig(
        correctness_trials=1,
        timing_trials=20,
        timing_seconds=5.0,
        timing_max_trials=200,
        time_compiled_reference=False,
    )
    with CudaEvaluator(config, cache_dir) as ev:
        r = ev.evaluate(
            builtin_tasks["1_Scaled_vector_add.py"],
            candidate_source("1_Scaled_vector_add.py", "fast"),
        )
    assert r.status is Status.OK, r.reason
    assert r.timing.repeats == 200  # the ceiling: a vector add never fills 5 s in 200 rounds


def test_matmul_reports_flops(results):
    r = results[5]
    assert r.figures["flops"] == 2 * 2048**3
    assert 0 < r.figures["achieved_tflops"] < r.figures["peak_tflops"] * 1.5


def test_wrong_answer_names_the_error(results):
    assert "max abs err" in results[1].reason and results[1].tests[0].status is Status.WRONG_ANSWER


def test_compile_error_keeps_first_error_line(results):
    r = results[2]
    assert "undeclared_symbol" in r.reason and "undeclared_symbol" in r.compile_log


def test_identical_candidate_is_not_compiled_again(builtin_tasks, cache_dir):
    from cuda_candidates import candidate_source

    task = builtin_tasks["1_Scaled_vector_add.py"]
    with CudaEvaluator(
        CudaEvalConfig(correctness_trials=1, timing_trials=5, time_compiled_reference=False),
        cache_dir,
    ) as ev:
        again = ev.evaluate(task, candidate_source("1_Scaled_vector_add.py", "fast"))
    assert again.status is Status.OK and again.figures["build_cached"] is True


def test_cli_prints_one_json_object(builtin_tasks, cache_dir, tmp_path):
    task_file = tmp_path / "task.py"
    task_file.write_text(builtin_tasks["1_Scaled_vector_add.py"].reference_source)
    args = [
        str(HOSTILE / "good.py"),
        "--task",
        str(task_file),
        "--trials",
        "2",
        "--timing-trials",
        "10",
        "--cache-dir",
        str(cache_dir),
        "--json",
    ]
    out = CliRunner().invoke(app, args)
    assert out.exit_code == 0, out.output
    record = json.loads(out.output)
    assert record["status"] == "ok" and record["correct"] is True
    assert len(record["correctness_trials"]) == 2 and record["speedup_vs_eager"] > 0
    assert record["runtime_ms"]["candidate"]["median"] > 0


def test_profile_lists_the_candidates_kernels_and_the_references(builtin_tasks, cache_dir):
    """Effi-Learner's CUDA feedback: per-kernel GPU time of candidate and reference."""
    from cuda_candidates import candidate_source

    task = builtin_tasks["6_LayerNorm.py"]
    config = CudaEvalConfig(
        correctness_trials=1, timing_trials=5, time_compiled_reference=False, profile=True
    )
    with CudaEvaluator(config, cache_dir) as ev:
        result = ev.evaluate(task, candidate_source("6_LayerNorm.py", "fast"))
    assert result.status is Status.OK, result.reason
    profile = result.profile
    assert profile["tool"] == "torch.profiler" and profile["total_us"] > 0
    assert profile["kernels_per_call"] >= 1 and profile["reference_total_us"] > 0
    names = [row["function"] for row in profile["functions"]]
    assert any("layernorm" in n.lower() or "layer_norm" in n.lower() for n in names), names
    assert abs(sum(r["share_pct"] for r in profile["functions"]) - 100.0) < 1.0


def test_sharing_the_gpu_changes_no_verdict_and_no_speedup(builtin_tasks, cache_dir, results):
    """The same candidates one at a time (gpu_concurrency 1) and side by side (the default,
    4 on a 16-core host): the same verdicts, and speedups within the timing's own spread,
    because every timing has the GPU alone."""
    from cuda_candidates import candidate_source

    items = [(builtin_tasks[f], candidate_source(f, v)) for f, v, _ in CASES]
    config = CudaEvalConfig(timing_trials=30, timing_seconds=0, gpu_concurrency=1)
    with CudaEvaluator(config, cache_dir) as ev:
        alone = ev.evaluate_items(items)
    assert [r.status for r in alone] == [r.status for r in results]
    for shared, single in zip(results, alone, strict=True):
        if shared.status is Status.OK:
            assert shared.speedup == pytest.approx(single.speedup, rel=0.15), shared.figures


def test_large_inputs_are_made_once_ahead_and_mapped_by_each_sandboxed_candidate(
    saxpy_task, cache_dir, monkeypatch
):
    """Multi-GB KernelBench inputs are made once per task by the GPU worker's store, in
    sandboxed makers, while the candidates wait for the GPU (trial_inputs.InputStore); each
    candidate's process maps them and is judged as with serial inputs."""
    from cuda_candidates import candidate_source

    import maxcode.evaluate.cuda.evaluator as evaluator_module

    monkeypatch.setattr(evaluator_module, "INPUTS_AHEAD_MIN_BYTES", 1 << 28)  # 1 GB is large

    big = dataclasses.replace(
        saxpy_task,
        task_id="saxpy-1GB-inputs",
        reference_source=saxpy_task.reference_source.replace("batch_size = 16", "batch_size = 128"),
    )
    assert "batch_size = 128" in big.reference_source
    with CudaEvaluator(CudaEvalConfig(timing_seconds=0), cache_dir) as ev:
        fast, wrong = ev.evaluate_items(
            [
                (big, candidate_source("1_Scaled_vector_add.py", "fast")),
                (big, candidate_source("1_Scaled_vector_add.py", "wrong")),
            ]
        )
    assert fast.status is Status.OK, f"{fast.reason}\n{fast.figures.get('output_tail', '')}"
    for r in (fast, wrong):
        assert r.figures.get("trial_inputs_made_ahead") == 5, r.figures  # every trial
        assert "trial_inputs_ahead" not in r.figures  # no helpers of its own
    assert len(fast.tests) == 5 and all(t.status is Status.OK for t in fast.tests)
    assert fast.figures["stage_seconds"]["correctness_inputs"] < 5  # mapped, not made
    assert wrong.status is Status.WRONG_ANSWER
