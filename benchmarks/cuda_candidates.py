"""Candidate kernels for the built-in CUDA suite, generated from templates in four variants.

``fast``: a reasonable kernel; ``slow``: the same kernel launched with a starved grid
(correct, much slower); ``wrong``: adds 0.5 to every output (wrong answer);
``compile_error``: uses an undeclared identifier (nvcc error). The benchmark and the
GPU tests use them; they are written for this project.
"""

from __future__ import annotations

from maxcode.tasks.builtin_cuda import load_builtin_cuda
from maxcode.tasks.model import Task

VARIANTS = ("fast", "slow", "wrong", "compile_error")

_HEADER = """import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

"""

_BLOCK_REDUCE = r"""
__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffff, v, o);
    return v;
}
__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_down_sync(0xffffffff, v, o));
    return v;
}
__device__ float block_sum(float v) {
    __shared__ float sh[32];
    v = warp_sum(v);
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    if (lane == 0) sh[w] = v;
    __syncthreads();
    v = (threadIdx.x < (blockDim.x + 31) / 32) ? sh[lane] : 0.f;
    if (w == 0) v = warp_sum(v);
    if (threadIdx.x == 0) sh[0] = v;
    __syncthreads();
    float r = sh[0];
    __syncthreads();
    return r;
}
__device__ float block_max(float v) {
    __shared__ float sh[32];
    v = warp_max(v);
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    if (lane == 0) sh[w] = v;
    __syncthreads();
    v = (threadIdx.x < (blockDim.x + 31) / 32) ? sh[lane] : -INFINITY;
    if (w == 0) v = warp_max(v);
    if (threadIdx.x == 0) sh[0] = v;
    __syncthreads();
    float r = sh[0];
    __syncthreads();
    return r;
}
"""


def _bug(variant: str) -> str:
    return {"wrong": " + 0.5f", "compile_error": " + undeclared_symbol"}.get(variant, "")


def _launch(variant: str, work: str, threads: int = 256) -> tuple[str, str]:
    """(threads, blocks) expressions: starved grid for the slow variant."""
    if variant == "slow":
        return "32", "2"
    return str(threads), f"(int)std::min<long>(({work} + {threads} - 1) / {threads}, 132L * 16)"


def elementwise(
    name: str,
    n_inputs: int,
    scalars: list[str],
    expr: str,
    variant: str,
    init_args: str,
    init_body: str,
) -> str:
    ptrs = ", ".join(f"const float* __restrict__ p{i}" for i in range(n_inputs))
    loads = " ".join(f"float x{i} = p{i}[i];" for i in range(n_inputs))
    sparams = "".join(f", float {s}" for s in scalars)
    targs = ", ".join(f"torch::Tensor t{i}" for i in range(n_inputs))
    sargs = "".join(f", double {s}" for s in scalars)
    threads, blocks = _launch(variant, "n")
    call_ptrs = ", ".join(f"t{i}.data_ptr<float>()" for i in range(n_inputs))
    scall = "".join(f", (float){s}" for s in scalars)
    cuda = f"""
#include <torch/extension.h>
#include <algorithm>
__global__ void {name}_kernel({ptrs}, float* __restrict__ out, long n{sparams}) {{
    long stride = (long)gridDim.x * blockDim.x;
    for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {{
        {loads}
        out[i] = ({expr}){_bug(variant)};
    }}
}}
torch::Tensor {name}_forward({targs}{sargs}) {{
    auto out = torch::empty_like(t0);
    long n = t0.numel();
    {name}_kernel<<<{blocks}, {threads}>>>({call_ptrs}, out.data_ptr<float>(), n{scall});
    return out;
}}
"""
    decl = f"torch::Tensor {name}_forward({targs}{sargs});"
    fwd_args = ", ".join(f"x{i}.contiguous()" for i in range(n_inputs))
    sig = ", ".join(f"x{i}" for i in range(n_inputs))
    scal = "".join(f", self.{s}" for s in scalars)
    return _module(
        name,
        cuda,
        decl,
        init_args,
        init_body,
        f"def forward(self, {sig}):\n        return ext.{name}_forward({fwd_args}{scal})",
    )


