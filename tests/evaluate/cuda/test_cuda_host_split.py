"""Host functions moved out of the .cu into the host binding (``host_split``): what is moved,
what is refused and why, and that split and unsplit builds of the same candidate expose the
same functions, the same kernels and the same behaviour (real nvcc and g++; no GPU needed
except for the ``gpu`` test, which compares outputs). The builds take minutes on 2 cores: they
are ``integration`` tests."""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from maxcode.evaluate.cuda.build import (
    HOST_CORE,
    HOST_FULL,
    HOST_SPLIT_TIER,
    BuildCache,
    BuildOutcome,
    ExtensionSpec,
    _torch_include,
)
from maxcode.evaluate.cuda.host_split import STUB_PREFIX, HostSplit, split_host_functions

from .host_split_fixtures import CONSTANT_POLY, DISPATCH_ROWSUM, FIXTURES, INPUTS, STRUCT_TILES

_TORCH = re.compile(r"\b(torch|at|c10)::|TORCH_|#include <(torch|ATen)/")
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")


def _split(source: str) -> HostSplit:
    split = split_host_functions(source)
    assert isinstance(split, HostSplit), split
    return split


def test_launches_become_stub_calls_and_the_kernels_name_no_torch():
    split = _split(CONSTANT_POLY)
    assert split.moved_functions == ("poly_forward",)
    assert split.stubs == (f"{STUB_PREFIX}poly_kernel",)
    assert not _TORCH.search(split.kernels) and "<<<" not in split.host
    assert "#include <cfloat>" in split.kernels  # FLT_MAX came with torch's headers before
    # the launch: configuration (shared memory and stream defaulted) then the arguments
    assert (
        f"{STUB_PREFIX}poly_kernel(blocks, THREADS, 0, 0, x.data_ptr<float>(), "
        "y.data_ptr<float>(), n)" in split.host
    )
    # the stub takes exactly the kernel's parameters and launches it with them
    assert (
        f"void {STUB_PREFIX}poly_kernel(dim3 maxcode_grid, dim3 maxcode_block, size_t "
        "maxcode_shmem, cudaStream_t maxcode_stream, const float* __restrict__ x, "
        "float* __restrict__ y, long n)" in split.kernels
    )
    assert (
        "poly_kernel<<<maxcode_grid, maxcode_block, maxcode_shmem, maxcode_stream>>>(x, y, n)"
        in split.kernels
    )
    # __constant__ memory stays with the kernels; the host reaches the object itself, so
    # cudaMemcpyToSymbol gets its address and sizeof its size
    assert "__constant__ float c_coeffs[4];" in split.kernels
    assert "float (&maxcode_symbol_c_coeffs())[4] { return c_coeffs; }" in split.kernels
    assert "float (&maxcode_symbol_c_coeffs())[4];" in split.host
    assert (
        "cudaMemcpyToSymbol(maxcode_symbol_c_coeffs(), host, sizeof(maxcode_symbol_c_coeffs()))"
        in split.host
    )
    # macros naming torch go to the host only; the others to both
    assert "CHECK_CUDA" not in split.kernels and "#define THREADS 256" in split.kernels


def test_template_launches_get_one_instantiation_per_dispatched_type():
    split = _split(DISPATCH_ROWSUM)
    stub = f"{STUB_PREFIX}row_sum_kernel"
    assert set(split.stubs) == {
        f"{STUB_PREFIX}scale_kernel",
        *(f"{stub}<{t}, 256>" for t in ("double", "float", "c10::Half")),
    }
    for t in ("double", "float", "c10::Half"):
        assert f"template struct {stub}<{t}, 256>;" in split.kernels
    assert "#include <c10/util/Half.h>" in split.kernels  # c10::Half alone, not torch
    assert f"{stub}<scalar_t, 256>::run(rows, kBlock, kBlock * sizeof(float), stream," in split.host
    assert "row_sum_kernel<scalar_t, BLOCK><<<maxcode_grid" in split.kernels


