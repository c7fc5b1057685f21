"""On a real GPU: timed outputs judged against the candidate's own untimed outputs, repeated
calls on identical inputs, and the TF32 setting (the hostile fixtures and their honest twins).

`late_reuse.py` and `racy.py` run in `test_cuda_hostile.py`'s batch; their twins run here.
"""

from __future__ import annotations

import pytest

from maxcode.evaluate.cuda import CudaEvalConfig, CudaEvaluator
from maxcode.evaluate.result import Status
from maxcode.tasks.kernelbench import task_from_file

from .cuda_fixtures import HOSTILE, hostile, requires_gpu

pytestmark = [pytest.mark.gpu, requires_gpu]

QUICK = {"correctness_trials": 3, "timing_trials": 20, "time_compiled_reference": False}


@pytest.fixture(scope="module")
def twins(builtin_tasks, tmp_path_factory):
    """The borderline and atomic-sum twins in one batch (seed 42: borderline_task.py's)."""
    borderline = task_from_file(HOSTILE / "borderline_task.py")
    items = [
        (borderline, hostile("borderline")),
        (builtin_tasks["3_Row_sum.py"], hostile("atomic_sum")),
    ]
    config = CudaEvalConfig(seed=42, run_timeout_s=60, **QUICK)
    with CudaEvaluator(config, tmp_path_factory.mktemp("cuda-cache")) as evaluator:
        return evaluator.evaluate_items(items)


def test_a_borderline_candidate_fails_the_tolerance_on_a_timed_input_set_not_as_a_hack(twins):
    result = twins[0]
    assert result.status is Status.WRONG_ANSWER, result.reason
    assert result.reason.startswith("timing input set 1: output 0: 1 of 4096 elements outside")
    assert "failed_check" not in result.figures


def test_an_atomic_sum_passes_with_its_run_to_run_difference_recorded(twins):
    result = twins[1]
    assert result.status is Status.OK, result.reason
    assert 0.0 <= result.figures["repeat_max_abs_diff"] < 1e-2
    assert result.figures["timed_outputs_checked"] >= 2


def test_a_racy_candidate_is_named_with_its_largest_difference(builtin_tasks, tmp_path):
    config = CudaEvalConfig(**QUICK)
    with CudaEvaluator(config, tmp_path) as evaluator:
        result = evaluator.evaluate(builtin_tasks["1_Scaled_vector_add.py"], hostile("racy"))
    assert result.status is Status.REJECTED and result.figures["failed_check"] == "nondeterministic"
    assert "two calls on the inputs of trial 0: output 0: 1 of" in result.reason
    assert "largest difference 0.5" in result.reason


@pytest.fixture(scope="module")
def conv_by_tf32(builtin_tasks, tmp_path_factory):
    """An exact FP32 convolution under each TF32 setting, at KernelBench HEAD's 1e-4."""
    task = builtin_tasks["10_Conv2d_3x3.py"]
    results = {}
    for setting in ("torch-default", "off"):
        config = CudaEvalConfig(semantics="kernelbench-head", tf32=setting, **QUICK)
        with CudaEvaluator(config, tmp_path_factory.mktemp(f"cuda-{setting}")) as evaluator:
            results[setting] = evaluator.evaluate(task, hostile("exact_conv"))
    return results


def test_strict_fp32_passes_an_exact_convolution_and_is_recorded(conv_by_tf32):
    strict = conv_by_tf32["off"]
    assert strict.status is Status.OK, strict.reason
    assert strict.figures["tf32"] == "off"


def test_a_failure_under_torch_defaults_says_it_passes_against_a_strict_fp32_reference(
    conv_by_tf32,
):
    default = conv_by_tf32["torch-default"]
    assert default.figures["tf32"] == "torch-default"
    if default.status is Status.OK:
        pytest.skip("cuDNN ran the reference convolution in FP32 on this GPU: nothing to explain")
    assert default.status is Status.WRONG_ANSWER, default.reason
    assert "convolution" in default.figures["reference_tf32_ops"]
    assert default.figures["strict_fp32_reference"] == "ok"
    assert "recomputed in strict FP32 on the same inputs it passes" in default.reason
