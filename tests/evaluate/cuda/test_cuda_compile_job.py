"""The compile stage end to end on the CPU: a real compile subprocess, the cache, the index."""

from __future__ import annotations

import os
import threading

import pytest

from maxcode.evaluate.cuda import CudaEvalConfig, CudaEvaluator
from maxcode.evaluate.cuda.build import BuildCache
from maxcode.evaluate.cuda.estimator import Estimator, gpu_memory_estimates_mb
from maxcode.evaluate.cuda.evaluator import COMPILE_NICENESS, _Job
from maxcode.evaluate.result import Status
from tests.fakes.small_pch import small_pch_headers  # noqa: F401

# CPython extensions without torch headers: they build in about a second.
EXT = r"""
#include <Python.h>
static PyObject* f(PyObject*, PyObject* a) {{ return PyLong_FromLong({factor} * PyLong_AsLong(a)); }}
static PyMethodDef m[] = {{{{"f", f, METH_O, ""}}, {{nullptr, nullptr, 0, nullptr}}}};
static struct PyModuleDef d = {{PyModuleDef_HEAD_INIT, "{name}", nullptr, -1, m}};
PyMODINIT_FUNC PyInit_{name}() {{ return PyModule_Create(&d); }}
"""

CANDIDATE = f'''
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

top = load_inline(name="top", cpp_sources=r"""{EXT.format(factor=2, name="top")}""", no_implicit_headers=True)


class ModelNew(nn.Module):
    def __init__(self, alpha):
        super().__init__()
        self.inner = load_inline(name="inner", cpp_sources=r"""{EXT.format(factor=3, name="inner")}""", no_implicit_headers=True)
'''


@pytest.fixture
def evaluator(tmp_path):
    with CudaEvaluator(CudaEvalConfig(cuda_arch="9.0", host_pch=False), tmp_path, gpus=[]) as made:
        yield made


def job(tmp_path, task, source, name="j"):
    return _Job(0, task, source, tmp_path / name)


def test_builds_at_import_and_in_init_happen_in_the_pool_and_are_indexed(
    evaluator, saxpy_task, tmp_path
):
    first = job(tmp_path, saxpy_task, CANDIDATE, "first")
    assert evaluator._compile(first) is True
    names = sorted(b["name"] for b in first.figures["builds"])
    assert names == ["inner", "top"]
    assert first.figures["build_cached"] is False and first.figures["compile_seconds"] > 0
    second = job(tmp_path, saxpy_task, CANDIDATE, "second")
    assert evaluator._compile(second) is True
    assert second.figures["build_cached"] is True
    assert sorted(b["name"] for b in second.figures["builds"]) == names


def test_compile_error_becomes_the_result(evaluator, saxpy_task, tmp_path):
    broken = CANDIDATE.replace("PyLong_FromLong(3", "PyLong_FromLong(undeclared_thing")
    j = job(tmp_path, saxpy_task, broken)
    assert evaluator._compile(j) is False
    assert j.result.status is Status.COMPILE_ERROR
    assert "inner" in j.result.reason and "undeclared_thing" in j.result.reason
    assert "undeclared_thing" in j.result.compile_log


def test_import_error_is_left_to_the_gpu_worker(evaluator, saxpy_task, tmp_path):
    j = job(tmp_path, saxpy_task, "raise RuntimeError('needs a GPU at import')\n")
    assert evaluator._compile(j) is True
    assert j.figures["builds"] == []
    assert not any((evaluator.cache_dir / "candidates").glob("*.json"))


def test_compile_job_runs_nicer_than_the_evaluator(evaluator, saxpy_task, tmp_path):
    """Builds beside a timing run must not take the GPU worker's core (the candidate's import
    runs in the compile job, so it sees the job's priority)."""
    probe = "import os, sys\nprint('niceness', os.nice(0), file=sys.stderr)\n"
    j = job(tmp_path, saxpy_task, probe)
    assert evaluator._compile(j) is True
    log = (j.job_dir / "compile_job.err").read_text()  # the sandboxed job cannot write its dir
    seen = int(log.split("niceness ", 1)[1].split()[0])
    assert seen == min(19, os.nice(0) + COMPILE_NICENESS)