def test_kernels_named_outside_a_launch_are_declared_for_the_host():
    split = _split(STRUCT_TILES)
    # cudaFuncSetAttribute takes the host function nvcc defines for the kernel
    assert "void transpose_kernel(const float* in, float* out, Shape s);" in split.host
    assert "cudaFuncSetAttribute(reinterpret_cast<const void*>(&transpose_kernel)," in split.host
    assert "struct Shape" in split.host and "struct Shape" in split.kernels
    assert (
        "constexpr int kTile = 16;" in split.host and "constexpr int kTile = 16;" in split.kernels
    )
    assert f"template struct {STUB_PREFIX}add_bias_kernel<4>;" in split.kernels
    assert "static int ceil_div" in split.host and "ceil_div" not in split.kernels


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        (CONSTANT_POLY.replace("__constant__ float", "static __constant__ float"), "static device variable c_coeffs"),
        (
            DISPATCH_ROWSUM.replace("AT_DISPATCH_FLOATING_TYPES_AND_HALF", "AT_DISPATCH_V2"),
            "AT_DISPATCH_V2: its scalar types are not known",
        ),
        (
            STRUCT_TILES.replace("static int ceil_div", "template <typename T> void go(T* p) { transpose_kernel<<<1, 1>>>(p, p, Shape{1, 1}); }\nstatic int ceil_div"),
            "the host template go launches kernels",
        ),
        (CONSTANT_POLY.replace("#define THREADS 256", "#ifndef THREADS\n#define THREADS 256\n#endif"), "preprocessor conditionals"),
        (CONSTANT_POLY.replace("__constant__ float c_coeffs[4];", "namespace { __constant__ float c_coeffs[4]; }"), "namespace definition"),
        (CONSTANT_POLY.replace("poly_kernel<<<blocks, THREADS>>>", "LAUNCH<<<blocks, THREADS>>>"), "a launch of LAUNCH, not a kernel of this file"),
        (CONSTANT_POLY.replace("const float* __restrict__ x, float* __restrict__ y, long n", "at::Half* x, float* y, long n"), None),
        (CONSTANT_POLY.replace("c10", "").split("torch::Tensor poly_forward")[0], "no host function to move"),
        (CONSTANT_POLY.replace("(int)std::min<long>(", "min("), "a host call of min, which nvcc declares"),
    ],
    ids=["static-symbol", "unknown-dispatch", "host-template-launch", "ifdef", "namespace", "launch-via-macro", "at-half-kernel", "kernels-only", "nvcc-host-min"],
)  # fmt: skip
def test_sources_not_split_say_why(source, reason):
    result = split_host_functions(source)
    if reason is None:  # at::Half in a kernel: c10's Half header stands in, still split
        assert isinstance(result, HostSplit) and "#include <c10/util/Half.h>" in result.kernels
        return
    assert isinstance(result, str) and reason in result, result


def test_device_code_that_names_torch_is_not_split():
    source = CONSTANT_POLY.replace(
        "y[i] = horner(x[i]);", "y[i] = horner(x[i]) + at::native::zero;"
    )
    assert split_host_functions(source) == "device code names torch (at::)"


def test_the_build_key_and_the_fallback_record_the_split(tmp_path):
    spec = ExtensionSpec.from_load_inline(
        "m", FIXTURES["constant_poly"][1], cuda_sources=CONSTANT_POLY
    )
    on = BuildCache(tmp_path / "a", "9.0", split_host=True)
    off = BuildCache(tmp_path / "b", "9.0", split_host=False)
    assert on.key_of(spec)[0] != off.key_of(spec)[0]
    flagged = ExtensionSpec.from_load_inline(
        "m", "", cuda_sources=CONSTANT_POLY, extra_cuda_cflags=["-DFAST=1"]
    )
    outcome = BuildOutcome(key="k", name="m", ok=False)
    assert not on._compile_split(flagged, on.key_of(flagged)[1], tmp_path, outcome, 0.0)
    assert "extra_cuda_cflags ['-DFAST=1']" in outcome.host_split


# -- split and unsplit builds of the same candidates -----------------------------------------

