"""Reductions over few long rows (a loss or a norm over the whole tensor, LayerNorm over large
rows) are split across blocks: per-block partial states, then a second pass that combines
them in a fixed order; many short rows keep one block (or one warp) per row."""

from __future__ import annotations

import math
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from maxcode.evaluate.cuda.checks import static_findings
from maxcode.policy.offline_cuda import OfflineCudaPolicy, space
from maxcode.policy.offline_cuda.render import render
from tests.policy.nvcc_units import compile_units


def problem(init: str, forward: str, shape: str) -> str:
    return f"""import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
{init}

    def forward(self, x, y):
        return {forward}

def get_inputs():
    return [torch.rand({shape}), torch.rand({shape})]

def get_init_inputs():
    return []
"""


SPLIT = {
    "mse_loss": problem("        pass", "torch.mean((x - y) ** 2)", "64, 4096"),
    "hinge_loss": problem("        pass", "torch.mean(torch.clamp(1 - x * y, min=0))", "256, 1024"),
    "frobenius_max": problem("        pass", "torch.amax(torch.abs(x - y))", "64, 4096"),
    "layer_norm_large_rows": problem(
        "        self.ln = nn.LayerNorm((64, 1024))", "self.ln(x + y)", "8, 64, 1024"
    ),
    "softmax_long_rows": problem("        pass", "torch.softmax(x * y, dim=1)", "4, 65536"),
    "logsumexp_long_rows": problem("        pass", "torch.logsumexp(x - y, dim=1)", "4, 65536"),
}


@pytest.fixture(scope="module")
def policy() -> OfflineCudaPolicy:
    return OfflineCudaPolicy()


def split_stages(policy: OfflineCudaPolicy, name: str, source: str):
    analysis = policy.analyze(source, f"{name}.py")
    assert analysis.plan is not None, analysis.reason
    # the partial lowering with every fusion boundary fused (its first proposal)
    plan = next(p for p in reversed(analysis.variants) if all(p.boundaries.values()))
    return plan, [s for s in plan.stages if s.family == "reduction"]


@pytest.mark.parametrize("name", sorted(SPLIT))
def test_few_long_rows_take_the_split_layout_with_a_workspace(policy, name):
    plan, reductions = split_stages(policy, name, SPLIT[name])
    assert [space.variant(s) for s in reductions] == ["reduction-split"]
    rendered = render(plan, [space.default(s) for s in plan.stages], policy.name)
    assert re.search(r"red\d+_partials<4><<<", rendered.cuda)
    assert re.search(r"red\d+_finish<4><<<", rendered.cuda)
    assert "atomic" not in rendered.cuda  # the combination order is fixed: deterministic
    assert static_findings(rendered.source) == []  # the evaluator's anti-cheat checks
    assert re.search(r"_workspace\(outer\d+, \(int\)red\d+\)", rendered.cpp)


def test_a_scalar_minus_a_tensor_fuses_into_the_reduction(policy):
    """``1 - x * y`` (aten.rsub in the exported graph) is elementwise, not a library call."""
    plan, _ = split_stages(policy, "hinge_loss", SPLIT["hinge_loss"])
    assert [s.family for s in plan.stages] == ["reduction"]


def test_many_short_rows_keep_one_block_per_row(policy):
    source = problem("        pass", "torch.softmax(x * y, dim=1)", "4096, 256")
    _, reductions = split_stages(policy, "short_rows", source)
    assert [space.variant(s) for s in reductions] == ["reduction-row"]


def test_split_parameters_are_searched_and_follow_a_memory_bound_critique(policy):
    _, (stage,) = split_stages(policy, "mse_loss", SPLIT["mse_loss"])
    base = space.default(stage)
    moves = space.neighbours(stage, base)
    assert {k for _, keys in moves for k in keys} == {"threads", "vec", "chunks_per_sm"}
    wider = {**base, "chunks_per_sm": 8}
    assert space.cue_weight(stage, base, wider, {"memory"}) == 1.0
    assert space.cue_weight(stage, base, {**base, "chunks_per_sm": 1}, {"memory"}) == 0.0


