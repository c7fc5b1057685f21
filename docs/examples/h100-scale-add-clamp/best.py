"""Candidate written by the offline CUDA policy (offline-cuda/1): elementwise (elementwise) template.

Parameters: {'threads': 256, 'ept': 2, 'vec': 2, 'blocks_per_sm': 0}
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <cuda_runtime.h>
#include <cstdint>
#include <cmath>

#define EW0_THREADS 256
#define EW0_EPT 2
#define EW0_VEC 2
#define EW0_BLOCKS_PER_SM 0

__device__ __forceinline__ float ew0_element(long i, float x0, float x1, float s0, float s1, float s2) {
    const float v_mul = x0 * s0;
    const float v_add = v_mul + x1;
    const float v_clamp = fminf(fmaxf(v_add, s1), s2);
    const float v_tanh = tanhf(v_clamp);
    (void)i;
    return v_tanh;
}

__global__ void __launch_bounds__(EW0_THREADS) ew0_scalar(const float* __restrict__ p0, const float* __restrict__ p1, float s0, float s1, float s2, float* __restrict__ out, long n) {
    const long step = (long)gridDim.x * EW0_THREADS * EW0_EPT;
    for (long base = (long)blockIdx.x * EW0_THREADS * EW0_EPT + threadIdx.x; base < n; base += step) {
#pragma unroll
        for (int u = 0; u < EW0_EPT; ++u) {
            const long i = base + (long)u * EW0_THREADS;
            if (i < n) out[i] = ew0_element(i, p0[i], p1[i], s0, s1, s2);
        }
    }
}

__global__ void __launch_bounds__(EW0_THREADS) ew0_vector(const float* __restrict__ p0, const float* __restrict__ p1, float s0, float s1, float s2, float* __restrict__ out, long nv) {
    const long step = (long)gridDim.x * EW0_THREADS * EW0_EPT;
    for (long base = (long)blockIdx.x * EW0_THREADS * EW0_EPT + threadIdx.x; base < nv; base += step) {
#pragma unroll
        for (int u = 0; u < EW0_EPT; ++u) {
            const long vi = base + (long)u * EW0_THREADS;
            if (vi < nv) {
                const float2 a0 = reinterpret_cast<const float2*>(p0)[vi];
                const float2 a1 = reinterpret_cast<const float2*>(p1)[vi];
                float2 r;
                r.x = ew0_element(vi * 2 + 0, a0.x, a1.x, s0, s1, s2);
                r.y = ew0_element(vi * 2 + 1, a0.y, a1.y, s0, s1, s2);
                reinterpret_cast<float2*>(out)[vi] = r;
            }
        }
    }
}

int ew0_launch(const float* __restrict__ p0, const float* __restrict__ p1, float s0, float s1, float s2, float* out, long n) {
    if (n == 0) return 0;
    int device = 0, sms = 1;
    cudaGetDevice(&device);
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
    bool vector = EW0_VEC > 1 && n % EW0_VEC == 0
        && reinterpret_cast<uintptr_t>(out) % (EW0_VEC * sizeof(float)) == 0
        && reinterpret_cast<uintptr_t>(p0) % (EW0_VEC * sizeof(float)) == 0
        && reinterpret_cast<uintptr_t>(p1) % (EW0_VEC * sizeof(float)) == 0;
    const long work = vector ? n / EW0_VEC : n;
    const long per_block = (long)EW0_THREADS * EW0_EPT;
    long blocks = (work + per_block - 1) / per_block;
    if (EW0_BLOCKS_PER_SM > 0) blocks = blocks < (long)sms * EW0_BLOCKS_PER_SM ? blocks : (long)sms * EW0_BLOCKS_PER_SM;
    if (blocks > 2147483647L) blocks = 2147483647L;
    if (vector) ew0_vector<<<(unsigned)blocks, EW0_THREADS>>>(p0, p1, s0, s1, s2, out, work);
    else
    ew0_scalar<<<(unsigned)blocks, EW0_THREADS>>>(p0, p1, s0, s1, s2, out, work);
    return (int)cudaGetLastError();
}

const char* mx77ebcd549f_error(int code) { return cudaGetErrorString((cudaError_t)code); }
"""

cpp_source = r"""
#include <vector>

int ew0_launch(const float* __restrict__ p0, const float* __restrict__ p1, float s0, float s1, float s2, float* out, long n);
const char* mx77ebcd549f_error(int code);

static void mx77ebcd549f_check(const torch::Tensor& t, const char* what) {
    TORCH_CHECK(t.is_cuda(), what, " must be a CUDA tensor");
    TORCH_CHECK(t.scalar_type() == torch::kFloat32, what, " must be float32 (the kernels compute in fp32)");
    TORCH_CHECK(t.is_contiguous(), what, " must be contiguous");
}

static long mx77ebcd549f_span(const torch::Tensor& t, long a, long b) {
    long p = 1;
    for (long d = a; d < b; ++d) p *= t.size(d);
    return p;
}

torch::Tensor offline_forward(torch::Tensor t0, torch::Tensor t1, double s0, double s1, double s2) {
    mx77ebcd549f_check(t0, "x");
    mx77ebcd549f_check(t1, "y");
    int err = 0;
    // stage 0: elementwise
    auto o0 = torch::empty_like(t0);
    TORCH_CHECK(t1.sizes() == t0.sizes(), "y and the output differ in shape");
    err = ew0_launch(t0.data_ptr<float>(), t1.data_ptr<float>(), (float)s0, (float)s1, (float)s2, o0.data_ptr<float>(), o0.numel());
    TORCH_CHECK(err == 0, "stage 0 (elementwise) kernel launch failed: ", mx77ebcd549f_error(err));
    return o0;
}
"""

ext = load_inline(
    name="offline_elementwise_77ebcd549f",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["offline_forward"],
    verbose=False,
)


class ModelNew(nn.Module):
    """The reference's parameters, created the same way; forward runs the custom kernels."""

    def __init__(self, scale, low, high):
        super().__init__()
        self.scale = scale
        self.low = low
        self.high = high

    def forward(self, x, y):
        return ext.offline_forward(x.contiguous(), y.contiguous(), float(self.scale), float(self.low), float(self.high))