_LOAD = r"""
import ctypes, json, os, sys
for lib in os.environ["STUB_LIBS"].split(":"):
    if lib:
        ctypes.CDLL(lib, mode=os.RTLD_GLOBAL)
import torch
sys.setdlopenflags(os.RTLD_LAZY | os.RTLD_GLOBAL)
from maxcode.evaluate.cuda.build import BuildOutcome, import_extension
module = import_extension(BuildOutcome(**json.loads(sys.argv[1])))
dev = sys.argv[2]
out = {}
for name in json.loads(sys.argv[3]):
    torch.manual_seed(0)
    args = eval(json.loads(sys.argv[4])[name], {"torch": torch, "dev": dev})
    try:
        result = getattr(module, name)(*args)
        out[name] = ["ok", result.cpu().double().tolist()]
    except Exception as err:
        out[name] = [type(err).__name__, str(err).splitlines()[0]]
print(json.dumps({"functions": sorted(n for n in dir(module) if not n.startswith("__")), "calls": out}))
"""


@pytest.fixture(scope="module")
def link_stubs(tmp_path_factory):
    """Empty ``libc10_cuda.so``/``libtorch_cuda.so`` where CPU torch has none: the link of a
    CUDA extension then succeeds (undefined symbols resolve at load, lazily), so both builds
    are linked and loaded here; on a GPU machine torch's own libraries are found first."""
    import torch

    lib_dir = Path(torch.__file__).parent / "lib"
    stubs = tmp_path_factory.mktemp("link-stubs")
    made = []
    for name in ("c10_cuda", "torch_cuda"):
        if (lib_dir / f"lib{name}.so").exists():
            continue
        (stubs / "empty.c").write_text("")
        so = stubs / f"lib{name}.so"
        subprocess.run(
            [
                "cc",
                "-shared",
                "-fPIC",
                f"-Wl,-soname,lib{name}.so",
                "-o",
                str(so),
                str(stubs / "empty.c"),
            ],
            check=True,
        )
        made.append(str(so))
    return stubs, made


@pytest.fixture(scope="module")
def cache_root(tmp_path_factory):
    return tmp_path_factory.mktemp("host-split-builds")


@pytest.fixture(scope="module")
def builds(cache_root, link_stubs):
    """Each fixture built three times into one cache: split, split with the lighter host
    headers (the default), and unsplit; each header set's PCH once."""
    stubs, _ = link_stubs
    root = cache_root
    old = os.environ.get("LIBRARY_PATH")
    os.environ["LIBRARY_PATH"] = f"{stubs}:{old}" if old else str(stubs)
    has_c10_cuda = (_torch_include() / "c10" / "cuda" / "impl" / "cuda_cmake_macros.h").is_file()
    out: dict[str, dict[str, BuildOutcome]] = {}
    try:
        with ThreadPoolExecutor(4) as pool:  # as an evaluation builds: several at once
            for variant, split, light in (
                ("split", True, False),
                ("unsplit", False, False),
                ("light", True, True),
            ):
                cache = BuildCache(
                    root / "cache", "9.0", host_pch=True, split_host=split, light_host_headers=light
                )
                for name, (source, cpp, _) in FIXTURES.items():
                    if name == "current_stream" and not has_c10_cuda:
                        continue  # CPU torch has no c10/cuda headers
                    spec = ExtensionSpec.from_load_inline(
                        f"ext_{name}", cpp, cuda_sources=source, functions=FIXTURES[name][2]
                    )
                    out.setdefault(name, {})[variant] = pool.submit(cache.build, spec)
        out = {name: {v: f.result() for v, f in made.items()} for name, made in out.items()}
    finally:
        if old is None:
            os.environ.pop("LIBRARY_PATH", None)
        else:
            os.environ["LIBRARY_PATH"] = old
    return out


