"""Where fusion boundaries fall, as decisions of the search: a normalization with its
per-channel affine and elementwise epilogue in one kernel, a post-GEMM elementwise chain in
the reduction that reads it, an activation inside the reduction after a pooling call; each
boundary split into two kernels by a move, steered by the critique and the kernel profile.
Problems are written here in KernelBench's style."""

from __future__ import annotations

import random
import shutil
import subprocess
from pathlib import Path

import pytest

from maxcode.evaluate.cuda.checks import static_findings
from maxcode.evaluate.result import EvalResult, Status, Timing
from maxcode.policy.offline_cuda import OfflineCudaPolicy, space
from maxcode.policy.offline_cuda.render import render
from maxcode.search.types import Attempt, Critique, Observation
from maxcode.tasks.model import Task


def kb_problem(init_args: str, init: str, forward: str, sizes: str, inputs: str) -> str:
    return f"""import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, {init_args}):
        super(Model, self).__init__()
{init}

    def forward(self, x):
{forward}

{sizes}

def get_inputs():
    return [{inputs}]

def get_init_inputs():
    return [{init_args}]
"""


PROBLEMS = {
    # 62_Matmul_GroupNorm_LeakyReLU_Sum: GroupNorm, its affine, LeakyReLU and x + x: one kernel
    "gemm_groupnorm_leakyrelu_sum": kb_problem(
        "in_features, out_features, groups",
        "        self.fc = nn.Linear(in_features, out_features)\n"
        "        self.gn = nn.GroupNorm(groups, out_features)\n"
        "        self.act = nn.LeakyReLU(0.1)",
        "        x = self.act(self.gn(self.fc(x)))\n        return x + x",
        "in_features = 64\nout_features = 128\ngroups = 8",
        "torch.randn(32, in_features)",
    ),
    # 84_Gemm_BatchNorm_Scaling_Softmax: normalize, scale and softmax in the softmax's kernel
    "gemm_batchnorm_scale_softmax": kb_problem(
        "in_features, out_features",
        "        self.gemm = nn.Linear(in_features, out_features)\n"
        "        self.bn = nn.BatchNorm1d(out_features)\n"
        "        self.scale = nn.Parameter(torch.ones(1))",
        "        x = self.bn(self.gemm(x))\n        return torch.softmax(self.scale * x, dim=1)",
        "in_features = 64\nout_features = 256",
        "torch.randn(32, in_features)",
    ),
    # 65_Conv2d_AvgPool_Sigmoid_Sum: the sigmoid inside the sum after the pooling call
    "conv_avgpool_sigmoid_sum": kb_problem(
        "in_channels, out_channels",
        "        self.conv = nn.Conv2d(in_channels, out_channels, 3)\n"
        "        self.pool = nn.AvgPool2d(2)",
        "        x = torch.sigmoid(self.pool(self.conv(x)))\n"
        "        return torch.sum(x, dim=[1, 2, 3])",
        "in_channels = 3\nout_channels = 8",
        "torch.randn(4, in_channels, 18, 18)",
    ),
    # 34_ConvTranspose3d_LayerNorm_GELU_Scaling: LayerNorm, GELU and the scale in one kernel
    "conv_layernorm_gelu_scale": kb_problem(
        "channels, width",
        "        self.conv = nn.Conv2d(channels, channels, 3, padding=1)\n"
        "        self.ln = nn.LayerNorm(width)\n"
        "        self.factor = 2.0",
        "        x = self.ln(self.conv(x))\n"
        "        return torch.nn.functional.gelu(x) * self.factor",
        "channels = 4\nwidth = 16",
        "torch.randn(2, channels, 8, width)",
    ),
}
# The boundary each problem offers, and its kernels (stages that are not library calls) fused
# (the first proposal) and split.
EXPECTED = {
    "gemm_groupnorm_leakyrelu_sum": ("epilogue:", ["reduction"], ["reduction", "elementwise"]),
    "gemm_batchnorm_scale_softmax": (
        "prologue:",
        ["stats", "reduction"],
        ["stats", "elementwise", "reduction"],
    ),
    "conv_avgpool_sigmoid_sum": ("prologue:", ["reduction"], ["elementwise", "reduction"]),
    "conv_layernorm_gelu_scale": ("epilogue:", ["reduction"], ["reduction", "elementwise"]),
}


