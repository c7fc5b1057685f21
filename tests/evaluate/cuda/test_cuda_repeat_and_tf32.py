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


def test_strict_fp32_turns_tf32_off_inside_and_puts_torch_flags_back(torch_flags):
    torch.set_float32_matmul_precision("high")
    try:
        with worker.strict_fp32():
            assert worker.tf32_ops({"convolution", "mm"}, "fp32") == []
        assert worker.tf32_ops({"convolution", "mm"}, "fp32") == ["convolution", "mm"]
    finally:
        torch.set_float32_matmul_precision("highest")


class _TF32Reference(torch.nn.Module):
    """A reference whose output carries TF32's rounding (10-bit mantissa) while cuDNN may use it."""

    def forward(self, x):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tf32 = torch.backends.cudnn.allow_tf32
        if not tf32:
            return x.clone()
        mantissa, exponent = torch.frexp(x)
        return torch.ldexp(torch.round(mantissa * 2048) / 2048, exponent)


@pytest.fixture
def mismatch(run, torch_flags, monkeypatch):
    """A failed comparison against the TF32-rounded reference, rechecked in strict FP32."""
    monkeypatch.setattr(worker, "_synchronize", lambda: None)  # no GPU to wait for
    run.model, run.reference_ops = _TF32Reference(), {"convolution"}
    inputs = [torch.linspace(1.0, 2.0, 4096)]

    def recheck(outs, saved=None):
        assert run.compare(worker._flatten(run.model(*inputs)), outs, 0)["status"] == "wrong_answer"
        run.compare_with_strict_fp32_reference(inputs, saved or [inputs[0].clone()], outs, 0)
        return run

    return inputs[0], recheck


def test_an_exact_candidate_failing_only_the_tf32_reference_is_told_so(mismatch):
    x, recheck = mismatch
    run = recheck([x.clone()])
    assert run.figures["strict_fp32_reference"] == "ok"
    assert run.tf32_note().startswith(
        "; against the reference recomputed in strict FP32 on the same inputs it passes"
    )
    assert "ran convolution with TF32 allowed" in run.tf32_note()


def test_a_candidate_wrong_beyond_tf32_gets_no_tf32_excuse(mismatch):
    x, recheck = mismatch
    run = recheck([x + 0.5])
    assert "elements outside" in run.figures["strict_fp32_reference"]
    assert run.tf32_note() == ""


def test_a_shape_mismatch_gets_no_tf32_excuse(mismatch):
    x, recheck = mismatch
    run = recheck([x[:100].clone()])
    assert "shape mismatch" in run.figures["strict_fp32_reference"]
    assert run.tf32_note() == ""


def test_inputs_the_candidate_changed_are_not_recomputed(mismatch):
    x, recheck = mismatch
    run = recheck([x.clone()], saved=[x + 1.0])
    assert "strict_fp32_reference" not in run.figures
    assert run.tf32_note() == ""


def test_a_strict_reference_that_fails_leaves_the_wrong_answer_as_it_is(mismatch, run):
    x, recheck = mismatch

    class OutOfMemory(_TF32Reference):
        def forward(self, x):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                if not torch.backends.cudnn.allow_tf32:
                    raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2 GiB")
            return super().forward(x)

    run.model = OutOfMemory()
    recheck([x.clone()])
    assert run.figures["strict_fp32_reference"].startswith("not recomputed: ")
    assert "out of memory" in run.figures["strict_fp32_reference"]
    assert run.tf32_note() == ""