def _load_and_call(
    outcome: BuildOutcome, functions: list[str], device: str, stub_libs: list[str]
) -> dict:
    env = {**os.environ, "STUB_LIBS": ":".join(stub_libs)}
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    proc = subprocess.run(
        [sys.executable, "-c", _LOAD, json.dumps(outcome.to_dict()), device, json.dumps(functions), json.dumps(INPUTS)],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _defined_symbols(so_path: str) -> set[str]:
    nm = subprocess.run(
        ["nm", "-C", "--defined-only", so_path], capture_output=True, text=True, check=True
    )
    return {line.split(" ", 2)[-1] for line in nm.stdout.splitlines() if " " in line}


def _kernel_code(so_path: str) -> dict[str, bytes]:
    """Per kernel, the machine code of its ``.text.<kernel>`` section in the cubins of the
    extension's fatbinary (read from the ELF headers; no cuobjdump needed)."""
    blob = subprocess.run(
        ["objcopy", "-O", "binary", "--only-section=.nv_fatbin", so_path, "/dev/stdout"],
        capture_output=True, check=True,
    ).stdout  # fmt: skip
    code: dict[str, bytes] = {}
    at = blob.find(b"\x7fELF")
    while at >= 0:
        shoff = struct.unpack_from("<Q", blob, at + 0x28)[0]
        entsize, count, names_index = struct.unpack_from("<HHH", blob, at + 0x3A)
        sections = [
            struct.unpack_from("<IIQQQQ", blob, at + shoff + i * entsize) for i in range(count)
        ]
        names_offset = sections[names_index][4]
        for name_at, _, _, _, offset, size in sections:
            raw = blob[at + names_offset + name_at :].split(b"\0", 1)[0].decode()
            if raw.startswith(".text."):
                code[raw.removeprefix(".text.")] = blob[at + offset : at + offset + size]
        at = blob.find(b"\x7fELF", at + shoff + entsize * count)
    return code


@pytest.mark.integration
@needs_nvcc
@pytest.mark.parametrize("name", list(FIXTURES))
def test_split_and_unsplit_builds_expose_the_same_functions_kernels_and_checks(
    name, builds, link_stubs
):
    if name not in builds:
        pytest.skip("needs torch's c10/cuda headers (a CUDA build of torch)")
    split, unsplit = builds[name]["split"], builds[name]["unsplit"]
    assert split.ok and unsplit.ok, (split.first_error, unsplit.first_error)
    assert split.cuda_headers == HOST_SPLIT_TIER and split.host_split == ""
    assert unsplit.cuda_headers != HOST_SPLIT_TIER
    # the GPU code is the same: the same kernels with the same instructions
    code_split, code_unsplit = _kernel_code(split.so_path), _kernel_code(unsplit.so_path)
    assert code_split and code_split == code_unsplit
    # the host side: the same kernel entry points, plus only the generated stubs/accessors
    symbols = _defined_symbols(split.so_path)
    before = _defined_symbols(unsplit.so_path)
    stubs = {s for s in symbols - before if "maxcode_launch_" in s or "maxcode_symbol_" in s}
    assert stubs, "the stubs are in the split build"
    kernels = {s for s in before if "__device_stub__" in s}
    assert kernels and kernels <= symbols
    # loaded: the same functions; called with CPU tensors, the moved host code rejects them
    # with the same message the unsplit build gives
    functions = FIXTURES[name][2]
    a = _load_and_call(split, functions, "cpu", link_stubs[1])
    b = _load_and_call(unsplit, functions, "cpu", link_stubs[1])
    assert a == b and a["functions"] == functions
    assert all(status == "RuntimeError" for status, _ in a["calls"].values()), a


@pytest.mark.integration
@needs_nvcc
@pytest.mark.parametrize("name", list(FIXTURES))
def test_the_lighter_host_headers_build_the_same_extension(name, builds, link_stubs):
    """The binding against the core header set (ATen's Tensor, the ops called, torch's
    pybind11 casters): the same kernels, the same functions, the same host checks as
    against the whole torch/extension.h."""
    if name not in builds:
        pytest.skip("needs torch's c10/cuda headers (a CUDA build of torch)")
    light, full = builds[name]["light"], builds[name]["split"]
    assert light.ok, light.first_error
    assert (light.host_headers, full.host_headers) == (HOST_CORE, HOST_FULL)
    assert light.key != full.key
    assert _kernel_code(light.so_path) == _kernel_code(full.so_path)
    ours = ("maxcode_", "__device_stub__", "PyInit_")  # stubs, kernels, the module
    light_symbols, full_symbols = _defined_symbols(light.so_path), _defined_symbols(full.so_path)
    assert {s for s in light_symbols if any(o in s for o in ours)} == {
        s for s in full_symbols if any(o in s for o in ours)
    }
    functions = FIXTURES[name][2]
    a = _load_and_call(light, functions, "cpu", link_stubs[1])
    b = _load_and_call(full, functions, "cpu", link_stubs[1])
    assert a == b and a["functions"] == functions


@pytest.mark.gpu
@pytest.mark.integration
@needs_nvcc
@pytest.mark.parametrize("name", list(FIXTURES))
def test_split_unsplit_and_light_builds_compute_the_same_on_the_gpu(name, builds):
    import torch

    if not torch.cuda.is_available():
        pytest.skip("no GPU")
    if name not in builds:
        pytest.skip("needs torch's c10/cuda headers (a CUDA build of torch)")
    functions = FIXTURES[name][2]
    a = _load_and_call(builds[name]["split"], functions, "cuda", [])
    b = _load_and_call(builds[name]["unsplit"], functions, "cuda", [])
    c = _load_and_call(builds[name]["light"], functions, "cuda", [])
    assert all(status == "ok" for status, _ in a["calls"].values()), a
    assert a == b == c


@pytest.mark.integration
@needs_nvcc
def test_a_binding_the_light_headers_cannot_compile_is_built_with_the_whole_header(
    cache_root, builds
):
    """``torch::kMean`` is declared by the frontend (torch/enum.h), which the core set leaves
    out: the core compile fails on the name, and the binding is compiled again with
    torch/extension.h."""
    cache = BuildCache(
        cache_root / "cache", "9.0", host_pch=True, split_host=True, light_host_headers=True
    )
    cpp = "#include <torch/extension.h>\nint mean_tag() { return sizeof(torch::kMean); }"
    out = cache.build(ExtensionSpec.from_load_inline("ext_mean_tag", cpp, functions=["mean_tag"]))
    assert out.ok, out.first_error
    assert out.host_headers == HOST_FULL
    assert out.steps["light host"] > 0 and out.steps["host"] > 0


def test_the_host_binding_tiers(tmp_path):
    """Core, its torch/extension.h lines made comments on the same lines, then the whole
    header; host code that includes a torch/ header other than extension.h or an umbrella
    header, or asks for gradients, skips the core set (ATen's and c10's headers do not), as
    do host code that names the frontend and builds without the core set."""
    cpp = "#include <torch/extension.h>\ntorch::Tensor f(torch::Tensor x);"
    spec = ExtensionSpec.from_load_inline("m", cpp, functions=["f"])
    light_cache = BuildCache(tmp_path, "9.0", host_pch=True, light_host_headers=True)
    (core, text), (full, as_written) = light_cache._host_tiers(spec)
    assert (core, full) == (HOST_CORE, HOST_FULL)
    assert as_written == spec.main_cpp()
    assert "torch/extension.h" not in text.replace("// maxcode: torch/extension.h", "")
    assert len(text.splitlines()) == len(as_written.splitlines())
    frontend = ExtensionSpec.from_load_inline(
        "m", cpp + "\nauto o = torch::nn::functional::relu;", functions=["f"]
    )
    assert [t for t, _ in light_cache._host_tiers(frontend)] == [HOST_FULL]
    commented = ExtensionSpec.from_load_inline(
        "m", cpp + "\n// torch::nn is not used", functions=["f"]
    )
    assert [t for t, _ in light_cache._host_tiers(commented)] == [HOST_CORE, HOST_FULL]
    for not_core in (
        "#include <torch/types.h>",
        '#include "torch/cuda.h"',
        "#include <ATen/ATen.h>",
        "auto g = torch::requires_grad();",
    ):
        other = ExtensionSpec.from_load_inline("m", f"{not_core}\n{cpp}", functions=["f"])
        assert [t for t, _ in light_cache._host_tiers(other)] == [HOST_FULL]
    aten = ExtensionSpec.from_load_inline(
        "m", f"#include <ATen/cuda/CUDAContext.h>\n{cpp}", functions=["f"]
    )
    assert [t for t, _ in light_cache._host_tiers(aten)] == [HOST_CORE, HOST_FULL]
    full_cache = BuildCache(tmp_path, "9.0", host_pch=True, light_host_headers=False)
    assert [t for t, _ in full_cache._host_tiers(spec)] == [HOST_FULL]
    no_pch = BuildCache(tmp_path, "9.0", host_pch=False, light_host_headers=True)
    assert no_pch._host_tiers(spec) == [("", spec.main_cpp())]


@pytest.mark.integration
@needs_nvcc
def test_a_stub_the_kernel_object_lacks_falls_back_before_the_link(cache_root, monkeypatch):
    """A shared library links with undefined symbols; its import would fail. A stub the
    kernels' object does not define (an instantiation left out) sends the build back to the
    header tiers instead."""
    from maxcode.evaluate.cuda import build as build_module

    def without_half(source: str) -> HostSplit | str:
        split = split_host_functions(source)
        assert isinstance(split, HostSplit)
        kernels = split.kernels.replace(
            f"template struct {STUB_PREFIX}row_sum_kernel<c10::Half, 256>;", ""
        )
        return HostSplit(kernels, split.host, split.moved_functions, split.stubs, split.linked)

    monkeypatch.setattr(build_module, "split_host_functions", without_half)
    cache = BuildCache(cache_root / "cache-missing", "9.0", host_pch=False, split_host=True)
    spec = ExtensionSpec.from_load_inline(
        "ext_missing",
        FIXTURES["dispatch_rowsum"][1],
        cuda_sources=DISPATCH_ROWSUM,
        functions=["row_mean"],
    )
    out = cache.build(spec)
    assert out.host_split.startswith(
        "the split leaves undefined: _ZN29maxcode_launch_row_sum_kernelIN3c104HalfELi256EE3run"
    )
    assert out.cuda_headers != HOST_SPLIT_TIER and "split host" in out.steps
    # the same kernels behind another binding: straight to the header tiers
    other = ExtensionSpec.from_load_inline(
        "ext_missing", FIXTURES["dispatch_rowsum"][1] + "\n// v2", cuda_sources=DISPATCH_ROWSUM
    )
    again = BuildOutcome(key="k", name="ext_missing", ok=False)
    assert not cache._compile_split(other, cache.key_of(other)[1], cache_root, again, 0.0)
    assert again.host_split == "an earlier split of this .cu failed"


DECLARED_ONLY = r"""
#include <torch/extension.h>
__global__ void scale_kernel(float* x, float f, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= f;
}
float never_defined_factor(float);
torch::Tensor scale(torch::Tensor x) {
    auto y = x.clone();
    int n = y.numel();
    scale_kernel<<<(n + 255) / 256, 256>>>(y.data_ptr<float>(), never_defined_factor(2.0f), n);
    return y;
}
"""


@pytest.mark.integration
@needs_nvcc
def test_a_split_that_would_not_load_falls_back_and_the_usual_build_says_why(
    cache_root, link_stubs
):
    """A host function that calls a function no source defines links in both builds and would
    fail only at import. The split's load check sends it back to the usual build, whose own
    check fails it at ``link`` with the symbol; both checks' times stay in the steps. (``-L``
    the stub directory: ``ldd`` must find every library, or the check gives no verdict.) The
    moved code keeps the .cu's implicit ``cuda_runtime.h`` (the stubs' ``dim3``)."""
    stubs, _ = link_stubs
    cache = BuildCache(cache_root / "cache-unresolved", "9.0", host_pch=False, split_host=True)
    spec = ExtensionSpec.from_load_inline(
        "ext_unresolved",
        "torch::Tensor scale(torch::Tensor x);",
        cuda_sources=DECLARED_ONLY,
        functions=["scale"],
        extra_ldflags=[f"-L{stubs}"],
    )
    out = cache.build(spec)
    assert out.host_split == (
        "the split leaves undefined when loaded: _Z20never_defined_factorf"
    ), out.host_split
    assert not out.ok and out.failed_step == "link"
    assert out.first_error.startswith("undefined symbol _Z20never_defined_factorf when")
    assert {"split symbols", "symbols"} <= set(out.steps)
    assert out.cuda_headers != HOST_SPLIT_TIER
