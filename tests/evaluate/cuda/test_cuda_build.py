"""Build cache: keys, compile errors, nvcc, concurrency (real compilers; no GPU needed)."""

from __future__ import annotations

import os
import shutil
import signal
import threading
import time

import pytest

from maxcode.evaluate.cuda import build as build_module
from maxcode.evaluate.cuda.build import (
    COMPILE_NICENESS,
    HOST_CORE,
    HOST_FULL,
    BuildCache,
    BuildOutcome,
    ExtensionSpec,
    import_extension,
    trim_log,
)
from tests.fakes.small_pch import small_pch_headers  # noqa: F401

from ..leftovers import processes_naming

# A CPython extension without torch headers: compiles in about a second, imports, runs.
PY_EXT = r"""
#include <Python.h>
static PyObject* triple(PyObject*, PyObject* arg) { return PyLong_FromLong(3 * PyLong_AsLong(arg)); }
static PyMethodDef methods[] = {{"triple", triple, METH_O, ""}, {nullptr, nullptr, 0, nullptr}};
static struct PyModuleDef mod = {PyModuleDef_HEAD_INIT, "tiny", nullptr, -1, methods};
PyMODINIT_FUNC PyInit_tiny() { return PyModule_Create(&mod); }
"""


def tiny(extra: str = "") -> ExtensionSpec:
    return ExtensionSpec.from_load_inline(
        name="tiny", cpp_sources=PY_EXT + extra, no_implicit_headers=True
    )


@pytest.fixture
def cache(tmp_path):
    return BuildCache(
        tmp_path / "cache", "9.0", host_pch=False, light_cuda_headers=True, split_host=False
    )  # the header tiers; the host split: test_cuda_host_split.py


def test_spec_normalizes_like_load_inline():
    spec = ExtensionSpec.from_load_inline(
        "m", "int f();", functions="f", extra_cflags=["", " -O2 "]
    )
    assert spec.cpp_sources == ("int f();",)
    assert spec.functions == (("f", "f"),)
    assert spec.extra_cflags == ("-O2",)
    main = spec.main_cpp()
    assert main.index("#define TORCH_EXTENSION_NAME m") < main.index("#include <torch/extension.h>")
    assert 'm.def("f", torch::wrap_pybind_function(f), "f");' in main


def test_spec_rejects_bad_names_with_a_reason():
    with pytest.raises(ValueError, match="C identifier"):
        ExtensionSpec.from_load_inline("my-ext", "")
    with pytest.raises(ValueError, match="list or dict"):
        ExtensionSpec.from_load_inline("m", "", functions=3)


def test_key_depends_on_source_flags_and_arch(tmp_path):
    a = BuildCache(tmp_path / "a", "9.0")
    b = BuildCache(tmp_path / "b", "8.0")
    base = tiny()
    assert a.key_of(base)[0] == a.key_of(tiny())[0]
    assert a.key_of(base)[0] != a.key_of(tiny("// changed"))[0]
    assert a.key_of(base)[0] != b.key_of(base)[0]
    flagged = ExtensionSpec.from_load_inline(
        name="tiny", cpp_sources=PY_EXT, no_implicit_headers=True, extra_cflags=["-O2"]
    )
    assert a.key_of(base)[0] != a.key_of(flagged)[0]


def test_build_import_and_cache_hit(cache):
    first = cache.build(tiny())
    assert first.ok and not first.cached and first.seconds > 0
    assert import_extension(first).triple(14) == 42
    second = cache.build(tiny())
    assert second.cached and second.so_path == first.so_path and second.seconds == 0