def test_an_extension_that_cannot_be_loaded_for_an_undefined_symbol_is_a_compile_error(
    evaluator, saxpy_task, tmp_path
):
    """A function the binding declares but no source defines links into the .so and fails at
    load (qwencoder level 2 problem 58 on the H100; KernelBench marks it not compiled): the
    build is broken, so the verdict is compile_error from the compile stage, not a runtime
    error from the GPU worker."""
    declared_only = CANDIDATE.replace(
        "#include <Python.h>", "#include <Python.h>\nlong never_defined(long);"
    ).replace("PyLong_FromLong(3 *", "PyLong_FromLong(never_defined(3) *")
    j = job(tmp_path, saxpy_task, declared_only)
    assert evaluator._compile(j) is False
    assert j.result.status is Status.COMPILE_ERROR
    assert "extension 'inner' failed to build (link)" in j.result.reason
    assert "undefined symbol" in j.result.reason and "never_defined" in j.result.reason


def test_an_undefined_symbol_is_found_without_a_compile_job(evaluator, saxpy_task, tmp_path):
    """The same break in a candidate whose source shows every build: no compile job imports
    the extension, so the build itself finds the symbol that will not resolve at load."""
    written_out = CANDIDATE.split("class ModelNew")[0]
    declared_only = written_out.replace(
        "#include <Python.h>", "#include <Python.h>\nlong never_defined(long);"
    ).replace("PyLong_FromLong(2 *", "PyLong_FromLong(never_defined(2) *")
    j = job(tmp_path, saxpy_task, declared_only)
    assert evaluator._compile(j) is False
    assert not (j.job_dir / "compile_job.json").exists()
    assert j.result.status is Status.COMPILE_ERROR
    assert "extension 'top' failed to build (link)" in j.result.reason
    assert "undefined symbol _Z13never_definedl" in j.result.reason
    fine = job(tmp_path, saxpy_task, written_out, "fine")
    assert evaluator._compile(fine) is True
    assert "symbols" in fine.figures["builds"][0]["steps"]


FORGER = """
import gc, json
from maxcode.evaluate.cuda.compile_job import ParentBuilder
for obj in gc.get_objects():
    if isinstance(obj, ParentBuilder):  # a tiny task: admit me beside everything
        obj.requests.write(json.dumps({"estimate": [1.0, 1.0]}) + "\\n")
        obj.requests.flush()
"""


def test_a_tasks_memory_estimate_comes_from_the_estimator_once(
    evaluator, saxpy_task, tmp_path, monkeypatch
):
    """The estimate is made once per task, outside any compile job: a line the candidate
    sends on its build channel is not taken for it, and the task's next candidate waits for
    the same one."""
    (tmp_path / "reference.py").write_text(saxpy_task.reference_source)
    genuine = gpu_memory_estimates_mb(tmp_path / "reference.py")
    assert None not in genuine
    asked = []
    monkeypatch.setattr(Estimator, "ask", spy(Estimator.ask, asked))
    forger = job(tmp_path, saxpy_task, FORGER, "forger")
    assert evaluator._compile(forger) is True
    assert (forger.gpu_memory_mb, forger.reference_gpu_memory_mb) == pytest.approx(genuine)
    assert "shape estimate" not in forger.figures["compile_job_seconds"]
    second = job(tmp_path, saxpy_task, "x = 2\n", "second")
    assert evaluator._compile(second) is True
    assert (second.gpu_memory_mb, second.reference_gpu_memory_mb) == pytest.approx(genuine)
    assert len(asked) == 1


def spy(method, calls: list):
    def recorded(self, *args, **kwargs):
        calls.append(args)
        return method(self, *args, **kwargs)

    return recorded


def test_a_tasks_estimate_is_kept_for_the_next_evaluator(evaluator, saxpy_task, tmp_path):
    """A later evaluator on the same cache takes the task's estimate from disk and starts no
    estimator; a file that holds no estimate is ignored and the estimate is made again."""
    first = job(tmp_path, saxpy_task, "x = 1\n", "first")
    assert evaluator._compile(first) is True
    estimate = (first.gpu_memory_mb, first.reference_gpu_memory_mb)
    assert None not in estimate
    later = CudaEvaluator(CudaEvalConfig(cuda_arch="9.0", host_pch=False), tmp_path, gpus=[])
    second = job(tmp_path, saxpy_task, "x = 2\n", "second")
    assert later._compile(second)
    assert later._estimator is None
    assert (second.gpu_memory_mb, second.reference_gpu_memory_mb) == estimate
    [kept] = (tmp_path / "estimates").glob("*.json")
    kept.write_text('{"estimate": "not a pair"}')
    third = job(tmp_path, saxpy_task, "x = 3\n", "third")
    with CudaEvaluator(CudaEvalConfig(cuda_arch="9.0", host_pch=False), tmp_path, gpus=[]) as again:
        assert again._compile(third)
        assert again._estimator is not None
    assert (third.gpu_memory_mb, third.reference_gpu_memory_mb) == estimate


