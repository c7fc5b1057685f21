"""Honest twin of spin/hang: correct but slow (the kernel runs 30 times per call), far under the watchdog: expected OK."""

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

    def forward(self, a, b):
        for _ in range(29):
            ext.saxpy(a, b, self.alpha)
        return ext.saxpy(a, b, self.alpha)
