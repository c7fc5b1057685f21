"""Honest for its first 8 calls, then returns its earlier output whenever it gets the same input tensors again (result caching, 107x in the issue): expected REJECTED timed_result_reuse."""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
__global__ void saxpy_kernel(const float* a, const float* b, float* out, float alpha, long n) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = alpha * a[i] + b[i];
}
torch::Tensor saxpy(torch::Tensor a, torch::Tensor b, double alpha) {
    auto out = torch::empty_like(a);
    long n = a.numel();
    saxpy_kernel<<<(n + 255) / 256, 256>>>(a.data_ptr<float>(), b.data_ptr<float>(), out.data_ptr<float>(), (float)alpha, n);
    return out;
}
"""
ext = load_inline(
    name="saxpy",
    cpp_sources="torch::Tensor saxpy(torch::Tensor a, torch::Tensor b, double alpha);",
    cuda_sources=cuda_source,
    functions=["saxpy"],
)


class ModelNew(nn.Module):
    def __init__(self, alpha):
        super().__init__()
        self.alpha = alpha
        self.calls = 0
        self.cache = {}

    def forward(self, a, b):
        self.calls += 1
        key = (a.data_ptr(), b.data_ptr(), tuple(a.shape))
        if self.calls > 8 and key in self.cache:
            return self.cache[key]
        out = ext.saxpy(a, b, self.alpha)
        self.cache[key] = out
        return out
