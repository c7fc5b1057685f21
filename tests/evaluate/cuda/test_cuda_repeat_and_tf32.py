"""CPU parts of the repeat check and the TF32 setting: two calls' outputs compared at the
semantics' tolerance, and which reference ops TF32 can reach under which flags."""

from __future__ import annotations

import warnings

import pytest
import torch

from maxcode.evaluate.cuda import worker


@pytest.fixture
def run(tmp_path):
    return worker._Run({"config": {"semantics": "kernelbench-head"}, "job_dir": str(tmp_path)})


def test_two_calls_within_the_tolerance_pass_and_their_largest_difference_is_recorded(run):
    first = [torch.ones(8)]
    assert run.repeat_difference(first, [torch.ones(8) + 2e-5]) == ""
    assert run.figures["repeat_max_abs_diff"] == pytest.approx(2e-5, rel=1e-2)


def test_two_calls_beyond_the_tolerance_name_the_largest_difference(run):
    again = torch.ones(8)
    again[3] += 0.5
    problem = run.repeat_difference([torch.ones(8)], [again])
    assert problem == (
        "output 0: 1 of 8 elements differ beyond atol=0.0001 rtol=0.0001, largest difference 0.5"
    )


def test_a_changed_output_shape_between_calls_is_named(run):
    assert "then (4,)" in run.repeat_difference([torch.ones(8)], [torch.ones(4)])


@pytest.fixture
def torch_flags():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        saved = (torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32)
        yield
        torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = saved


def test_a_convolution_may_use_tf32_under_torch_defaults_and_not_in_strict_fp32(torch_flags):
    with worker._OpRecorder() as seen:
        torch.nn.Conv2d(3, 4, 3)(torch.randn(1, 3, 8, 8))
        torch.nn.Linear(4, 4)(torch.randn(2, 4))
    assert worker.tf32_ops(seen.ops, "fp32") == ["convolution"]  # cuBLAS: FP32 by default
    assert worker.tf32_ops(seen.ops, "bf16") == []
    worker.apply_tf32("off")
    assert worker.tf32_ops(seen.ops, "fp32") == []
