"""The per-kernel profile (Effi-Learner's CUDA feedback) aggregates a torch-profiler trace."""

from __future__ import annotations

import pytest

from maxcode.evaluate.cuda.config import CudaEvalConfig
from maxcode.evaluate.cuda.worker import kernel_profile


def _event(name: str, dur: float, cat: str = "kernel") -> dict:
    return {"cat": cat, "name": name, "dur": dur, "args": {"stream": 7}}


def test_kernels_are_summed_per_name_and_divided_per_call():
    events = [
        _event("gemm", 30.0),
        _event("relu", 3.0),
        _event("gemm", 30.0),
        _event("relu", 3.0),
        _event("Memcpy DtoD", 10.0, "gpu_memcpy"),
        {"cat": "cpu_op", "name": "aten::add", "dur": 500.0},  # host time is not GPU time
    ]
    profile = kernel_profile(events, calls=2)
    assert profile["total_us"] == 38.0 and profile["kernels_per_call"] == 2.5
    rows = {r["function"]: r for r in profile["functions"]}
    assert list(rows) == ["gemm", "Memcpy DtoD", "relu"]  # largest first
    assert rows["gemm"]["time_us"] == 30.0 and rows["gemm"]["launches"] == 1.0
    assert rows["gemm"]["share_pct"] == 78.9 and rows["relu"]["share_pct"] == 7.9


def test_empty_trace_gives_an_empty_profile():
    assert kernel_profile([], calls=3) == {
        "total_us": 0.0,
        "kernels_per_call": 0.0,
        "functions": [],
    }


def test_profile_calls_must_be_positive():
    with pytest.raises(ValueError, match="profile_calls"):
        CudaEvalConfig(profile_calls=0)
