"""KernelBench's training mode on a GPU: a kernel that normalises with BatchNorm's running
statistics is wrong under both KernelBench versions (the reference uses the batch's), and a
kernel that uses the batch's statistics is right under both."""

from __future__ import annotations

import pytest

from maxcode.evaluate.cuda import CudaEvalConfig, CudaEvaluator
from maxcode.evaluate.result import Status
from maxcode.tasks.kernelbench import load_problem_file

from .cuda_fixtures import requires_gpu

pytestmark = [pytest.mark.gpu, requires_gpu]

REFERENCE = """import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bn = nn.BatchNorm1d(features)

    def forward(self, x):
        return self.bn(x)


batch_size = 256
features = 512


def get_inputs():
    return [torch.randn(batch_size, features) * 2 + 3]


def get_init_inputs():
    return [features]
"""

CANDIDATE = '''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
__global__ void bn_apply_kernel(const float* x, const float* mean, const float* var, const float* w,
                                const float* b, float* out, float eps, long rows, long cols) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < rows * cols) {
        long c = i % cols;
        out[i] = (x[i] - mean[c]) * rsqrtf(var[c] + eps) * w[c] + b[c];
    }
}
torch::Tensor bn_apply(torch::Tensor x, torch::Tensor mean, torch::Tensor var, torch::Tensor w,
                       torch::Tensor b, double eps) {
    auto out = torch::empty_like(x);
    long n = x.numel();
    bn_apply_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), mean.data_ptr<float>(),
        var.data_ptr<float>(), w.data_ptr<float>(), b.data_ptr<float>(), out.data_ptr<float>(),
        (float)eps, x.size(0), x.size(1));
    return out;
}
"""
ext = load_inline(
    name="bn_apply",
    cpp_sources="torch::Tensor bn_apply(torch::Tensor x, torch::Tensor mean, torch::Tensor var, torch::Tensor w, torch::Tensor b, double eps);",
    cuda_sources=cuda_source,
    functions=["bn_apply"],
)


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bn = nn.BatchNorm1d(features)

    def forward(self, x):
        STATS
        return ext.bn_apply(x, mean.contiguous(), var.contiguous(), self.bn.weight, self.bn.bias, self.bn.eps)
'''

RUNNING = "mean, var = self.bn.running_mean, self.bn.running_var"
BATCH = "mean, var = x.mean(0), x.var(0, unbiased=False)"


@pytest.fixture(scope="module")
def task(tmp_path_factory):
    path = tmp_path_factory.mktemp("kb") / "level2" / "1_BatchNorm_train.py"
    path.parent.mkdir()
    path.write_text(REFERENCE)
    return load_problem_file(path, suite="semantics-test")


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("cuda-cache")


@pytest.mark.parametrize("semantics", ["kernelbench-v0.1", "kernelbench-head"])
def test_running_statistics_are_wrong_and_batch_statistics_right(task, semantics, cache_dir):
    config = CudaEvalConfig(
        semantics=semantics, correctness_trials=2, timing_trials=5, time_compiled_reference=False
    )
    with CudaEvaluator(config, cache_dir) as evaluator:
        running, batch = evaluator.evaluate_items(
            [(task, CANDIDATE.replace("STATS", RUNNING)), (task, CANDIDATE.replace("STATS", BATCH))]
        )
    assert running.status is Status.WRONG_ANSWER, running.reason
    assert "trial 0" in running.reason
    assert batch.status is Status.OK, f"{batch.reason} {batch.figures.get('output_tail', '')}"
    assert batch.figures["semantics"] == semantics
