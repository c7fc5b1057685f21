"""The offline CUDA policy on problems written the way KernelBench writes them (fixtures this
file writes itself): capture with ``super(Model, self)``, module-level sizes, tuples and
bools; partial lowering (library calls with fused kernels around them); the two variants
chosen by measured reward; and the coverage benchmark's tables."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn as nn

from maxcode.evaluate.cuda.checks import static_findings
from maxcode.evaluate.cuda.host_split import HostSplit, split_host_functions
from maxcode.evaluate.result import EvalResult, Status, Timing
from maxcode.policy.offline_cuda import OfflineCudaPolicy, graph, space
from maxcode.policy.offline_cuda.render import render
from maxcode.search.types import Attempt, Observation
from maxcode.tasks.model import Task
from tests.evaluate.cuda.cuda_fixtures import requires_gpu
from tests.policy.kernelbench_files import kb_problem
from tests.policy.nvcc_units import compile_units

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture(scope="module")
def coverage():
    sys.path.insert(0, str(BENCHMARKS))
    import bench_offline_cuda_coverage

    return bench_offline_cuda_coverage


CONV_TAIL = kb_problem(
    "in_channels, out_channels, kernel_size, bias_shape, scale",
    "        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)\n"
    "        self.bias = nn.Parameter(torch.randn(bias_shape))\n"
    "        self.scale = scale",
    "        x = self.conv(x)\n        x = torch.relu(x) + self.bias\n        return x * self.scale",
    "batch_size = 8\nin_channels = 3\nout_channels = 16\nheight = width = 32\nkernel_size = 3\n"
    "bias_shape = (out_channels, 1, 1)\nscale = 2.0",
    "torch.randn(batch_size, in_channels, height, width)",
    "in_channels, out_channels, kernel_size, bias_shape, scale",
)
TUPLES_BOOLS = kb_problem(
    "features, kernel, use_bias",
    "        self.conv = nn.Conv2d(features, features, kernel_size=kernel, padding=(1, 1), bias=bool(use_bias))\n"
    "        self.norm = nn.GroupNorm(num_groups=GROUPS, num_channels=features)",
    "        return torch.tanh(self.norm(self.conv(x)))",
    "GROUPS = 4\nfeatures = 16\nkernel = (3, 3)\nuse_bias = True",
    "torch.randn(2, features, 8, 8)",
    "features, kernel, use_bias",
)
# A convolution's result kept channels-last and transposed by the tail's kernel: channel
# counts and positions that are not multiples of the 32 x 32 tile.
CONV3D_TAIL = kb_problem(
    "c_in, c_out",
    "        self.conv = nn.ConvTranspose3d(c_in, c_out, 3, stride=2)\n"
    "        self.bias = nn.Parameter(torch.randn(c_out, 1, 1, 1))",
    "        return torch.nn.functional.hardswish(self.conv(x) + self.bias)",
    "c_in = 4\nc_out = 40",
    "torch.randn(2, c_in, 5, 6, 7)",
)
CONV_WIDE_TAIL = kb_problem(
    "c_in, c_out",
    "        self.conv = nn.Conv2d(c_in, c_out, 3)",
    "        return torch.tanh(self.conv(x)) * 0.5 - 0.25",
    "c_in = 3\nc_out = 70",
    "torch.randn(3, c_in, 35, 37)",
)
BATCHNORM = kb_problem(
    "channels",
    "        self.bn = nn.BatchNorm2d(channels)",
    "        return torch.nn.functional.hardtanh(self.bn(x), min_val=-1.0, max_val=1.0)",
    "channels = 8",
    "torch.randn(4, channels, 6, 6)",
    "channels",
)
REDUCTIONS = {
    "logsumexp": ("torch.logsumexp(x, dim=1, keepdim=True)", "logsumexp"),
    "max with indices": ("torch.max(x, dim=2)[0]", "amax"),
    "mean over all dims": ("torch.mean(x)", "mean"),
    "norm": ("x / torch.norm(x, p=2, dim=1, keepdim=True)", "sum"),
    "unsqueeze and detach": ("torch.sigmoid(x.detach()).sum(dim=1).unsqueeze(1)", "sum"),
}


def simple(forward: str) -> str:
    return kb_problem(
        "", "        pass", f"        return {forward}", "", "torch.randn(4, 8, 16)", ""
    )


@pytest.fixture(scope="module")
def policy() -> OfflineCudaPolicy:
    return OfflineCudaPolicy()


def test_init_of_kernelbench_style_problems_is_reproduced_exactly():
    """super(Model, self), module constants (read transitively), tuples and bools: the
    candidate's __init__ creates the same parameters in the same order under one seed."""
    signature, body, prelude = graph.init_source(TUPLES_BOOLS, "p.py")
    assert "super(ModelNew, self).__init__()" in body
    assert prelude.splitlines() == ["GROUPS = 4"]
    problem = graph.load_problem(TUPLES_BOOLS, "p.py")
    namespace = {"torch": torch, "nn": nn}
    exec(prelude, namespace)
    indented = "\n".join("        " + line for line in body.splitlines())
    exec(f"class ModelNew(nn.Module):\n    def __init__{signature}:\n{indented}\n", namespace)
    args = problem.get_init_inputs()
    torch.manual_seed(3)
    ref = problem.Model(*args).state_dict()
    torch.manual_seed(3)
    new = namespace["ModelNew"](*args).state_dict()
    assert list(ref) == list(new)
    assert all(torch.equal(ref[k], new[k]) for k in ref)


