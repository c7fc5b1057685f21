"""KernelBench-style ``.cu`` sources for the host-split tests, written for this project.

Each is what a one-shot LLM candidate passes to ``load_inline``: kernels plus host functions
that check tensors, allocate the output and launch. ``CPU_INPUTS`` calls each exposed
function with CPU tensors, which every fixture rejects with its own TORCH_CHECK message
(the moved host code runs on a machine without a GPU); ``GPU_INPUTS`` are real inputs.
"""

from __future__ import annotations

# __constant__ memory set with cudaMemcpyToSymbol (and sizeof of the symbol), a __device__
# helper, a grid-stride loop, macros that name torch.
CONSTANT_POLY = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

#define CHECK_CUDA(x) TORCH_CHECK(x.is_cuda(), #x " must be a CUDA tensor")
#define CHECK_CONTIGUOUS(x) TORCH_CHECK(x.is_contiguous(), #x " must be contiguous")
#define THREADS 256

__constant__ float c_coeffs[4];

__device__ __forceinline__ float horner(float x) {
    return ((c_coeffs[3] * x + c_coeffs[2]) * x + c_coeffs[1]) * x + c_coeffs[0];
}

__global__ void poly_kernel(const float* __restrict__ x, float* __restrict__ y, long n) {
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)blockDim.x * gridDim.x) {
        y[i] = horner(x[i]);
    }
}

torch::Tensor poly_forward(torch::Tensor x, std::vector<double> coeffs) {
    CHECK_CUDA(x);
    CHECK_CONTIGUOUS(x);
    TORCH_CHECK(coeffs.size() == 4, "need 4 coefficients");
    float host[4];
    for (int i = 0; i < 4; ++i) host[i] = (float)coeffs[i];
    cudaMemcpyToSymbol(c_coeffs, host, sizeof(c_coeffs));
    auto y = torch::empty_like(x);
    const long n = x.numel();
    const int blocks = (int)std::min<long>((n + THREADS - 1) / THREADS, 4096);
    poly_kernel<<<blocks, THREADS>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""

# A template kernel launched per dispatched type (AT_DISPATCH_FLOATING_TYPES_AND_HALF),
# dynamic shared memory, an explicit stream, a row reduction; a second, plain kernel.
DISPATCH_ROWSUM = r"""
#include <torch/extension.h>
#include <cuda_fp16.h>

template <typename scalar_t, int BLOCK>
__global__ void row_sum_kernel(const scalar_t* __restrict__ x, float* __restrict__ out, int cols) {
    extern __shared__ float partial[];
    const int row = blockIdx.x;
    float acc = 0.f;
    for (int c = threadIdx.x; c < cols; c += BLOCK) acc += static_cast<float>(x[(long)row * cols + c]);
    partial[threadIdx.x] = acc;
    __syncthreads();
    for (int s = BLOCK / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) out[row] = partial[0];
}

__global__ void scale_kernel(float* out, float alpha, int rows) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < rows) out[i] *= alpha;
}

torch::Tensor row_mean(torch::Tensor x) {
    TORCH_CHECK(x.device().is_cuda(), "x must live on the GPU");
    TORCH_CHECK(x.dim() == 2, "x must be 2-D");
    x = x.contiguous();
    const int rows = x.size(0), cols = x.size(1);
    auto out = torch::empty({rows}, x.options().dtype(torch::kFloat32));
    constexpr int kBlock = 256;
    cudaStream_t stream = 0;  // the legacy default stream, as a plain launch uses
    AT_DISPATCH_FLOATING_TYPES_AND_HALF(x.scalar_type(), "row_mean", ([&] {
        row_sum_kernel<scalar_t, 256><<<rows, kBlock, kBlock * sizeof(float), stream>>>(
            x.data_ptr<scalar_t>(), out.data_ptr<float>(), cols);
    }));
    scale_kernel<<<(rows + 127) / 128, 128>>>(out.data_ptr<float>(), 1.0f / cols, rows);
    return out;
}
"""

# A struct passed by value, a constexpr shared by host and device, a kernel template with a
# concrete argument, a host helper without launches, a kernel named outside a launch
# (cudaFuncSetAttribute), a kernel prototype before its definition.
STRUCT_TILES = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
#include <algorithm>

constexpr int kTile = 16;

struct Shape {
    int rows;
    int cols;
};

__global__ void transpose_kernel(const float* in, float* out, Shape s);

static int ceil_div(int a, int b) { return (a + b - 1) / b; }

template <int UNROLL>
__global__ void add_bias_kernel(float* y, const float* bias, Shape s) {
    int r = blockIdx.y * kTile + threadIdx.y;
    int c0 = (blockIdx.x * kTile + threadIdx.x) * UNROLL;
    #pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
        int c = c0 + u;
        if (r < s.rows && c < s.cols) y[r * s.cols + c] += bias[c];
    }
}