@pytest.fixture(scope="module")
def policy() -> OfflineCudaPolicy:
    return OfflineCudaPolicy()


def kernels(plan) -> list[str]:
    return [s.family for s in plan.stages if s.family != "library"]


def task_for(name: str) -> Task:
    return Task(
        task_id=name,
        suite="kernelbench",
        language="cuda",
        reference_source=PROBLEMS[name],
        description="",
        tags=(),
        metadata={"file_name": f"{name}.py"},
    )


@pytest.mark.parametrize("name", sorted(PROBLEMS))
def test_the_fused_plan_comes_first_and_each_boundary_splits_into_two_kernels(policy, name):
    prefix, fused_kernels, split_kernels = EXPECTED[name]
    analysis = policy.analyze(PROBLEMS[name], f"{name}.py")
    fused, split = analysis.variants[-2:]
    (boundary,) = fused.boundaries
    assert boundary.startswith(prefix)
    assert fused.boundaries == {boundary: True} and split.boundaries == {boundary: False}
    assert kernels(fused) == fused_kernels
    assert kernels(split) == split_kernels
    for plan in (fused, split):
        rendered = render(plan, [space.default(s) for s in plan.stages], policy.name)
        assert static_findings(rendered.source) == []  # each candidate launches its own kernels


def test_group_norm_epilogue_reads_the_affine_per_channel_in_place(policy):
    fused = policy.analyze(PROBLEMS["gemm_groupnorm_leakyrelu_sum"]).variants[-2]
    (norm,) = [s for s in fused.stages if s.family == "reduction"]
    assert norm.extra["groups"] == 8 and norm.extra["sizes"] == (32 * 8, 128 // 8, 1)
    assert [t.role for t in norm.tensors] == ["full", "block", "block"]  # x, weight, bias
    assert any("0.1" in line or "s" in line for line in norm.body)  # LeakyReLU in the epilogue
    cuda = render(fused, [space.default(s) for s in fused.stages], policy.name).cuda
    assert "% mid1]" in cuda and "% mid2]" in cuda  # channel = (offset / inner) % channels


def observe(task: Task, attempts: list[Attempt], critique: bool = True) -> Observation:
    best = max(attempts, key=lambda a: a.reward, default=None)
    return Observation(task, 1, 4, attempts, best, 0.0, critique, "traj-critique-best-perf")


def measured(proposal, profile: dict | None = None, critique: str = "") -> Attempt:
    return Attempt(
        step=0,
        index=0,
        candidate_id="c0",
        source=proposal.source,
        result=EvalResult(
            status=Status.OK, timing=Timing("cuda_events", "ms", 1.0, 1.5), profile=profile
        ),
        reward=1.5,
        critique=Critique(critique, "offline-rules/1", True) if critique else None,
        meta=proposal.meta,
    )


def boundary_moves(policy, task, base: Attempt, seeds: int = 24) -> int:
    """How many of k = 2 proposals per seed move a fusion boundary."""
    return sum(
        p.meta["changed"][0].startswith(("prologue:", "epilogue:"))
        for seed in range(seeds)
        for p in policy.propose(observe(task, [base]), 2, random.Random(seed))
        if p.source is not None
    )


def test_the_first_step_fuses_and_a_later_step_can_split(policy):
    task = task_for("conv_avgpool_sigmoid_sum")
    first = policy.propose(observe(task, []), 4, random.Random(0))
    assert first[0].meta["changed"] == [] and first[0].meta["stages"][-1] == "reduction"
    # the split plan is never a first-step default: only a move (with a name) reaches it
    assert all(p.meta["changed"] for p in first[1:])
    nxt = [
        p
        for seed in range(8)
        for p in policy.propose(observe(task, [measured(first[0])]), 4, random.Random(seed))
    ]
    split = [p for p in nxt if p.meta["changed"] == ["prologue:sum_1"]]
    assert split and split[0].meta["stages"][-2:] == ["elementwise", "reduction"]


def test_a_profile_dominated_by_the_fused_kernel_steers_toward_its_boundary(policy):
    task = task_for("gemm_batchnorm_scale_softmax")
    default = policy.propose(observe(task, []), 1, random.Random(0))[0]
    fused_stage = default.meta["stages"].index("reduction")

    def profile(top: str) -> dict:
        rows = [(top, 80.0), ("cutlass_80_simt_sgemm_128x64_8x5_tn_align1", 15.0)]
        return {"functions": [{"function": f, "time_us": t, "share_pct": t} for f, t in rows]}

    hot = measured(default, profile(f"void red{fused_stage}_rows<true>(float const*, float*)"))
    library = measured(default, profile("cutlass_80_simt_sgemm_128x64_8x5_tn_align1"))
    assert boundary_moves(policy, task, hot) > boundary_moves(policy, task, library)


def test_a_memory_bound_critique_steers_a_tuned_split_plan_toward_fusing(policy):
    """History: the fused default, then the split plan with its normalization retuned (the
    best). Fusing again keeps the tuned parameters; a memory-bound critique favours it."""
    task = task_for("conv_layernorm_gelu_scale")
    analysis = policy.analyze(PROBLEMS[task.task_id])
    fused_default = policy.propose(observe(task, []), 1, random.Random(0))[0]
    split_index = len(analysis.variants) - 1
    plan = analysis.variants[split_index]
    params = [space.default(s) for s in plan.stages]
    norm = next(i for i, s in enumerate(plan.stages) if s.family == "reduction")
    params[norm]["unroll"] = 2
    split = type(fused_default)(
        source=render(plan, params, policy.name).source,
        meta={**fused_default.meta, "variant": split_index, "params": params, "changed": []},
    )
    memory = (
        "Correct, 1.50x faster than the reference; memory-bandwidth bound (85% of peak bandwidth)."
    )
    compute = "Correct, 1.50x faster than the reference; compute bound (90% of peak FLOP/s)."

    def fusing(critique: str) -> int:
        history = [measured(fused_default), measured(split, critique=critique)]
        history[0].reward, history[1].candidate_id = 1.0, "c-split"
        count = 0
        for seed in range(24):
            for p in policy.propose(observe(task, history), 2, random.Random(seed)):
                if p.meta.get("changed") == ["epilogue:layer_norm"]:
                    fused_norm = p.meta["stages"].index("reduction")
                    assert p.meta["params"][fused_norm]["unroll"] == 2  # the tuning carries over
                    count += 1
        return count

    assert fusing(memory) > fusing(compute) > 0


@pytest.mark.slow
def test_fused_and_split_candidates_compile_with_nvcc(policy, tmp_path: Path):
    """Every problem's fused and split plans (default parameters) in one nvcc run."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc not installed")
    units = ["#include <cuda_runtime.h>", "#include <cstdint>", "#include <cmath>"]
    for i, name in enumerate(sorted(PROBLEMS)):
        for j, plan in enumerate(policy.analyze(PROBLEMS[name]).variants[-2:]):
            cuda = render(plan, [space.default(s) for s in plan.stages], policy.name).cuda
            body = "\n".join(x for x in cuda.splitlines() if not x.startswith("#include"))
            units.append(f"namespace unit{i}_{j} {{  // {name}\n{body}\n}}")
    (tmp_path / "k.cu").write_text("\n".join(units))
    proc = subprocess.run(
        [nvcc, "-c", "-arch=sm_90", "-std=c++17", "k.cu", "-o", "k.o"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]


def _has_gpu() -> bool:
    from maxcode.evaluate.cuda.figures import detect_cuda_arch

    return shutil.which("nvidia-smi") is not None and bool(detect_cuda_arch())


@pytest.mark.gpu
@pytest.mark.skipif(not _has_gpu(), reason="needs an NVIDIA GPU")
def test_fused_and_split_candidates_are_correct_on_a_gpu(policy, tmp_path: Path):
    """Each problem's fused and split plans through the real CUDA evaluator (correctness
    trials, shape perturbation, anti-cheat checks)."""
    from maxcode.evaluate.cuda import CudaEvalConfig, CudaEvaluator

    items = []
    for name in sorted(PROBLEMS):
        for plan in policy.analyze(PROBLEMS[name]).variants[-2:]:
            source = render(plan, [space.default(s) for s in plan.stages], policy.name).source
            items.append((task_for(name), source, plan.describe()))
    with CudaEvaluator(CudaEvalConfig(timing_trials=5), tmp_path / "cache") as evaluator:
        results = evaluator.evaluate_items([(t, s) for t, s, _ in items])
    bad = [
        (t.task_id, what, r.status, r.reason[:300])
        for (t, _, what), r in zip(items, results, strict=True)
        if r.status is not Status.OK
    ]
    assert bad == []