def rowwise(
    name: str,
    body: str,
    variant: str,
    n_inputs: int = 1,
    params: tuple[str, ...] = (),
    init_args: str = "",
    init_body: str = "",
    out_cols: str = "D",
    scalars: tuple[str, ...] = (),
) -> str:
    """One block per row of a (rows, D) view; ``body`` computes ``out`` for the row."""
    threads = "32" if variant == "slow" else "256"
    ptrs = ", ".join(f"const float* __restrict__ p{i}" for i in range(n_inputs))
    pparams = "".join(f", const float* __restrict__ {p}" for p in params)
    sparams = "".join(f", float {s}" for s in scalars)
    targs = ", ".join(f"torch::Tensor t{i}" for i in range(n_inputs)) + "".join(
        f", torch::Tensor {p}_t" for p in params
    )
    sargs = "".join(f", double {s}" for s in scalars)
    call = ", ".join(f"t{i}.data_ptr<float>()" for i in range(n_inputs)) + "".join(
        f", {p}_t.data_ptr<float>()" for p in params
    )
    scall = "".join(f", (float){s}" for s in scalars)
    out_shape = "{rows, 1}" if out_cols == "1" else "{rows, D}"
    cuda = f"""
#include <torch/extension.h>
{_BLOCK_REDUCE}
__global__ void {name}_kernel({ptrs}{pparams}, float* __restrict__ out, int D{sparams}) {{
    long row = blockIdx.x;
    {body.replace("BUG", _bug(variant))}
}}
torch::Tensor {name}_forward({targs}{sargs}) {{
    int D = t0.size(-1);
    long rows = t0.numel() / D;
    auto out = torch::empty({out_shape}, t0.options());
    {name}_kernel<<<rows, {threads}>>>({call}, out.data_ptr<float>(), D{scall});
    return out;
}}
"""
    decl = f"torch::Tensor {name}_forward({targs}{sargs});"
    sig = ", ".join(f"x{i}" for i in range(n_inputs))
    fwd_args = ", ".join(f"x{i}.contiguous()" for i in range(n_inputs)) + "".join(
        f", self.{p}" for p in params
    )
    scal = "".join(f", self.{s}" for s in scalars)
    reshape = ".view(x0.shape[:-1] + (1,))" if out_cols == "1" else ".view(x0.shape)"
    return _module(
        name,
        cuda,
        decl,
        init_args,
        init_body,
        f"def forward(self, {sig}):\n        return ext.{name}_forward({fwd_args}{scal}){reshape}",
    )


def _module(name: str, cuda: str, decl: str, init_args: str, init_body: str, forward: str) -> str:
    init_args = f", {init_args}" if init_args else ""
    return (
        _HEADER
        + f'cuda_source = r"""{cuda}"""\n\n'
        + f'ext = load_inline(name="{name}", cpp_sources="{decl}", cuda_sources=cuda_source, functions=["{name}_forward"], verbose=False)\n\n\n'
        + f"class ModelNew(nn.Module):\n    def __init__(self{init_args}):\n        super().__init__()\n{init_body or '        pass'}\n\n    {forward}\n"
    )


_LN_BODY = """
    const float* x = p0 + row * D;
    float s = 0.f;
    for (int j = threadIdx.x; j < D; j += blockDim.x) s += LOADX;
    float mean = block_sum(s) / D;
    float v = 0.f;
    for (int j = threadIdx.x; j < D; j += blockDim.x) { float d = LOADX - mean; v += d * d; }
    float rstd = rsqrtf(block_sum(v) / D + 1e-5f);
    for (int j = threadIdx.x; j < D; j += blockDim.x) out[row * D + j] = (LOADX - mean) * rstd * weight[j] + bias[j]BUG;
"""


