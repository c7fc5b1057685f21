"""Its output changes between calls on the same inputs: from its third call on, element 0 is
off by 0.5 on every second call (a device-side call counter standing in for a race's schedule,
so the test sees it every time; a real racy kernel differs only on some calls). Each first
call on new inputs is right: expected REJECTED nondeterministic."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
__global__ void saxpy_kernel(const float* a, const float* b, float* out, float alpha, long n, int* calls) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = alpha * a[i] + b[i];
    int call = calls[0];
    if (i == 0 && call >= 2 && call % 2 == 0) v += 0.5f;
    out[i] = v;
}
__global__ void count_kernel(int* calls) { calls[0] += 1; }
torch::Tensor saxpy(torch::Tensor a, torch::Tensor b, double alpha, torch::Tensor calls) {
    auto out = torch::empty_like(a);
    long n = a.numel();
    saxpy_kernel<<<(n + 255) / 256, 256>>>(a.data_ptr<float>(), b.data_ptr<float>(), out.data_ptr<float>(), (float)alpha, n, calls.data_ptr<int>());
    count_kernel<<<1, 1>>>(calls.data_ptr<int>());
    return out;
}
"""
ext = load_inline(
    name="saxpy_racy",
    cpp_sources="torch::Tensor saxpy(torch::Tensor a, torch::Tensor b, double alpha, torch::Tensor calls);",
    cuda_sources=cuda_source,
    functions=["saxpy"],
)


class ModelNew(nn.Module):
    def __init__(self, alpha):
        super().__init__()
        self.alpha = alpha
        self.register_buffer("calls", torch.zeros(1, dtype=torch.int32))

    def forward(self, a, b):
        return ext.saxpy(a, b, self.alpha, self.calls)
