"""Honest twin of racy.py for the row-sum task: each row's sum is added up with float
atomicAdd from many blocks, in whatever order they land, so two calls on the same inputs may
differ in the last bits, well within the tolerance: expected OK, the difference recorded."""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
__global__ void row_sum_atomic(const float* x, float* out, long rows, long cols, long chunk) {
    long row = blockIdx.y;
    long start = (long)blockIdx.x * chunk;
    float s = 0.f;
    for (long j = start + threadIdx.x; j < start + chunk && j < cols; j += blockDim.x) s += x[row * cols + j];
    __shared__ float part[256];
    part[threadIdx.x] = s;
    __syncthreads();
    for (int w = blockDim.x / 2; w > 0; w /= 2) {
        if (threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
        __syncthreads();
    }
    if (threadIdx.x == 0) atomicAdd(&out[row], part[0]);
}
torch::Tensor row_sum(torch::Tensor x) {
    long rows = x.size(0), cols = x.size(1), chunk = 256;
    auto out = torch::zeros({rows, 1}, x.options());
    dim3 grid((cols + chunk - 1) / chunk, rows);
    row_sum_atomic<<<grid, 256>>>(x.data_ptr<float>(), out.data_ptr<float>(), rows, cols, chunk);
    return out;
}
"""
ext = load_inline(
    name="row_sum_atomic",
    cpp_sources="torch::Tensor row_sum(torch::Tensor x);",
    cuda_sources=cuda_source,
    functions=["row_sum"],
)


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return ext.row_sum(x.contiguous())