def candidate_source(task_file: str, variant: str) -> str:
    """Source of one candidate for a built-in task (by problem file name)."""
    if variant not in VARIANTS:
        raise ValueError(f"variant {variant!r}; choose one of {VARIANTS}")
    ln_init = "        self.ln = nn.LayerNorm(features)\n        self.weight = self.ln.weight\n        self.bias = self.ln.bias"
    builders = {
        "1_Scaled_vector_add.py": lambda v: elementwise(
            "saxpy", 2, ["alpha"], "alpha * x0 + x1", v, "alpha", "        self.alpha = alpha"
        ),
        "2_GELU_tanh.py": lambda v: elementwise(
            "gelu",
            1,
            [],
            "0.5f * x0 * (1.f + tanhf(0.7978845608f * (x0 + 0.044715f * x0 * x0 * x0)))",
            v,
            "",
            "",
        ),
        "3_Scale_Add_Clamp.py": lambda v: elementwise(
            "sac",
            2,
            ["scale", "low", "high"],
            "tanhf(fminf(fmaxf(x0 * scale + x1, low), high))",
            v,
            "scale, low, high",
            "        self.scale, self.low, self.high = scale, low, high",
        ),
        "3_Row_sum.py": lambda v: rowwise(
            "rowsum",
            "float s = 0.f;\n    for (int j = threadIdx.x; j < D; j += blockDim.x) s += p0[row * D + j];\n    s = block_sum(s);\n    if (threadIdx.x == 0) out[row] = sBUG;",
            v,
            init_args="dim",
            init_body="        self.dim = dim",
            out_cols="1",
        ),
        "6_Sum_Div_Sigmoid.py": lambda v: rowwise(
            "sumsig",
            "float s = 0.f;\n    for (int j = threadIdx.x; j < D; j += blockDim.x) s += p0[row * D + j];\n    s = block_sum(s) / divisor;\n    if (threadIdx.x == 0) out[row] = 1.f / (1.f + expf(-s))BUG;",
            v,
            init_args="divisor",
            init_body="        self.divisor = divisor",
            out_cols="1",
            scalars=("divisor",),
        ),
        "5_Softmax.py": lambda v: rowwise(
            "softmax",
            "const float* x = p0 + row * D;\n    float m = -INFINITY;\n    for (int j = threadIdx.x; j < D; j += blockDim.x) m = fmaxf(m, x[j]);\n    m = block_max(m);\n    float s = 0.f;\n    for (int j = threadIdx.x; j < D; j += blockDim.x) s += expf(x[j] - m);\n    s = block_sum(s);\n    for (int j = threadIdx.x; j < D; j += blockDim.x) out[row * D + j] = expf(x[j] - m) / sBUG;",
            v,
        ),
        "6_LayerNorm.py": lambda v: rowwise(
            "layernorm",
            _LN_BODY.replace("LOADX", "x[j]"),
            v,
            params=("weight", "bias"),
            init_args="features",
            init_body=ln_init,
        ),
        "4_Residual_LayerNorm.py": lambda v: rowwise(
            "resln",
            _LN_BODY.replace("LOADX", "(x[j] + p1[row * D + j])"),
            v,
            n_inputs=2,
            params=("weight", "bias"),
            init_args="features",
            init_body=ln_init,
        ),
        "7_RMSNorm.py": lambda v: _rmsnorm(v),
        "8_Square_matmul.py": lambda v: _matmul(v),
        "1_Linear_ReLU_BiasAdd.py": lambda v: _linear_relu_bias(v),
    }
    if task_file not in builders:
        raise KeyError(
            f"no candidate template for {task_file}; templated tasks: {sorted(builders)}"
        )
    return builders[task_file](variant)


def _rmsnorm(variant: str) -> str:
    threads, blocks = _launch(variant, "total")
    cuda = f"""
#include <torch/extension.h>
#include <algorithm>
__global__ void rmsnorm_kernel(const float* __restrict__ x, float* __restrict__ out, int C, long L, long total, float eps) {{
    long stride = (long)gridDim.x * blockDim.x;
    for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {{
        long n = i / L, l = i % L;
        const float* base = x + n * C * L + l;
        float s = 0.f;
        for (int c = 0; c < C; ++c) {{ float v = base[c * L]; s += v * v; }}
        float inv = rsqrtf(s / C + eps);
        for (int c = 0; c < C; ++c) out[n * C * L + c * L + l] = base[c * L] * inv{_bug(variant)};
    }}
}}
torch::Tensor rmsnorm_forward(torch::Tensor x, double eps) {{
    auto out = torch::empty_like(x);
    int C = x.size(1);
    long L = x.size(2);
    long total = x.size(0) * L;
    rmsnorm_kernel<<<{blocks}, {threads}>>>(x.data_ptr<float>(), out.data_ptr<float>(), C, L, total, (float)eps);
    return out;
}}
"""
    return _module(
        "rmsnorm",
        cuda,
        "torch::Tensor rmsnorm_forward(torch::Tensor x, double eps);",
        "num_features, eps=1e-5",
        "        self.eps = eps",
        "def forward(self, x0):\n        return ext.rmsnorm_forward(x0.contiguous(), self.eps)",
    )