__global__ void transpose_kernel(const float* in, float* out, Shape s) {
    __shared__ float tile[kTile][kTile + 1];
    int x = blockIdx.x * kTile + threadIdx.x, y = blockIdx.y * kTile + threadIdx.y;
    if (y < s.rows && x < s.cols) tile[threadIdx.y][threadIdx.x] = in[y * s.cols + x];
    __syncthreads();
    x = blockIdx.y * kTile + threadIdx.x;
    y = blockIdx.x * kTile + threadIdx.y;
    if (y < s.cols && x < s.rows) out[y * s.rows + x] = tile[threadIdx.x][threadIdx.y];
}

torch::Tensor transpose_add(torch::Tensor a, torch::Tensor bias) {
    TORCH_CHECK(a.is_cuda() && bias.is_cuda(), "inputs must be CUDA tensors");
    TORCH_CHECK(a.dim() == 2 && a.scalar_type() == torch::kFloat32, "a: 2-D float32");
    Shape s{(int)a.size(0), (int)a.size(1)};
    auto out = torch::empty({s.cols, s.rows}, a.options());
    cudaFuncSetAttribute(transpose_kernel, cudaFuncAttributePreferredSharedMemoryCarveout, 50);
    dim3 block(kTile, kTile);
    dim3 grid(ceil_div(s.cols, kTile), ceil_div(s.rows, kTile));
    transpose_kernel<<<grid, block>>>(a.contiguous().data_ptr<float>(), out.data_ptr<float>(), s);
    Shape t{s.cols, s.rows};
    dim3 grid2(ceil_div(t.cols, kTile * 4), ceil_div(t.rows, kTile));
    add_bias_kernel<4><<<grid2, block>>>(out.data_ptr<float>(), bias.data_ptr<float>(), t);
    return out;
}
"""

# The current stream from c10 and the launch check macro, as most real candidates write
# them (c10/cuda headers: the GPU machine's torch only).
CURRENT_STREAM = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAException.h>

__global__ void relu_kernel(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
}

torch::Tensor relu(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda(), "x must be a CUDA tensor");
    auto y = torch::empty_like(x);
    int n = x.numel();
    auto stream = c10::cuda::getCurrentCUDAStream();
    relu_kernel<<<(n + 255) / 256, 256, 0, stream>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

FIXTURES = {
    "constant_poly": (CONSTANT_POLY, "torch::Tensor poly_forward(torch::Tensor x, std::vector<double> coeffs);", ["poly_forward"]),
    "dispatch_rowsum": (DISPATCH_ROWSUM, "torch::Tensor row_mean(torch::Tensor x);", ["row_mean"]),
    "struct_tiles": (STRUCT_TILES, "torch::Tensor transpose_add(torch::Tensor a, torch::Tensor bias);", ["transpose_add"]),
    "current_stream": (CURRENT_STREAM, "torch::Tensor relu(torch::Tensor x);", ["relu"]),
}  # fmt: skip

# Python expressions (``torch`` in scope, ``dev`` the device) giving each function's arguments.
INPUTS = {
    "poly_forward": "(torch.randn(1 << 16, device=dev), [0.5, -1.0, 0.25, 2.0])",
    "row_mean": "(torch.randn(300, 1000, device=dev),)",
    "transpose_add": "(torch.randn(70, 45, device=dev), torch.randn(70, device=dev))",
    "relu": "(torch.randn(5000, device=dev),)",
}
