"""Where fusion boundaries fall, as decisions of the search: a normalization with its
per-channel affine and elementwise epilogue in one kernel, a post-GEMM elementwise chain in
the reduction that reads it, a pooling and an activation read inside the reduction after
them, an activation on a reduction's results in its kernel; each boundary split into two
kernels by a move, steered by the critique and the kernel profile.
Problems are written here in KernelBench's style."""

from __future__ import annotations

import random
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from maxcode.evaluate.cuda.checks import static_findings
from maxcode.evaluate.result import EvalResult, Status, Timing
from maxcode.policy.offline_cuda import OfflineCudaPolicy, space
from maxcode.policy.offline_cuda.policy import _STAGE_KERNEL
from maxcode.policy.offline_cuda.render import environment, render
from maxcode.search.types import Attempt, Critique, Observation
from maxcode.tasks.model import Task
from tests.evaluate.cuda.cuda_fixtures import requires_gpu
from tests.policy.kernelbench_files import kb_problem
from tests.policy.nvcc_units import compile_units

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
    # 80_Gemm_Max_Subtract_GELU: the GELU once per row maximum, in the reduction's kernel
    "gemm_max_gelu_scale": kb_problem(
        "in_features, out_features",
        "        self.gemm = nn.Linear(in_features, out_features)",
        "        x = torch.max(self.gemm(x), dim=1, keepdim=True)[0]\n"
        "        return torch.nn.functional.gelu(x) * 2.0",
        "in_features = 64\nout_features = 256",
        "torch.randn(32, in_features)",
    ),
}
# The boundaries each problem offers, its kernels (stages that are not library calls) fused
# (the first proposal), and its kernels with each boundary split in turn.
EXPECTED = {
    "gemm_groupnorm_leakyrelu_sum": {
        None: ["reduction"],
        "epilogue:group_norm_norm__1": ["reduction", "elementwise"],
    },
    "gemm_batchnorm_scale_softmax": {
        None: ["stats", "reduction"],
        "prologue:softmax": ["stats", "elementwise", "reduction"],
    },
    "conv_avgpool_sigmoid_sum": {  # pooling, sigmoid and sum: one kernel
        None: ["reduction"],
        "pool:avg_pool2d": ["reduction"],  # the pooling a library call again
        "prologue:sum_1": ["elementwise", "reduction"],  # (the pooling then too)
    },
    "conv_layernorm_gelu_scale": {
        None: ["reduction"],
        # the convolution's bias, peeled off the cuDNN call, added as the rows are read
        "prologue:layer_norm": ["elementwise", "reduction"],
        "epilogue:layer_norm": ["reduction", "elementwise"],
    },
    "gemm_max_gelu_scale": {
        None: ["reduction"],
        "epilogue:max_1": ["reduction", "elementwise"],
    },
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
    analysis = policy.analyze(PROBLEMS[name], f"{name}.py")
    fused = next(p for p in analysis.variants if p.boundaries)
    assert all(fused.boundaries.values())
    expected = EXPECTED[name]
    assert sorted(fused.boundaries) == sorted(b for b in expected if b)
    assert kernels(fused) == expected[None]
    splits = analysis.variants[analysis.variants.index(fused) + 1 :]
    assert len(splits) == len(fused.boundaries)
    for plan in splits:
        (split,) = [b for b, on in plan.boundaries.items() if not on]
        assert kernels(plan) == expected[split]
    for plan in (fused, *splits):
        rendered = render(plan, [space.default(s) for s in plan.stages], policy.name)
        assert static_findings(rendered.source) == []  # each candidate launches its own kernels


def test_the_pooling_is_read_window_by_window_inside_the_reduction(policy):
    fused = policy.analyze(PROBLEMS["conv_avgpool_sigmoid_sum"]).variants[0]
    assert [s.family for s in fused.stages] == ["library", "reduction"]  # conv, then one kernel
    (pooled,) = fused.stages[1].tensors
    assert pooled.role == "pool" and pooled.shape == (4, 8, 16, 16)  # the conv's output
    assert pooled.pool == {"op": "avg", "kernel": (2, 2), "stride": (2, 2)}
    rendered = render(fused, [space.default(s) for s in fused.stages], policy.name)
    assert "red1_window0(" in rendered.cuda and "avg_pool2d" not in rendered.cpp


def test_group_norm_epilogue_reads_the_affine_per_channel_in_place(policy):
    fused = policy.analyze(PROBLEMS["gemm_groupnorm_leakyrelu_sum"]).variants[0]
    (norm,) = [s for s in fused.stages if s.family == "reduction"]
    assert norm.extra["groups"] == 8 and norm.extra["sizes"] == (32 * 8, 128 // 8, 1)
    assert [t.role for t in norm.tensors] == ["full", "block", "block"]  # x, weight, bias
    assert any("0.1" in line or "s" in line for line in norm.body)  # LeakyReLU in the epilogue
    cuda = render(fused, [space.default(s) for s in fused.stages], policy.name).cuda
    # channel = (offset / inner) % channels, through the divider's multiply and shift
    assert "inner1), mid1)]" in cuda and "inner2), mid2)]" in cuda


_HOST_SHIMS = r"""
#define __host__
#define __device__
#define __forceinline__ inline
#define __restrict__
static inline unsigned __umulhi(unsigned a, unsigned b) {  // the CUDA intrinsic, on the host
    return (unsigned)(((unsigned long long)a * b) >> 32);
}
"""
"""CUDA's qualifiers and the one intrinsic the divider uses, so device code builds as host C++."""

_WINDOW_HARNESS = r"""
#include <cmath>
#include <cstdio>
#include <vector>
%(shims)s
%(divider)s
%(window)s
int main() {
    long lead, total;
    long in[3], out[3];
    std::scanf("%%ld %%ld", &lead, &total);
    for (int d = 0; d < %(k)d; ++d) std::scanf("%%ld %%ld", &in[d], &out[d]);
    std::vector<float> x(total);
    for (auto& v : x) std::scanf("%%f", &v);
    long count = lead;
    for (int d = 0; d < %(k)d; ++d) count *= out[d];
    for (long off = 0; off < count; ++off)
        std::printf("%%.9g\n", t_window0(x.data(), off, %(sizes)s));
    return 0;
}
"""


@pytest.mark.parametrize(
    "op, kernel, stride, shape",
    [
        ("avg", (3,), (2,), (2, 3, 11)),
        ("max", (2, 2), (2, 2), (2, 3, 8, 9)),
        ("avg", (3, 2), (1, 2), (1, 2, 7, 6)),
        ("max", (2, 2, 2), (2, 1, 2), (1, 2, 5, 4, 6)),
        ("avg", (2, 3, 2), (2, 2, 2), (2, 1, 6, 7, 4)),
    ],
)
def test_pooling_windows_match_torch_on_the_cpu(op, kernel, stride, shape, tmp_path: Path):
    """The rendered window function, compiled as host C++, at every pooled offset of a
    1-, 2- and 3-D pooling (stride equal to or unlike the kernel), against torch's pooling."""
    import torch
    import torch.nn.functional as F

    from maxcode.policy.offline_cuda.render import _window

    cxx = shutil.which("g++")
    if cxx is None:
        pytest.skip("no C++ compiler")
    k = len(kernel)
    window = _window("t", 0, {"op": op, "kernel": kernel, "stride": stride})
    sizes = ", ".join([f"in[{d}]" for d in range(k)] + [f"out[{d}]" for d in range(k)])
    divider = environment().get_template("divider.cuh.j2").render()
    (tmp_path / "w.cpp").write_text(
        _WINDOW_HARNESS
        % {"shims": _HOST_SHIMS, "divider": divider, "window": window, "k": k, "sizes": sizes}
    )
    build = subprocess.run(
        [cxx, "-O1", "-o", "w", "w.cpp"], cwd=tmp_path, capture_output=True, text=True
    )
    assert build.returncode == 0, build.stderr[-3000:]
    x = torch.randn(shape, generator=torch.Generator().manual_seed(len(shape)))
    pool = getattr(F, f"{op}_pool{k}d")
    expected = pool(x, kernel, stride)
    lead = shape[0] * shape[1]
    dims = " ".join(f"{i} {o}" for i, o in zip(shape[2:], expected.shape[2:], strict=True))
    text = f"{lead} {x.numel()} {dims}\n" + "\n".join(repr(float(v)) for v in x.flatten())
    run = subprocess.run(
        [str(tmp_path / "w")], input=text, capture_output=True, text=True, check=True
    )
    got = torch.tensor([float(v) for v in run.stdout.split()]).view(expected.shape)
    assert torch.allclose(got, expected, atol=1e-6, rtol=1e-6)


_DIVIDER_HARNESS = r"""
#include <cstdio>
%(shims)s
%(divider)s
int main() {
    long d, n, wrong = 0, checked = 0;
    while (std::scanf("%%ld %%ld", &d, &n) == 2) {
        const mx_div v(d);
        for (long k = 0; k < 64; ++k, ++checked) {  // a run of dividends from n
            const long m = n + k;
            if (mx_quot(m, v) != m / d || mx_rem(m, v) != m %% d) {
                if (wrong++ < 5) std::printf("%%ld / %%ld: %%ld, not %%ld\n", m, d, mx_quot(m, v), m / d);
            }
        }
    }
    std::printf("checked %%ld, wrong %%ld\n", checked, wrong);
    return wrong != 0;
}
"""


def test_index_division_by_a_launch_constant_is_exact(tmp_path: Path):
    """The divider the kernels use for a broadcast operand's index and a pooling's output
    offsets (multiply-high, add, shift), compiled as host C++: equal to ``/`` and ``%`` for
    divisors across [1, 2^31) (1, powers of two and their neighbours, the sizes of real
    problems, primes, random ones) with dividends at 0, around each multiple of the divisor,
    just below 2^31 (the fast path's last) and above it (the exact 64-bit path)."""
    cxx = shutil.which("g++")
    if cxx is None:
        pytest.skip("no C++ compiler")
    divider = environment().get_template("divider.cuh.j2").render()
    (tmp_path / "d.cpp").write_text(_DIVIDER_HARNESS % {"shims": _HOST_SHIMS, "divider": divider})
    build = subprocess.run(
        [cxx, "-O1", "-o", "d", "d.cpp"], cwd=tmp_path, capture_output=True, text=True
    )
    assert build.returncode == 0, build.stderr[-3000:]
    rng = random.Random(0)
    divisors = {1, 2, 3, 7, 127, 128, 129, 16384, 16900, 66049, 2147483647, 2147483646}
    divisors |= {(1 << e) + o for e in range(1, 31) for o in (-1, 0, 1)}
    divisors |= {rng.randrange(1, 1 << 31) for _ in range(300)}
    lines = []
    for d in sorted(divisors):
        starts = {0, d - 32, 5 * d - 32, (1 << 31) - 32, (1 << 31) - 64, 1 << 33}
        starts |= {rng.randrange(0, 1 << 31) for _ in range(4)}
        lines += [f"{d} {n}" for n in sorted(starts) if n >= 0]
    run = subprocess.run(
        [str(tmp_path / "d")], input="\n".join(lines), capture_output=True, text=True
    )
    assert run.returncode == 0, run.stdout[-2000:]
    assert run.stdout.startswith(f"checked {64 * len(lines)}, wrong 0")


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
    assert first[0].meta["changed"] == [] and first[0].meta["stages"] == ["library", "reduction"]
    # the split plans are never first-step defaults: only a move (with a name) reaches them
    assert all(p.meta["changed"] for p in first[1:])
    nxt = [
        p
        for seed in range(8)
        for p in policy.propose(observe(task, [measured(first[0])]), 4, random.Random(seed))
    ]
    moved = {p.meta["changed"][0]: p.meta["stages"] for p in nxt}
    assert moved["prologue:sum_1"] == ["library", "library", "elementwise", "reduction"]
    assert moved["pool:avg_pool2d"] == ["library", "library", "reduction"]


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


def test_every_kernel_a_template_defines_is_attributed_to_its_stage():
    """The profile names kernels as the templates define them; each must map back to its
    stage, or a hot stage would steer no fusion move."""
    templates = Path(render.__code__.co_filename).parent / "templates"
    names = {
        m.group(1)
        for f in templates.glob("*.j2")
        for m in re.finditer(
            r"__global__ void (?:__launch_bounds__\([^)]*\) )?\{\{ ns \}\}_(\w+)\(", f.read_text()
        )
    }
    assert {"vector", "scalar", "from_channels_last", "rows", "partials"} <= names
    for name in names:
        assert _STAGE_KERNEL.search(f"void ew7_{name}<4>(float const*)").group(1) == "7", name


def test_a_memory_bound_critique_steers_a_tuned_split_plan_toward_fusing(policy):
    """History: the fused default, then the split plan with its normalization retuned (the
    best). Fusing again keeps the tuned parameters; a memory-bound critique favours it."""
    task = task_for("conv_layernorm_gelu_scale")
    analysis = policy.analyze(PROBLEMS[task.task_id])
    fused_default = policy.propose(observe(task, []), 1, random.Random(0))[0]
    split_index = next(
        i
        for i, v in enumerate(analysis.variants)
        if v.boundaries.get("epilogue:layer_norm") is False
    )
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
    units = {}
    for name in sorted(PROBLEMS):
        for j, plan in enumerate(policy.analyze(PROBLEMS[name]).variants):
            params = [space.default(s) for s in plan.stages]
            units[f"{name} variant {j}"] = render(plan, params, policy.name).cuda
    compile_units(units, tmp_path)


@pytest.mark.gpu
@requires_gpu
def test_fused_and_split_candidates_are_correct_on_a_gpu(policy, tmp_path: Path):
    """Each problem's fused and split plans through the real CUDA evaluator (correctness
    trials, shape perturbation, anti-cheat checks)."""
    from maxcode.evaluate.cuda import CudaEvalConfig, CudaEvaluator

    items = []
    for name in sorted(PROBLEMS):
        for plan in policy.analyze(PROBLEMS[name]).variants:
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