def _matmul(variant: str) -> str:
    tile = 8 if variant == "slow" else 32
    cuda = f"""
#include <torch/extension.h>
#define TILE {tile}
__global__ void matmul_kernel(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C, int N) {{
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];
    int row = blockIdx.y * TILE + threadIdx.y, col = blockIdx.x * TILE + threadIdx.x;
    float acc = 0.f;
    for (int t = 0; t < N; t += TILE) {{
        As[threadIdx.y][threadIdx.x] = (row < N && t + threadIdx.x < N) ? A[row * N + t + threadIdx.x] : 0.f;
        Bs[threadIdx.y][threadIdx.x] = (col < N && t + threadIdx.y < N) ? B[(t + threadIdx.y) * N + col] : 0.f;
        __syncthreads();
        for (int k = 0; k < TILE; ++k) acc += As[threadIdx.y][k] * Bs[k][threadIdx.x];
        __syncthreads();
    }}
    if (row < N && col < N) C[row * N + col] = acc{_bug(variant)};
}}
torch::Tensor matmul_forward(torch::Tensor A, torch::Tensor B) {{
    int N = A.size(0);
    auto C = torch::empty({{N, N}}, A.options());
    dim3 threads(TILE, TILE), blocks((N + TILE - 1) / TILE, (N + TILE - 1) / TILE);
    matmul_kernel<<<blocks, threads>>>(A.data_ptr<float>(), B.data_ptr<float>(), C.data_ptr<float>(), N);
    return C;
}}
"""
    return _module(
        "matmul",
        cuda,
        "torch::Tensor matmul_forward(torch::Tensor A, torch::Tensor B);",
        "",
        "",
        "def forward(self, x0, x1):\n        return ext.matmul_forward(x0.contiguous(), x1.contiguous())",
    )


def _linear_relu_bias(variant: str) -> str:
    threads, blocks = _launch(variant, "n")
    cuda = f"""
#include <torch/extension.h>
#include <algorithm>
__global__ void relu_bias_kernel(const float* __restrict__ y, const float* __restrict__ bias, float* __restrict__ out, long n, int F) {{
    long stride = (long)gridDim.x * blockDim.x;
    for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        out[i] = fmaxf(y[i], 0.f) + bias[i % F]{_bug(variant)};
}}
torch::Tensor linear_relu_bias_forward(torch::Tensor x, torch::Tensor w, torch::Tensor b, torch::Tensor bias) {{
    auto y = torch::addmm(b, x, w.t());
    auto out = torch::empty_like(y);
    long n = y.numel();
    int F = y.size(1);
    relu_bias_kernel<<<{blocks}, {threads}>>>(y.data_ptr<float>(), bias.data_ptr<float>(), out.data_ptr<float>(), n, F);
    return out;
}}
"""
    init = "        self.linear = nn.Linear(in_features, out_features)\n        self.bias = nn.Parameter(torch.randn(out_features) * 0.02)"
    return _module(
        "linear_relu_bias",
        cuda,
        "torch::Tensor linear_relu_bias_forward(torch::Tensor x, torch::Tensor w, torch::Tensor b, torch::Tensor bias);",
        "in_features, out_features",
        init,
        "def forward(self, x0):\n        return ext.linear_relu_bias_forward(x0.contiguous(), self.linear.weight, self.linear.bias, self.bias)",
    )


TEMPLATED = (
    "1_Scaled_vector_add.py",
    "2_GELU_tanh.py",
    "3_Row_sum.py",
    "5_Softmax.py",
    "6_LayerNorm.py",
    "7_RMSNorm.py",
    "8_Square_matmul.py",
    "1_Linear_ReLU_BiasAdd.py",
    "3_Scale_Add_Clamp.py",
    "4_Residual_LayerNorm.py",
    "6_Sum_Div_Sigmoid.py",
)


def benchmark_set(files: list[str] | None = None) -> list[tuple[Task, str, str]]:
    """(task, variant, source) for every variant of the templated built-in tasks (or ``files``)."""
    unknown = sorted(set(files or ()) - set(TEMPLATED))
    if unknown:
        raise ValueError(f"no templated candidates for {unknown}; choose from {list(TEMPLATED)}")
    tasks = {t.metadata["file_name"]: t for t in load_builtin_cuda()}
    return [(tasks[f], v, candidate_source(f, v)) for f in files or TEMPLATED for v in VARIANTS]
