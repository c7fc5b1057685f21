"""Small builders shared by the LLM tests."""

from __future__ import annotations

from maxcode.evaluate.result import EvalResult, Status, Timing
from maxcode.llm.client import LLMClient
from maxcode.llm.config import role_config_from_dict
from maxcode.llm.factory import build_client
from maxcode.llm.fake_servers import FakeLLMServer
from maxcode.tasks.model import Task

CPP_REFERENCE = """#include <iostream>
using namespace std;
int main() {
    long long n, s = 0;
    cin >> n;
    for (long long i = 0; i < n; ++i) s += i;
    cout << s << endl;
}
"""

CUDA_REFERENCE = """import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, a, b):
        return torch.relu(a + b)


def get_inputs():
    return [torch.randn(1024), torch.randn(1024)]
"""


def cpp_task() -> Task:
    return Task("sum_loop", "test", "cpp", CPP_REFERENCE, description="print 0+1+...+(n-1)")


def cuda_task() -> Task:
    return Task("add_relu", "test", "cuda", CUDA_REFERENCE)


def ok_result(speedup: float = 2.0) -> EvalResult:
    return EvalResult(Status.OK, timing=Timing("wall", "s", 1.0 / speedup, 1.0))


def compile_error() -> EvalResult:
    return EvalResult(
        Status.COMPILE_ERROR,
        reason="g++ exited with 1",
        compile_log="cand.cpp:3:5: error: expected ';' before 'return'\n    3 | x\n",
    )


def client_for(
    server: FakeLLMServer, backend: str = "openai", cache=None, **overrides
) -> LLMClient:
    """A real-SDK client pointed at the fake server, fast retries, no cache by default."""
    base = server.openai_base_url if backend == "openai" else server.anthropic_base_url
    cfg = {
        "backend": backend,
        "model": "fake-model",
        "base_url": base,
        "max_tokens": 2048,
        "retry_base_s": 0.01,
        "retry_max_s": 0.05,
        "timeout_s": 5.0,
        "cache_path": None,
        "price_input_per_mtok": 3.0,
        "price_output_per_mtok": 15.0,
        **overrides,
    }
    role = cfg.pop("role", "generator")
    run_budget = cfg.pop("run_budget", None)
    return build_client(role_config_from_dict(role, cfg), role, cache=cache, run_budget=run_budget)