@pytest.mark.slow
def test_split_reductions_compile_with_nvcc(policy, tmp_path: Path):
    """Every fixture's candidate (default and scalar-load parameters) in one nvcc run."""
    units = {}
    for name, source in sorted(SPLIT.items()):
        plan, _ = split_stages(policy, name, source)
        for vec in (4, 1):
            params = [space.default(s) for s in plan.stages]
            for p, stage in zip(params, plan.stages, strict=True):
                if space.variant(stage) == "reduction-split":
                    p.update(vec=vec, threads=256 if vec == 1 else 512)
            units[f"{name} vec {vec}"] = render(plan, params, policy.name).cuda
    compile_units(units, tmp_path)


_HARNESS = r"""
#include <cmath>
#include <cstdio>
#include <vector>
#define __device__
#define __forceinline__ inline
%(states)s
// The kernels' order: each of T threads of a chunk folds its strided elements, the threads
// are merged in order, then the chunks (pass 2) in order.
int main(int argc, char** argv) {
    const int T = 512, chunks = 7;
    std::vector<float> x;
    float v;
    while (std::scanf("%%f", &v) == 1) x.push_back(v);
    const long R = (long)x.size(), chunk = ((R + chunks - 1) / chunks + 3) / 4 * 4;
    %(ns)s_State total = %(ns)s_empty();
    for (int g = 0; g < chunks; ++g) {
        %(ns)s_State block = %(ns)s_empty();
        for (int t = 0; t < T; ++t) {
            %(ns)s_State s = %(ns)s_empty();
            for (long j = g * chunk + t; j < R && j < (g + 1) * chunk; j += T) %(ns)s_add(s, x[j]);
            %(ns)s_merge(block, s);
        }
        %(ns)s_merge(total, block);
    }
    std::printf("%%.9g %%.9g %%.9g\n", total.a, total.b, total.c);
    return 0;
}
"""


@pytest.mark.parametrize(
    "name, check",
    [
        ("mse_loss", lambda x, a, b, c: math.isclose(a, x.sum(), rel_tol=1e-5)),
        ("frobenius_max", lambda x, a, b, c: math.isclose(a, x.max(), rel_tol=1e-7)),
        # online softmax state: (max, sum of exp(x - max))
        (
            "logsumexp_long_rows",
            lambda x, a, b, c: (
                math.isclose(a, x.max(), rel_tol=1e-7)
                and math.isclose(b, np.exp(x - x.max()).sum(), rel_tol=1e-5)
            ),
        ),
        # Welford: (count, mean, M2), on data far from zero where a sum of squares cancels
        (
            "layer_norm_large_rows",
            lambda x, a, b, c: (
                a == x.size
                and math.isclose(b, x.mean(), rel_tol=1e-6)
                and math.isclose(c / a, x.var(), rel_tol=1e-3)
            ),
        ),
    ],
)
def test_partial_states_merge_to_the_row_statistics_on_the_cpu(policy, name, check, tmp_path):
    """The rendered state functions (empty, add, merge) compiled as host C++ and run in the
    kernels' order over 7 chunks of 512 threads; compared with float64 statistics."""
    cxx = shutil.which("g++")
    if cxx is None:
        pytest.skip("no C++ compiler")
    plan, _ = split_stages(policy, name, SPLIT[name])
    cuda = render(plan, [space.default(s) for s in plan.stages], policy.name).cuda
    ns = re.search(r"struct (\w+)_State", cuda).group(1)
    start = cuda.index(f"template <int OP> __device__ __forceinline__ float {ns}_combine")
    states = cuda[start : cuda.index("// Block-wide merge")]
    states = re.sub(r"template <int OP>[^\n]*_warp_all.*?\n}\n", "", states, flags=re.S)
    (tmp_path / "h.cpp").write_text(_HARNESS % {"states": states, "ns": ns})
    build = subprocess.run(
        [cxx, "-O1", "-o", "h", "h.cpp"], cwd=tmp_path, capture_output=True, text=True
    )
    assert build.returncode == 0, build.stderr[-3000:]
    x = np.random.default_rng(0).normal(1000.0, 1.0, 100_003).astype(np.float32)
    run = subprocess.run(
        [str(tmp_path / "h")],
        input="\n".join(repr(float(v)) for v in x),
        capture_output=True,
        text=True,
        check=True,
    )
    a, b, c = (float(v) for v in run.stdout.split())
    assert check(x.astype(np.float64), a, b, c), (a, b, c)