def test_concurrent_identical_builds_compile_once(cache):
    outcomes = []
    threads = [
        threading.Thread(target=lambda: outcomes.append(cache.build(tiny("// concurrent"))))
        for _ in range(4)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(outcomes) == 4 and all(o.ok for o in outcomes)
    assert sum(not o.cached for o in outcomes) == 1
    assert len({o.so_path for o in outcomes}) == 1
    assert not any(cache.root.joinpath("tmp").iterdir())


def test_compile_error_is_trimmed_cached_and_names_the_first_error(cache):
    broken = ExtensionSpec.from_load_inline(
        name="bad", cpp_sources="int f() { return undeclared_thing; }", no_implicit_headers=True
    )
    out = cache.build(broken)
    assert not out.ok and out.failed_step == "host"
    assert "undeclared_thing" in out.first_error and "error" in out.first_error
    assert str(cache.root) not in out.log
    again = cache.build(broken)
    assert again.cached and again.first_error == out.first_error


def test_a_compiler_killed_by_a_signal_is_not_cached(cache, monkeypatch):
    """A cancelled job or the OOM killer says nothing about the source: the next try builds."""
    real_start = build_module._start_jobs

    def start_then_kill(jobs, cwd, niced=True):
        started = real_start(jobs, cwd, niced)
        for job in started.values():
            os.killpg(job.proc.pid, signal.SIGKILL)
        return started

    monkeypatch.setattr(build_module, "_start_jobs", start_then_kill)
    out = cache.build(tiny("// killed"))
    assert not out.ok and out.failed_step == "killed"
    assert out.first_error.startswith("host was killed by SIGKILL")
    assert cache.lookup(out.key) is None
    monkeypatch.setattr(build_module, "_start_jobs", real_start)
    assert cache.build(tiny("// killed")).ok


def test_every_compiler_step_runs_nicer_than_the_evaluator(cache, monkeypatch, tmp_path):
    """The evaluator builds every candidate's specs itself: its compilers must not compete at
    its own priority with what the GPU slots wait on (timed launches, KernelBench's serial
    input generator). They did from when builds moved into the evaluator until 2026-11-27.
    Each step's child writes the niceness it execs with (a fast step can be gone before its
    parent could ask the kernel)."""
    real_start, real_nicer = build_module._start_jobs, build_module._nicer
    steps: list[str] = []
    written = tmp_path / "niceness"
    written.mkdir()

    def recording_start(jobs, cwd, niced=True):
        started = real_start(jobs, cwd, niced)
        steps.extend(started)
        return started

    def recording_nicer():  # in the child, before exec
        real_nicer()
        fd = os.open(written / str(os.getpid()), os.O_WRONLY | os.O_CREAT, 0o644)
        os.write(fd, str(os.nice(0)).encode())
        os.close(fd)

    monkeypatch.setattr(build_module, "_start_jobs", recording_start)
    monkeypatch.setattr(build_module, "_nicer", recording_nicer)
    assert cache.build(tiny("// niced")).ok
    seen = [int(f.read_text()) for f in written.iterdir()]
    assert seen and len(seen) == len(steps)  # every step went through the niceness
    assert set(seen) == {min(19, os.nice(0) + COMPILE_NICENESS)}


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
def test_nvcc_compiles_a_kernel_and_reports_kernel_errors(cache):
    good = ExtensionSpec.from_load_inline(
        name="k",
        cpp_sources="",
        cuda_sources="__global__ void scale(float* x, float a) { x[threadIdx.x] *= a; }",
        no_implicit_headers=True,
    )
    out = cache.build(good)
    assert (
        "cuda" in out.steps and out.failed_step != "cuda"
    )  # linking needs libtorch_cuda, absent from a CPU-only torch
    bad = ExtensionSpec.from_load_inline(
        name="k",
        cpp_sources="",
        cuda_sources="__global__ void scale(float* x) { x[threadIdx.x] *= not_declared; }",
        no_implicit_headers=True,
    )
    out = cache.build(bad)
    assert out.failed_step == "cuda" and "not_declared" in out.first_error


def test_trim_log_keeps_first_error_and_bounds_size():
    log = "\n".join(["note: context"] * 5 + ["x.cu(3): error: boom"] + ["spam"] * 5000)
    kept, first = trim_log(log)
    assert first == "x.cu(3): error: boom"
    assert len(kept) <= 4000 and kept.splitlines()[0] == "note: context"


TORCH_FREE_KERNEL = "__global__ void scale(float* x, float a) { x[threadIdx.x] *= a; }"
TORCH_KERNEL = (
    "#include <torch/extension.h>\n"
    "__global__ void k(float* x) { x[0] = 1.f; }\n"
    "torch::Tensor f(torch::Tensor t) { k<<<1, 1>>>(t.data_ptr<float>()); return t; }"
)


@pytest.mark.parametrize(
    ("cuda_source", "light", "expected"),
    [
        (TORCH_FREE_KERNEL, True, ["cuda only", "ATen ops", "as written"]),
        (TORCH_KERNEL, True, ["ATen ops", "as written"]),
        ("__global__ void k(float* x) { TORCH_CHECK(x); }", True, ["ATen ops", "as written"]),
        (TORCH_KERNEL + "\n// .requires_grad(true)", True, ["as written"]),
        ("#include <torch/torch.h>\n" + TORCH_KERNEL, True, ["as written"]),
        (TORCH_FREE_KERNEL, False, ["as written"]),
    ],
    ids=[
        "torch-free",
        "includes-extension-h",
        "names-a-torch-macro",
        "requires-grad",
        "includes-torch-h",
        "light-headers-off",
    ],
)
def test_cuda_file_is_compiled_against_the_lightest_headers_first(
    tmp_path, cuda_source, light, expected
):
    cache = BuildCache(tmp_path, "9.0", host_pch=False, light_cuda_headers=light, split_host=False)
    spec = ExtensionSpec.from_load_inline("m", "", cuda_sources=cuda_source)
    tiers = cache._cuda_tiers(spec)
    assert [tier for tier, _ in tiers] == expected
    texts = dict(tiers)
    assert "#include <torch/types.h>" in texts["as written"]
    if "cuda only" in texts:
        assert (
            "torch" not in texts["cuda only"] and "#include <cuda_runtime.h>" in texts["cuda only"]
        )


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
def test_torch_free_kernel_compiles_without_torch_headers(cache):
    """The .cu of a kernel that never names torch skips torch/types.h (about 30 s of nvcc)."""
    out = cache.build(ExtensionSpec.from_load_inline("m", "", cuda_sources=TORCH_FREE_KERNEL))
    assert out.cuda_headers == "cuda only"
    assert "cuda" in out.steps and out.failed_step != "cuda", out.first_error


def _failed_pch() -> BuildOutcome:
    return BuildOutcome(key="pch", name="pch", ok=False, failed_step="pch")


@pytest.mark.usefixtures("small_pch_headers")
def test_the_precompiled_headers_build_at_the_evaluators_priority(tmp_path, monkeypatch):
    """Every build of a first wave waits for the precompiled headers, so they are the one
    compile that is not niced; ``prepare_host_pch`` builds every set a plain binding may use,
    the core set alone first (nearly every binding compiles with it), then the whole header.
    A small header stands in for torch's here."""
    real_start = build_module._start_jobs
    seen: list[tuple[str, int]] = []

    def recording_start(jobs, cwd, niced=True):
        started = real_start(jobs, cwd, niced)
        for step, job in started.items():
            seen.append((step, os.getpriority(os.PRIO_PROCESS, job.proc.pid)))
        return started

    monkeypatch.setattr(build_module, "_start_jobs", recording_start)
    cache = BuildCache(tmp_path, "9.0", host_pch=True, light_host_headers=True)
    plain = ExtensionSpec.from_load_inline("m", "", cuda_sources="// none")
    flags = build_module.torch_flags(plain, "9.0")
    ready_first = []

    def first_ready():  # the core set alone first: nearly every binding compiles with it
        ready_first.extend(cache._pch_ready(flags, h) for h in (HOST_CORE, HOST_FULL))

    cache.prepare_host_pch(120, first_ready)
    assert ready_first == [True, False]
    assert all(cache._pch_ready(flags, h) for h in (HOST_CORE, HOST_FULL))
    assert seen == [("pch", os.nice(0))] * 2
    assert cache.build(tiny("// niced")).ok  # the candidates' compiles stay niced
    assert {nice for step, nice in seen if step != "pch"} == {
        min(19, os.nice(0) + COMPILE_NICENESS)
    }
    no_pch = BuildCache(tmp_path / "none", "9.0", host_pch=False)
    no_pch.prepare_host_pch(120, lambda: pytest.fail("no header set to build"))
    assert not list((tmp_path / "none").rglob("*.gch"))


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
def test_the_cuda_compile_runs_while_the_build_waits_for_the_pch(tmp_path, monkeypatch):
    """A fresh cache's builds all wait for the PCH; their .cu compiles must not."""
    cache = BuildCache(tmp_path, "9.0", host_pch=True, light_cuda_headers=True, split_host=False)
    seen = {}

    def pch_that_waits_for_the_cuda_object(flags, deadline, headers):
        t0 = time.monotonic()
        while time.monotonic() - t0 < 120:
            seen["objects"] = list((tmp_path / "tmp").glob("*/cuda.cuda.o"))
            if seen["objects"]:
                break
            time.sleep(0.1)
        return _failed_pch()

    monkeypatch.setattr(cache, "_ensure_pch", pch_that_waits_for_the_cuda_object)
    out = cache.build(ExtensionSpec.from_load_inline("m", "", cuda_sources=TORCH_FREE_KERNEL))
    assert seen["objects"], "the .cu compile did not start before the PCH was ready"
    assert out.failed_step == "pch"


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
def test_a_failed_pch_stops_the_cuda_compile_already_running(tmp_path, monkeypatch):
    cache = BuildCache(tmp_path, "9.0", host_pch=True, light_cuda_headers=True, split_host=False)
    procs = []
    real_start = build_module._start_jobs

    def recording_start(jobs, cwd, niced=True):
        started = real_start(jobs, cwd, niced)
        procs.extend(job.proc for job in started.values())
        return started

    monkeypatch.setattr(build_module, "_start_jobs", recording_start)
    monkeypatch.setattr(cache, "_ensure_pch", lambda flags, deadline, headers: _failed_pch())
    out = cache.build(ExtensionSpec.from_load_inline("m", "", cuda_sources=TORCH_FREE_KERNEL))
    assert out.failed_step == "pch" and not out.ok
    assert procs and all(p.poll() is not None for p in procs)
    assert cache.lookup(out.key) is not None  # a PCH failure is deterministic: cached


TORCH_BINDING = "torch::Tensor twice(torch::Tensor x) { return x * 2; }"


def test_a_binding_compiles_against_the_core_headers_and_the_ops_it_calls(tmp_path):
    """The core header set has ATen's Tensor, its operators, the usual factories and torch's
    pybind11 casters; an op beyond them (``torch::sum``) comes from its own header, included
    after the precompiled core. The extension behaves as built with torch/extension.h,
    TORCH_CHECK's message included."""
    import torch

    cpp = (
        "#include <torch/extension.h>\n"
        "torch::Tensor f(torch::Tensor x) {\n"
        '  TORCH_CHECK(x.dtype() == torch::kFloat32, "x must be float32");\n'
        "  return torch::sum(x) + torch::zeros_like(x) * 2;\n"
        "}"
    )
    spec = ExtensionSpec.from_load_inline("core_binding", cpp, functions=["f"])
    cache = BuildCache(tmp_path, "9.0", host_pch=True, light_host_headers=True)
    work = tmp_path / "work"
    work.mkdir()
    flags = build_module.torch_flags(spec, "9.0")
    tiers = cache._host_tiers(spec)
    outcome = BuildOutcome(key="k", name="core_binding", ok=False)
    cmd = cache._host_command(spec, flags, tiers, work, {}, outcome, time.monotonic() + 600)
    assert cmd[cmd.index("ATen/ops/sum.h") - 1] == "-include"  # after the core's PCH
    assert "ATen/ops/zeros_like.h" not in cmd  # in the core set
    out = cache.build(spec)
    assert out.ok, out.first_error
    assert out.host_headers == HOST_CORE and "light host" not in out.steps
    ext = import_extension(out)
    assert torch.equal(ext.f(torch.arange(3.0)), torch.full((3,), 3.0))
    with pytest.raises(RuntimeError, match="x must be float32"):
        ext.f(torch.arange(3))


def test_a_host_compile_uses_the_pch_once_it_is_there(tmp_path, monkeypatch):
    cache = BuildCache(tmp_path, "9.0", host_pch=True, light_host_headers=True)
    spec = ExtensionSpec.from_load_inline("m", TORCH_BINDING, functions=["twice"])
    flags = build_module.torch_flags(spec, "9.0")
    ready = tmp_path / "pch" / cache._pch_key(flags, HOST_CORE)
    ready.mkdir(parents=True)
    (ready / "ok").write_text("")
    monkeypatch.setattr(cache, "start_pch", lambda *a: pytest.fail("the PCH is there"))
    work = tmp_path / "work"
    work.mkdir()
    outcome = BuildOutcome(key="k", name="m", ok=False)
    cmd = cache._host_command(
        spec, flags, cache._host_tiers(spec), work, {}, outcome, time.monotonic() + 60
    )
    assert cmd[cmd.index("-include") + 1] == str(ready / "maxcode_torch_core.h")
    assert outcome.steps["pch"] < 1


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
def test_a_compile_past_the_time_limit_is_killed_and_not_cached(cache, tmp_path, monkeypatch):
    system_tmp = tmp_path / "system-tmp"
    system_tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(system_tmp))
    spec = ExtensionSpec.from_load_inline("m", "", cuda_sources=TORCH_FREE_KERNEL)
    t0 = time.monotonic()
    out = cache.build(spec, timeout_s=0.3)
    assert out.failed_step == "timeout" and "time limit" in out.first_error
    assert time.monotonic() - t0 < 10  # killed, not waited for
    assert cache.lookup(out.key) is None  # a slow machine may build it next time
    # nvcc and its host compiler went with it, and so did their temporary files
    assert processes_naming(tmp_path) == []
    assert list(system_tmp.iterdir()) == []
    assert list((cache.root / "tmp").iterdir()) == []