def test_init_reading_a_module_function_is_refused_with_the_name():
    source = CONV_TAIL.replace("self.scale = scale", "self.scale = helper(scale)")
    source = source.replace(
        "import torch.nn as nn\n", "import torch.nn as nn\n\ndef helper(v):\n    return v\n"
    )
    analysis = OfflineCudaPolicy().analyze(source, "p.py")
    assert analysis.plan is None
    assert "reads module-level names ['helper']" in analysis.reason


def test_conv_with_elementwise_tail_is_a_library_call_plus_one_fused_kernel(policy):
    analysis = policy.analyze(CONV_TAIL, "1_Conv2d_ReLU_BiasAdd.py")
    assert analysis.plan is not None, analysis.reason
    plan = analysis.plan
    # the convolution without its bias, the bias viewed (C, 1, 1), one kernel adding the
    # convolution's bias and the model's own with the ReLU between them
    assert [s.family for s in plan.stages] == ["library", "library", "elementwise"]
    assert plan.stages[0].extra["cpp"] == "at::conv2d(@0@, @1@)"
    roles = {t.node: t.role for t in plan.stages[2].tensors}
    assert roles == {"conv2d_nobias__1": "full", "conv2d_bias__2": "block", "p_bias": "block"}
    source = render(plan, [space.default(s) for s in plan.stages], policy.name).source
    assert static_findings(source) == []
    assert "super(ModelNew, self).__init__()" in source and "batch_size" not in source
    assert "float(self.scale)" in source  # the scale is read from the model, not baked in


def test_a_convolution_read_only_by_its_tail_stays_channels_last_by_default(policy):
    """Channels-last convolutions were faster where measured: by default the convolution runs on
    channels-last copies of its input and weight, and the tail's kernel reads the result
    tile by tile (both biases at the tile's channel, no index division) and writes NCHW."""
    plan = policy.analyze(CONV_TAIL, "1_Conv2d_ReLU_BiasAdd.py").plan
    params = [space.default(s) for s in plan.stages]
    assert params[0] == {"channels_last": 1}
    kept = render(plan, params, policy.name)
    assert "_from_channels_last<<<" in kept.cuda and "ew2_vector" not in kept.cuda
    start = kept.cuda.index("ew2_element(")
    element = kept.cuda[start : kept.cuda.index("return ", start)]
    assert element.count("[ch]") == 2 and "mx_quot" not in element
    assert "auto o2 = torch::empty(o0.sizes(), o0.options());" in kept.cpp
    params[0] = {"channels_last": 0}  # the searched alternative: NCHW, the plain kernel
    plain = render(plan, params, policy.name)
    assert "_from_channels_last" not in plain.cuda and "ew2_vector<<<" in plain.cuda
    assert "MemoryFormat" not in plain.cpp
    # the biases at (i / inner) % C through the divider, which the build's host split accepts
    assert plain.cuda.count("[mx_rem(mx_quot(i, inner") == 2
    split = split_host_functions(plain.cuda)
    assert isinstance(split, HostSplit) and "struct mx_div" in split.host, split


