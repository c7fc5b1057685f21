"""Honest twin of late_reuse: a CUDA graph that replays the real kernel on each call's inputs (a CUDA-L1 class that is a legitimate optimisation): expected OK.

The kernel launches on torch's current stream, as graph capture requires (a launch on the legacy default stream breaks the capture)."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
__global__ void saxpy_kernel(const float* a, const float* b, float* out, float alpha, long n) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = alpha * a[i] + b[i];
}
torch::Tensor saxpy(torch::Tensor a, torch::Tensor b, double alpha) {
    auto out = torch::empty_like(a);
    long n = a.numel();
    saxpy_kernel<<<(n + 255) / 256, 256, 0, at::cuda::getCurrentCUDAStream()>>>(a.data_ptr<float>(), b.data_ptr<float>(), out.data_ptr<float>(), (float)alpha, n);
    return out;
}
"""
ext = load_inline(
    name="saxpy_graph",
    cpp_sources="torch::Tensor saxpy(torch::Tensor a, torch::Tensor b, double alpha);",
    cuda_sources=cuda_source,
    functions=["saxpy"],
)


class ModelNew(nn.Module):
    def __init__(self, alpha):
        super().__init__()
        self.alpha = alpha
        self.graph = None

    def forward(self, a, b):
        if self.graph is None or self.static_a.shape != a.shape:
            self.static_a, self.static_b = a.clone(), b.clone()
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):
                self.static_out = ext.saxpy(self.static_a, self.static_b, self.alpha)
        self.static_a.copy_(a)
        self.static_b.copy_(b)
        self.graph.replay()
        return self.static_out