FACTORY_KERNEL = (
    "#include <torch/extension.h>\n"
    "__global__ void fill(float* y, int n) { int i = threadIdx.x; if (i < n) y[i] = 1.f; }\n"
    "torch::Tensor f(torch::Tensor x) {\n"
    '  TORCH_CHECK(x.scalar_type() == torch::kFloat32, "float32 only");\n'
    "  auto y = torch::empty_like(x.contiguous());\n"
    "  auto z = at::zeros({x.size(0)}, x.options().dtype(torch::kFloat32));\n"
    "  fill<<<1, 32>>>(y.data_ptr<float>(), (int)y.numel());\n"
    "  return y.add(z.sum());\n"
    "}\n"
)


def test_lean_tier_includes_the_headers_of_the_ops_called_by_name():
    from maxcode.evaluate.cuda.build import _torch_include

    spec = ExtensionSpec.from_load_inline("m", "", cuda_sources=FACTORY_KERNEL)
    text = spec.lean_torch_cu(_torch_include())
    assert "#include <ATen/ops/empty_like.h>" in text and "#include <ATen/ops/zeros.h>" in text
    assert "torch/extension.h" not in text and "torch/types.h" not in text
    assert "ATen/ops/dtype.h" not in text  # torch::dtype is not an op with a header
    assert text.index("namespace torch") < text.index("__global__")


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
def test_kernel_using_torch_factories_compiles_against_aten_ops(cache):
    out = cache.build(ExtensionSpec.from_load_inline("m", "", cuda_sources=FACTORY_KERNEL))
    assert out.cuda_headers == "ATen ops"
    assert "cuda" in out.steps and out.failed_step != "cuda", out.first_error