@pytest.mark.parametrize("ahead", [True, False])
def test_a_load_inline_written_out_is_built_before_the_compile_job_asks(
    saxpy_task, tmp_path, monkeypatch, ahead
):
    """``top`` is written out at the candidate's top level: with ``build_ahead`` it is built
    while the compile job starts, and the job's request is served that build (built once,
    its real time in the figures); ``inner`` is made in ``__init__``, built when asked."""
    built_by = []
    real_build = BuildCache.build

    def recording(self, spec, timeout_s=600.0):
        built_by.append((spec.name, threading.current_thread().name.startswith("maxcode-ahead")))
        return real_build(self, spec, timeout_s)

    monkeypatch.setattr(BuildCache, "build", recording)
    config = CudaEvalConfig(cuda_arch="9.0", host_pch=False, build_ahead=ahead)
    evaluator = CudaEvaluator(config, tmp_path / "cache", gpus=[])
    j = job(tmp_path, saxpy_task, CANDIDATE)
    assert evaluator._compile(j) is True
    assert sorted(built_by) == [("inner", False), ("top", ahead)]
    assert all(not b["cached"] and b["seconds"] > 0 for b in j.figures["builds"])
    # the job's parts are what it waited for, not what a build started ahead of it took
    parts = j.figures["compile_job_seconds"]
    assert all(secs >= 0 for secs in parts.values()), parts
    assert sum(parts.values()) == pytest.approx(j.figures["compile_wall_seconds"], abs=0.01)


def test_a_candidate_whose_source_shows_every_build_runs_no_compile_job(
    evaluator, saxpy_task, tmp_path
):
    """Every build it can ask for is written out: the builds are made from its source, no
    sandboxed Python starts for it, not even for its task's first candidate (the estimator
    makes the task's estimate)."""
    written_out = CANDIDATE.split("class ModelNew")[0]
    first = job(tmp_path, saxpy_task, written_out, "first")
    assert evaluator._compile(first) is True
    assert not (first.job_dir / "compile_job.json").exists()
    assert [b["name"] for b in first.figures["builds"]] == ["top"]
    assert len(first.prebuilt) == 1 and first.figures["builds"][0]["ok"]
    (tmp_path / "reference.py").write_text(saxpy_task.reference_source)
    assert (first.gpu_memory_mb, first.reference_gpu_memory_mb) == pytest.approx(
        gpu_memory_estimates_mb(tmp_path / "reference.py")
    )


@pytest.mark.usefixtures("small_pch_headers")
def test_prepare_build_cache_builds_the_headers_before_any_candidate(tmp_path, monkeypatch):
    """A rollout and ``optimize`` prepare the cache as they build the evaluator, so the
    headers build while the LLM writes the first candidates (a small header stands in for
    torch's). Without a GPU it does nothing: the first evaluation says what is missing."""
    from maxcode.evaluate.cuda import evaluator as evaluator_module
    from maxcode.evaluate.cuda.build import (
        HOST_CORE,
        HOST_FULL,
        ExtensionSpec,
        torch_flags,
    )

    with CudaEvaluator(CudaEvalConfig(cuda_arch="9.0"), tmp_path / "gpu", gpus=[]) as made:
        seconds = made.prepare_build_cache(wait=True)
        first = made.pch_first_seconds
        cache = made._build_cache()
    flags = torch_flags(ExtensionSpec.from_load_inline("m", "", cuda_sources="// none"), "9.0")
    assert seconds is not None and first is not None and 0 < first <= seconds
    assert all(cache._pch_ready(flags, h) for h in (HOST_CORE, HOST_FULL))
    monkeypatch.setattr(evaluator_module, "detect_cuda_arch", lambda: "")
    with CudaEvaluator(CudaEvalConfig(), tmp_path / "none", gpus=[]) as no_gpu:
        assert no_gpu.prepare_build_cache(wait=True) is None
        assert no_gpu._pch_ahead is None
