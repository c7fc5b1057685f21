"""Static anti-cheat checks, both ways: honest candidates pass, each hack is caught by its id."""

from __future__ import annotations

import pytest
from cuda_candidates import VARIANTS, benchmark_set

from maxcode.evaluate.cuda.checks import (
    CHECKS,
    is_own_kernel,
    own_kernel_names,
    split_source,
    static_findings,
)

from .cuda_fixtures import HOSTILE


def ids(source: str) -> list[str]:
    return [f.check_id for f in static_findings(source)]


@pytest.mark.parametrize(
    "case",
    benchmark_set(),
    ids=lambda c: f"{c[0].metadata['file_name']}-{c[1]}" if isinstance(c, tuple) else "",
)
def test_generated_candidates_pass_static_checks(case):
    _, _, source = case
    assert ids(source) == []


@pytest.mark.parametrize(
    ("fixture", "check_id"),
    [("torch_only", "no_custom_kernel"), ("introspection", "harness_introspection")],
)
def test_hostile_fixture_is_caught_statically(fixture, check_id):
    assert check_id in ids((HOSTILE / f"{fixture}.py").read_text())


@pytest.mark.parametrize(
    "fixture",
    [
        "good",
        "stream",
        "thread",
        "timing_patch",
        "precision",
        "hardcoded",
        "calls_reference",
        "result_reuse",
        "inplace",
        "alias",
    ],
)
def test_dynamic_only_fixtures_get_past_static_checks(fixture):
    """These hide from the patterns on purpose; the GPU worker must catch them (test_cuda_hostile.py)."""
    assert ids((HOSTILE / f"{fixture}.py").read_text()) == []


KERNEL = 'src = r"""__global__ void k(float* x) { x[0] = 1.f; }"""\n'


@pytest.mark.parametrize(
    ("snippet", "check_id"),
    [
        ("s = torch.cuda.Stream()\n", "stream_or_thread"),
        ("import threading\n", "stream_or_thread"),
        ('c = r"""void f() { cudaStream_t s; cudaStreamCreate(&s); }"""\n', "stream_or_thread"),
        ("torch.cuda.synchronize = lambda: None\n", "timing_patch"),
        ("torch.cuda.Event.elapsed_time = f\n", "timing_patch"),
        ("time.perf_counter = f\n", "timing_patch"),
        ("y = x.half()\n", "precision_downgrade"),
        ("torch.backends.cuda.matmul.allow_tf32 = True\n", "precision_downgrade"),
        ('c = r"""__global__ void h(__half* x) { }"""\n', "precision_downgrade"),
        ("import gc\nobjs = gc.get_objects()\n", "harness_introspection"),
        ("f = sys._getframe(1)\n", "harness_introspection"),
    ],
)
def test_each_pattern_fires(snippet, check_id):
    assert check_id in ids("import torch\n" + KERNEL + snippet)


@pytest.mark.parametrize(
    "snippet",
    [
        "# torch.cuda.synchronize = lambda: None  (a comment)\n",
        '"""we never call x.half() here"""\n',
        'c = r"""// __half in a C comment\n__global__ void g(float* y) { }"""\n',
        "if torch.cuda.synchronize == other: pass\n",
    ],
)
def test_comments_docstrings_and_comparisons_do_not_fire(snippet):
    assert ids("import torch\n" + KERNEL + snippet) == []


def test_precision_check_is_skipped_for_half_precision_tasks():
    src = "import torch\n" + KERNEL + "y = x.half()\n"
    assert [f.check_id for f in static_findings(src, reference_is_fp32=False)] == []


TF32_HI_ONLY = """
__global__ void g(const float* a, float* out) {
    float h = nvcuda::wmma::__float_to_tf32(a[threadIdx.x]);
    out[threadIdx.x] = h;  // then one TF32 mma_sync on hi: TF32 accuracy
}
"""


def test_plain_tf32_tensor_cores_are_a_precision_downgrade():
    assert "precision_downgrade" in ids(f'import torch\nsrc = r"""{TF32_HI_ONLY}"""\n')


def test_a_3xtf32_split_keeps_fp32_accuracy_and_passes_but_half_beside_it_does_not():
    split = TF32_HI_ONLY.replace(
        "out[threadIdx.x] = h;",
        "float l = nvcuda::wmma::__float_to_tf32(a[threadIdx.x] - h); out[threadIdx.x] = h + l;",
    )
    assert ids(f'import torch\nsrc = r"""{split}"""\n') == []
    with_half = split.replace("float l", "__half q; float l")
    assert "precision_downgrade" in ids(f'import torch\nsrc = r"""{with_half}"""\n')


def test_findings_follow_the_fixed_check_order_and_name_the_check():
    src = "import threading\nimport gc\nobjs = gc.get_objects()\ny = x.half()\n"
    found = static_findings(src)
    order = list(CHECKS)
    assert [f.check_id for f in found] == sorted((f.check_id for f in found), key=order.index)
    assert all(f.message for f in found)


def test_split_source_separates_python_from_string_code():
    py, c = split_source('x = 1  # comment\ns = "int a; // c comment\\nint b;"\n')
    assert "comment" not in py and "int" not in py
    assert "int a;" in c and "int b;" in c and "c comment" not in c


def test_variants_are_the_four_documented_ones():
    assert VARIANTS == ("fast", "slow", "wrong", "compile_error")


def test_own_kernel_names_come_from_global_functions_and_triton_defs():
    source = '''
import triton
cuda = """
template <typename T> __global__ void __launch_bounds__(256) fused_kernel(T* x) {}
extern "C" __global__ void plain_kernel(float* x) {}
__device__ float helper(float x) { return x; }
"""
@triton.autotune(configs=[], key=["n"])
@triton.jit
def add_kernel(x_ptr, n):
    pass
'''
    assert own_kernel_names(source) == {"fused_kernel", "plain_kernel", "add_kernel"}


@pytest.mark.parametrize(
    ("profiled", "own"),
    [
        ("void fused_kernel<float>(float*)", True),
        ("plain_kernel", True),
        ("add_kernel_0d1d2", False),
        ("void at::native::vectorized_elementwise_kernel<4, ...>", False),
    ],
)
def test_a_profiled_kernel_is_matched_by_name_as_a_whole_word(profiled, own):
    assert is_own_kernel(profiled, {"fused_kernel", "plain_kernel", "add_kernel"}) is own


def test_new_fixtures_get_past_static_checks_and_the_unused_kernel_defines_one():
    for fixture in (
        "torch_tampering",
        "backend_flags",
        "late_reuse",
        "unused_kernel",
        "cuda_graph",
    ):
        assert ids((HOSTILE / f"{fixture}.py").read_text()) == [], fixture
    assert own_kernel_names((HOSTILE / "unused_kernel.py").read_text()) == {"saxpy_kernel"}


@pytest.mark.parametrize("name", ["borderline", "atomic_sum", "racy", "exact_conv"])
def test_the_repeat_and_tf32_fixtures_pass_the_static_checks(name):
    """Their verdicts come from the GPU run: a static finding would hide them (a docstring
    naming the TF32 format once did)."""
    assert static_findings((HOSTILE / f"{name}.py").read_text()) == []