@pytest.mark.integration  # nvcc parses the whole of torch/extension.h: minutes on 2 cores
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
def test_tensor_operators_fall_back_to_the_text_as_written(cache):
    """``a + b`` on tensors needs ATen's operator overloads (in the all-ops header)."""
    source = FACTORY_KERNEL.replace("return y.add(z.sum());", "return y + z.sum();")
    out = cache.build(ExtensionSpec.from_load_inline("m", "", cuda_sources=source))
    assert out.cuda_headers == "as written"
    assert "cuda" in out.steps and out.failed_step != "cuda", out.first_error


def test_code_compiled_against_aten_ops_links_and_runs_with_a_torch_binding(tmp_path):
    """The ABI assumption behind the tier: an object built from the "ATen ops" text (here
    host code, so it runs without a GPU) links with a binding built against
    torch/extension.h and computes the same as it would with torch's own headers."""
    import torch
    from torch.utils.cpp_extension import load

    from maxcode.evaluate.cuda.build import _torch_include

    lines = FACTORY_KERNEL.splitlines()
    kernel = next(line for line in lines if line.startswith("__global__"))
    body = "\n".join(line for line in lines if line != kernel).replace(
        "fill<<<1, 32>>>(y.data_ptr<float>(), (int)y.numel());",
        "for (long i = 0; i < y.numel(); ++i) y.data_ptr<float>()[i] = 2.f * x.data_ptr<float>()[i];",
    )
    spec = ExtensionSpec.from_load_inline("lean_abi", "", cuda_sources=body)
    text = spec.lean_torch_cu(_torch_include())
    assert "torch/types.h" not in text and "torch/extension.h" not in text
    (tmp_path / "kernel.cpp").write_text(
        text.replace("#include <cuda.h>\n#include <cuda_runtime.h>\n", "")
    )
    (tmp_path / "binding.cpp").write_text(
        "#include <torch/extension.h>\ntorch::Tensor f(torch::Tensor x);\n"
        'PYBIND11_MODULE(lean_abi, m) { m.def("f", &f); }\n'
    )
    module = load(
        name="lean_abi",
        sources=[str(tmp_path / "kernel.cpp"), str(tmp_path / "binding.cpp")],
        build_directory=str(tmp_path),
    )
    x = torch.arange(6, dtype=torch.float32)
    assert torch.equal(module.f(x), 2 * x)


def test_the_tier_a_cuda_source_reached_is_remembered_per_source(tmp_path):
    cache = BuildCache(tmp_path, "9.0", host_pch=False, light_cuda_headers=True, split_host=False)
    spec = ExtensionSpec.from_load_inline("m", "", cuda_sources=TORCH_KERNEL)
    other_binding = ExtensionSpec.from_load_inline("m", "int unused();", cuda_sources=TORCH_KERNEL)
    assert cache._cuda_tiers(spec)[0][0] == "ATen ops"
    cache._remember_tier(spec, "as written")
    assert [t for t, _ in cache._cuda_tiers(other_binding)] == ["as written"]
    changed = ExtensionSpec.from_load_inline("m", "", cuda_sources=TORCH_KERNEL + "\n// v2")
    assert cache._cuda_tiers(changed)[0][0] == "ATen ops"