def test_group_norm_is_a_row_normalization_and_batch_norm_uses_batch_statistics(policy):
    group = policy.analyze(TUPLES_BOOLS, "g.py").plan
    (norm,) = [s for s in group.stages if s.family == "reduction"]
    assert norm.extra["kind"] == "layer_norm" and norm.extra["groups"] == 4
    assert norm.extra["sizes"] == (2 * 4, 16 // 4 * 8 * 8, 1)  # rows of the tensor, in place
    assert not any("reshape" in s.extra.get("cpp", "") for s in group.stages)
    # the per-channel affine and tanh are the normalization's epilogue: one kernel
    assert [s.family for s in group.stages if s.family != "library"] == ["reduction"]
    # the convolution's bias added as the rows are read; the norm's weight and bias after
    assert [t.role for t in norm.tensors] == ["full", "block", "block", "block"]
    batch = policy.analyze(BATCHNORM, "b.py").plan
    assert [s.family for s in batch.stages if s.family != "library"] == ["stats", "elementwise"]
    assert not any("running" in t.py for s in batch.stages for t in s.tensors)


@pytest.mark.parametrize("name", sorted(REDUCTIONS))
def test_reductions_the_issue_names_are_lowered(policy, name):
    forward, kind = REDUCTIONS[name]
    plan = policy.analyze(simple(forward), f"{name}.py").plan
    assert plan is not None
    assert kind in [s.extra.get("kind") for s in plan.stages if s.family == "reduction"]
    source = render(plan, [space.default(s) for s in plan.stages], policy.name).source
    assert static_findings(source) == []


def test_global_average_pooling_is_a_mean_with_the_chain_before_it_fused(policy):
    source = kb_problem(
        "c",
        "        self.conv = nn.Conv2d(c, c, 3)\n        self.pool = nn.AdaptiveAvgPool2d((1, 1))",
        "        return self.pool(torch.nn.functional.gelu(self.conv(x)))",
        "c = 4",
        "torch.randn(2, c, 10, 10)",
        "c",
    )
    plan = policy.analyze(source, "pool.py").plan
    kernels = [s for s in plan.stages if s.family != "library"]
    assert [(s.family, s.extra.get("kind")) for s in kernels] == [("reduction", "mean")]
    assert any("erff" in line for line in kernels[0].extra["pre"])  # GELU in the prologue
    assert not any("pool" in s.extra.get("cpp", "") for s in plan.stages)


def test_cumsum_and_cumprod_are_scans_read_in_coalesced_tiles(policy, tmp_path: Path):
    units = {}
    for op in ("cumsum", "cumprod"):
        plan = policy.analyze(simple(f"torch.{op}(x, dim=2)"), f"{op}.py").plan
        assert [s.family for s in plan.stages] == ["scan"]
        assert plan.stages[0].extra["op"] == ("prod" if op == "cumprod" else "sum")
        for threads in (128, 1024):  # 4 and 32 warps
            units[f"{op} {threads}"] = render(plan, [{"threads": threads}], policy.name).cuda
    cuda = units["cumsum 128"]
    # one pass over a row: float4 tiles where the row allows, scalar loads otherwise
    assert "_rows<4><<<" in cuda and "_rows<1><<<" in cuda and "__shfl_up_sync" in cuda
    compile_units(units, tmp_path)


def test_library_only_problem_is_unsupported_naming_the_op(policy):
    analysis = policy.analyze(simple("torch.argmax(x, dim=1)"), "argmax.py")
    assert analysis.plan is None
    assert "every op is a library call (aten.argmax)" in analysis.reason
    assert "no kernel of its own" in analysis.reason


def test_views_use_the_runtime_batch_size(policy):
    source = simple("torch.relu(x.view(x.size(0), -1)).reshape(x.size(0), 8, 16) * 2.0")
    plan = policy.analyze(source, "v.py").plan
    cpps = [s.extra["cpp"] for s in plan.stages if s.family == "library"]
    assert cpps == [
        "@0@.view(at::IntArrayRef{@0@.size(0), -1})",
        "at::reshape(@0@, at::IntArrayRef{@0@.size(0), 8, 16})",
    ]


GEMM_TAIL = kb_problem(
    "in_features, out_features",
    "        self.linear = nn.Linear(in_features, out_features)",
    "        return torch.sigmoid(self.linear(x)) * 2.0",
    "in_features = 64\nout_features = 32",
    "torch.randn(16, in_features)",
    "in_features, out_features",
)


def _task(task_id: str, source: str, file_name: str, **metadata) -> Task:
    return Task(
        task_id=task_id,
        suite="kernelbench",
        language="cuda",
        reference_source=source,
        description="",
        tags=(),
        metadata={"file_name": file_name, **metadata},
    )


def _observe(task: Task, attempts: list[Attempt]) -> Observation:
    ok = [a for a in attempts if a.result.status is Status.OK]
    best = max(ok, key=lambda a: a.reward, default=None)
    return Observation(
        task=task,
        step=len({a.step for a in attempts}),
        depth=4,
        trajectory=list(attempts),
        best=best,
        best_discounted_reward=best.reward if best else 0.0,
        include_critique=False,
        method="traj-best",
    )


def _attempt(proposal, reward: float, step: int) -> Attempt:
    timing = Timing("cuda_events", "ms", 1.0, reward)
    return Attempt(
        step=step,
        index=proposal.meta["variant"],
        candidate_id=f"c{step}-{proposal.meta['variant']}",
        source=proposal.source,
        result=EvalResult(status=Status.OK, timing=timing),
        reward=reward,
        meta=proposal.meta,
    )


def test_a_fusion_move_to_a_plan_that_keeps_channels_last_starts_it_kept(policy):
    """The fused GroupNorm reads the convolution's result in NCHW; with its prologue split
    off only an elementwise kernel reads it, so that plan starts with it kept channels-last."""
    task = _task("2_Conv2d_GroupNorm_Tanh", TUPLES_BOOLS, "2_Conv2d_GroupNorm_Tanh.py")
    variants = policy.analyze(TUPLES_BOOLS, "2_Conv2d_GroupNorm_Tanh.py").variants
    kept = {vi for vi, v in enumerate(variants) if v.stages[0].extra.get("keep_channels_last")}
    assert kept and 0 not in kept
    seen = set()
    for proposal in policy.propose(_observe(task, []), 12, random.Random(0)):
        vi, meta = proposal.meta["variant"], proposal.meta
        seen.add(vi)
        if "0.channels_last" not in meta["changed"]:
            assert meta["params"][0] == {"channels_last": int(vi in kept)}, meta
    assert kept <= seen


def test_gemm_search_chooses_between_the_template_and_cublas_by_measured_reward(policy):
    task = _task("g", GEMM_TAIL, "g.py")
    first = policy.propose(_observe(task, []), 2, random.Random(0))
    assert [(p.meta["variant"], p.meta["stages"]) for p in first] == [
        (0, ["gemm"]),
        (1, ["library", "elementwise"]),
    ]
    assert "at::linear(" in first[1].source
    for faster in (0, 1):
        history = [_attempt(p, 2.0 if p.meta["variant"] == faster else 0.5, 0) for p in first]
        nxt = policy.propose(_observe(task, history), 3, random.Random(1))
        assert {p.meta["variant"] for p in nxt} == {faster}


def _write_fixture_checkout(root: Path) -> None:
    files = {
        "level1/1_Conv2d.py": kb_problem(
            "c",
            "        self.conv = nn.Conv2d(c, c, 3)",
            "        return self.conv(x)",
            "c = 4",
            "torch.randn(2, c, 8, 8)",
            "c",
        ),
        "level1/2_Softplus.py": simple("torch.nn.functional.softplus(x)"),
        "level1/3_Cumsum.py": simple("torch.cumsum(x, dim=1)"),
        "level1/4_Argmin.py": simple("torch.argmin(x, dim=1)"),
        "level2/1_Conv2d_ReLU_BiasAdd.py": CONV_TAIL,
        "level2/2_Conv2d_GroupNorm_Tanh.py": TUPLES_BOOLS,
        "level2/3_Gemm_Sigmoid_Scale.py": GEMM_TAIL,
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def test_coverage_benchmark_reports_shares_and_reasons(coverage, tmp_path: Path):
    _write_fixture_checkout(tmp_path / "kb")
    rows = coverage.survey(tmp_path / "kb", [1, 2], tmp_path / "sources")
    supported = {r["problem"]: r["supported"] for r in rows}
    assert supported == {
        "1_Conv2d.py": False,
        "2_Softplus.py": True,
        "3_Cumsum.py": True,
        "4_Argmin.py": False,
        "1_Conv2d_ReLU_BiasAdd.py": True,
        "2_Conv2d_GroupNorm_Tanh.py": True,
        "3_Gemm_Sigmoid_Scale.py": True,
    }
    families = {r["problem"]: r["family"] for r in rows}
    assert families["1_Conv2d_ReLU_BiasAdd.py"] == "conv" and families["3_Cumsum.py"] == "reduction"
    table = coverage.tables(rows)
    assert "| 1 | **all** | **2/4** | **50%** |" in table
    assert "| 2 | **all** | **3/3** | **100%** |" in table
    assert "| 1 | 4_Argmin.py | reduction | every op is a library call (aten.argmax)" not in table
    assert "| 1 | 4_Argmin.py | reduction | every op is a library call (aten.argmin)" in table
    # the GEMM has two variants (template, cuBLAS), GroupNorm three (fused; the convolution's
    # bias before it split off; its epilogue split off)
    assert len(list((tmp_path / "sources").rglob("*.py"))) == 8
    fusion = {r["problem"] for r in rows if r["fusion_boundaries"]}
    assert fusion == {"2_Conv2d_GroupNorm_Tanh.py"}
    assert {r["problem"] for r in rows if r["tensor_core_gemm"]} == {"3_Gemm_Sigmoid_Scale.py"}


def test_coverage_benchmark_refuses_a_missing_checkout(coverage, tmp_path: Path, capsys):
    assert coverage.main(["--kb", str(tmp_path / "nope")]) == 2
    assert "--kb" in capsys.readouterr().err


@pytest.mark.parametrize("problem", ["conv", "conv3d", "groupnorm", "batchnorm", "cumsum", "norm"])
def test_fused_candidates_compile_with_nvcc(policy, problem, tmp_path: Path):
    source = {
        "conv": CONV_TAIL,
        "conv3d": CONV3D_TAIL,
        "groupnorm": TUPLES_BOOLS,
        "batchnorm": BATCHNORM,
        "cumsum": simple("torch.cumsum(x, dim=1) + torch.cumprod(x, dim=2)"),
        "norm": simple("x / torch.norm(x, p=2, dim=1, keepdim=True)"),
    }[problem]
    plan = policy.analyze(source, f"{problem}.py").plan
    rendered = render(plan, [space.default(s) for s in plan.stages], policy.name)
    compile_units({problem: rendered.cuda}, tmp_path)


@pytest.mark.gpu
@requires_gpu
def test_fused_candidates_are_correct_on_a_gpu(policy, tmp_path: Path):
    """Every fixture's first step (each variant's default) through the real CUDA evaluator."""
    from maxcode.evaluate.cuda import CudaEvalConfig, CudaEvaluator

    problems = {
        "1_Conv2d_ReLU_BiasAdd.py": CONV_TAIL,
        "2_Conv2d_GroupNorm_Tanh.py": TUPLES_BOOLS,
        "3_BatchNorm_Hardtanh.py": BATCHNORM,
        "4_Gemm_Sigmoid_Scale.py": GEMM_TAIL,
        "5_Cumsum_Cumprod.py": simple("torch.cumsum(x, dim=1) + torch.cumprod(x, dim=2)"),
        # BatchNorm split across blocks: 64 chunks per channel, float4 loads (S = 64 * 64)
        # and scalar loads (S = 63 * 65)
        "7_BatchNorm_split.py": BATCHNORM.replace(
            "torch.randn(4, channels, 6, 6)", "torch.randn(16, channels, 64, 64)"
        ),
        "8_BatchNorm_split_scalar.py": BATCHNORM.replace(
            "torch.randn(4, channels, 6, 6)", "torch.randn(16, channels, 63, 65)"
        ),
        # rows of several tiles: float4 loads (8,192 values) and scalar loads (10,001)
        "9_Cumsum_long_rows.py": kb_problem(
            "",
            "        pass",
            "        return torch.cumsum(x, dim=1)",
            "",
            "torch.rand(8, 8192)",
            "",
        ),
        "10_Cumprod_long_rows.py": kb_problem(
            "",
            "        pass",
            "        return torch.cumprod(1.0 + x * 1e-4, dim=1)",
            "",
            "torch.rand(8, 10001)",
            "",
        ),
        # a convolution's result kept channels-last: tiles cut by the edges (C = 40 and 70);
        # more images x channel tiles than a grid's y dimension holds (70,000 x 1)
        "11_ConvTranspose3d_Add_HardSwish.py": CONV3D_TAIL,
        "12_Conv2d_Tanh_wide.py": CONV_WIDE_TAIL,
        "13_Conv2d_ReLU_many_images.py": kb_problem(
            "c_in, c_out",
            "        self.conv = nn.Conv2d(c_in, c_out, 1)",
            "        return torch.relu(self.conv(x))",
            "c_in = 3\nc_out = 8",
            "torch.randn(70000, c_in, 3, 3)",
        ),
        "6_Norms.py": simple(
            "x / torch.norm(x, p=2, dim=1, keepdim=True) + torch.logsumexp(x, dim=2, keepdim=True)"
        ),
    }
    items = []
    for name, source in problems.items():
        task = _task(name, source, name)
        for proposal in policy.propose(_observe(task, []), 2, random.Random(0)):
            items.append((task, proposal.source))
    with CudaEvaluator(CudaEvalConfig(timing_trials=5), tmp_path / "cache") as evaluator:
        results = evaluator.evaluate_items(items)
    bad = [
        (t.task_id, r.status, r.reason[:300])
        for (t, _), r in zip(items, results, strict=True)
        if r.status is not Status.OK
    ]
    assert bad == []


def test_merged_parts_take_torch_compile_from_a_reference_only_run(tmp_path):
    """Parts of one sample run on separate device calls print as one; a task whose run had no
    torch.compile figure gets it as its speedup over eager divided by torch.compile's."""
    sys.path.insert(0, str(BENCHMARKS))
    import bench_offline_cuda_policy as bench

    def row(task: str, vs_eager: float | None, vs_compiled: float | None, step: int = 0) -> dict:
        return {
            "task": task,
            "level": 2,
            "family": "fused",
            "executed": 4,
            "correct_found": vs_eager is not None,
            "best_speedup_vs_eager": vs_eager,
            "best_speedup_vs_compiled": vs_compiled,
            "best_step": step if vs_eager is not None else None,
            "offered": vs_eager is not None and vs_eager > 1.0,
            "compiled_reference_error": None if vs_compiled else "BackendCompilerFailed <- ...",
        }

    coverage = {"2": {"problems": 100, "share_supported": 0.9}}
    (tmp_path / "a.json").write_text(
        json.dumps(
            {
                "seconds": 10.0,
                "coverage": coverage,
                "rows": [row("a", 2.0, None, step=1), row("b", 1.5, 0.9)],
            }
        )
    )
    (tmp_path / "b.json").write_text(json.dumps({"seconds": 5.0, "rows": [row("c", None, None)]}))
    refs = [
        {"task": t, "compiled_speedup_over_eager": 4.0} for t in ("a", "b", "c")
    ]  # b keeps its own, measured figure
    (tmp_path / "refs.json").write_text(json.dumps({"references": refs}))
    rows, seconds, coverage, parts = bench.merge(
        [tmp_path / n for n in ("a.json", "b.json", "refs.json")]
    )
    assert [p["tasks"] for p in parts] == [2, 1, 0]
    by_task = {r["task"]: r for r in rows}
    assert seconds == 15.0 and set(by_task) == {"a", "b", "c"}
    assert by_task["a"]["best_speedup_vs_compiled"] == 0.5
    assert by_task["a"]["vs_compiled_from"] == "reference-only run"
    assert (
        by_task["b"]["best_speedup_vs_compiled"] == 0.9 and "vs_compiled_from" not in by_task["b"]
    )
    assert by_task["c"]["best_speedup_vs_compiled"] is None  # no correct candidate: no speedup
    level = bench.aggregate(rows, coverage)["levels"][2]
    assert level["share_correct"] == 2 / 3 and level["median_vs_compiled"] == 0.7
    assert level["share_supported"] == 0.9 and level["evaluations"] == 12
    assert level["share_best_after_first_step"] == 0.5  # a's best came at step 1, b's at 0
    assert level["not_offered"] == []


def _candidate(step: int, ms: float, share: float, spread: float = 0.01) -> dict:
    """A rollout record of a correct candidate as the CUDA evaluator writes it (eager 10 ms,
    torch.compile 4 ms)."""
    figures = {
        "speedup_vs_eager": 10.0 / ms,
        "speedup_vs_compiled": 4.0 / ms,
        "own_kernel_share_pct": share,
        "runtime_ms": {
            "candidate": {"median": ms},
            "eager": {"median": 10.0},
            "compiled": {"median": 4.0},
        },
    }
    return {
        "kind": "candidate",
        "step": step,
        "executed": True,
        "meta": {"stages": "library + elementwise", "params": [{}, {"threads": 256}]},
        "evaluation": {
            "status": "ok",
            "reason": "",
            "figures": figures,
            "timing": {"candidate": ms, "candidate_spread": spread},
        },
    }


@pytest.mark.parametrize(
    ("later_ms", "clearly"),
    [(7.5, True), (7.95, False)],  # 7.95 ms beats 8 ms by less than the two spreads (2%)
)
def test_a_later_best_counts_as_the_searchs_gain_only_beyond_the_timing_spread(
    policy, tmp_path, later_ms, clearly
):
    sys.path.insert(0, str(BENCHMARKS))
    import bench_offline_cuda_policy as bench

    log = tmp_path / "run.jsonl"
    records = [_candidate(0, 8.0, 25.0), _candidate(0, 9.0, 20.0), _candidate(1, later_ms, 20.0)]
    log.write_text("".join(json.dumps(r) + "\n" for r in records))
    row = bench.summarize(
        _task("kernelbench-L2-4", GEMM_TAIL, "4_Gemm_Sigmoid_Scale.py", level=2), policy, log
    )
    assert row["best_step"] == 1 and row["first_step_best_ms"] == 8.0
    assert row["clearly_after_first_step"] is clearly
    assert row["library_ms"] == pytest.approx(later_ms * 0.8, abs=1e-4)
    assert (row["eager_ms"], row["compiled_ms"]) == (10.0, 4.0)
    level = bench.aggregate([row])["levels"][2]
    assert level["share_best_after_first_step"] == 1.0
    assert level["share_best_clearly_after_first_step"] == (1.0 if clearly else 0.0)
    # 6 ms of library stages against torch.compile's 4 ms for the whole forward
    assert level["library_alone_slower_than_compiled"] == ["kernelbench-L2-4"]
    assert level["geomean_vs_compiled_library_bound"] == pytest.approx(4.0 / (later_ms * 0.8))


def test_merge_with_logs_summarizes_rows_again_with_the_newer_fields(policy, tmp_path):
    """Rows written before a summary field existed gain it from their task's search log."""
    sys.path.insert(0, str(BENCHMARKS))
    import bench_offline_cuda_policy as bench

    kb = tmp_path / "kb"
    (kb / "level2").mkdir(parents=True)
    (kb / "level2" / "4_Gemm_Sigmoid_Scale.py").write_text(GEMM_TAIL)
    logs = tmp_path / "logs" / "part-a"
    logs.mkdir(parents=True)
    (logs / "kernelbench-L2-4.jsonl").write_text(json.dumps(_candidate(0, 2.0, 100.0)) + "\n")
    old = {
        "task": "kernelbench-L2-4",
        "level": 2,
        "file_name": "4_Gemm_Sigmoid_Scale.py",
        "cut": True,
    }
    (tmp_path / "a.json").write_text(json.dumps({"data": {"seconds": 3.0, "rows": [old]}}))
    rebuild = bench.summarize_from_logs(tmp_path / "logs", kb, policy)
    (row,), _, _, _ = bench.merge([tmp_path / "a.json"], rebuild)
    assert row["best_speedup_vs_eager"] == 5.0 and row["library_ms"] == 0.0
    assert row["cut"] is True and row["family"] is not None


def test_a_run_stopped_by_sigterm_writes_the_rows_its_logs_hold(tmp_path):
    """``timeout`` ends a device run with SIGTERM: the steps already evaluated are kept."""
    log_dir = tmp_path / "logs"
    log_dir.mkdir()
    cut = json.dumps(_candidate(1, 1.0, 50.0))[:40]  # a record the signal cut mid-write
    (log_dir / "kernelbench-L2-4.jsonl").write_text(
        json.dumps(_candidate(0, 5.0, 50.0)) + "\n" + cut
    )
    (tmp_path / "4_Gemm_Sigmoid_Scale.py").write_text(GEMM_TAIL)
    script = f"""
import argparse, os, signal, sys, time
from pathlib import Path
sys.path.insert(0, {str(BENCHMARKS)!r})
import bench_offline_cuda_policy as bench
from maxcode.policy.offline_cuda import OfflineCudaPolicy
from maxcode.tasks.kernelbench import load_problem_file
task = load_problem_file(Path({str(tmp_path / "4_Gemm_Sigmoid_Scale.py")!r}), level=2)
args = argparse.Namespace(depth=4, k=4, seed=0, fast_inputs=False, coverage={{}},
                          json=Path({str(tmp_path / "out.json")!r}))
bench._write_partial_on_sigterm(args, OfflineCudaPolicy(), [task], Path({str(log_dir)!r}), 0.0)
os.kill(os.getpid(), signal.SIGTERM)
time.sleep(60)
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 128 + signal.SIGTERM, done.stderr[-2000:]
    (row,) = json.loads((tmp_path / "out.json").read_text())["data"]["rows"]
    assert row["cut"] is True and row["best_speedup_vs_eager"] == 2.0


def test_a_task_not_faster_than_eager_is_reported_as_having_nothing_to_offer(capsys):
    sys.path.insert(0, str(BENCHMARKS))
    import bench_offline_cuda_policy as bench

    slow = {
        "task": "level1/94_MSELoss",
        "level": 1,
        "family": "kernels",
        "executed": 4,
        "correct_found": True,
        "best_speedup_vs_eager": 0.6,
        "best_speedup_vs_compiled": 0.3,
        "best_step": 0,
        "offered": False,
        "statuses": {"ok": 4},
        "unsupported_reason": None,
    }
    bench.report([slow], 60.0, {1: {"problems": 100, "share_supported": 0.8}})
    out = capsys.readouterr().out
    assert "no candidate faster than eager (the library): nothing to offer" in out
    assert "supported 80% of 100 problems" in out
    assert "not faster than eager: level1/94_MSELoss" in out


def test_batch_statistics_split_across_blocks_one_block_per_channel_and_two_passes_are_searched(
    policy, tmp_path: Path
):
    """A BatchNorm after a convolution has few channels of many values: the default splits
    each channel across blocks (Welford partial states merged in chunk order); one block per
    channel, in one pass or two, stays a choice."""
    plan = policy.analyze(BATCHNORM, "batchnorm.py").plan
    (stats,) = [s for s in plan.stages if s.family == "stats"]
    base = space.default(stats)
    assert base == {"threads": 256, "welford": 1, "chunks_per_sm": 4}
    moves = [p for p, _ in space.neighbours(stats, base)]
    one_block = {**base, "chunks_per_sm": 0}
    two_pass = {**one_block, "welford": 0}
    assert one_block in moves and two_pass in moves
    assert {**base, "welford": 0} not in moves  # the split merges Welford states only
    assert space.cue_weight(stats, base, {**base, "chunks_per_sm": 8}, {"memory"}) == 1.0
    assert space.cue_weight(stats, one_block, {**one_block, "welford": 0}, {"memory"}) == 0.0
    units = {}
    for name, p in (("split", base), ("one block", one_block), ("two passes", two_pass)):
        params = [p if s is stats else space.default(s) for s in plan.stages]
        units[name] = render(plan, params, policy.name).cuda
    assert "_partials<4><<<" in units["split"] and "_finish<<<" in units["split"]
    assert "_partials" not in units["two passes"]
    assert "_block_welford(n, mean, m2);" in units["one block"]
    assert "_block_welford(n, mean, m2);" not in units["two passes"]
    compile_units(units, tmp_path)


def test_layer_norm_rows_in_one_welford_pass_are_a_searched_choice(policy, tmp_path: Path):
    source = kb_problem(
        "features",
        "        self.ln = nn.LayerNorm(features)",
        "        return torch.relu(self.ln(x))",
        "features = 256",
        "torch.randn(512, features)",
        "features",
    )
    plan = policy.analyze(source, "layernorm.py").plan
    (row,) = [s for s in plan.stages if s.family == "reduction"]
    base = space.default(row)
    assert space.variant(row) == "reduction-row" and base["welford"] == 0 and base["cache"] == 1
    one_pass = {**base, "welford": 1, "cache": 0}  # nothing to cache when the row is read once
    assert one_pass in [p for p, _ in space.neighbours(row, base)]
    assert not space.valid("reduction-row", {**base, "welford": 1}, row)
    softmax = policy.analyze(simple("torch.softmax(x, dim=2)"), "softmax.py").plan.stages[0]
    assert not space.valid("reduction-row", {**space.default(softmax), "welford": 1}, softmax)
    cuda = render(plan, [one_pass], policy.name).cuda
    assert "_row_welford(" in cuda
    compile_units({"one-pass statistics": cuda}, tmp_path)
