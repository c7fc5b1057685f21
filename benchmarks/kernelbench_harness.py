"""KernelBench's own harness, run beside ours: imported from a checkout the user gives, never part
of this project (``--kb-src``: the ``src/`` folder of github.com/ScalingIntelligence/KernelBench).

Its LLM-client imports (dotenv, openai, litellm, together, google.generativeai, anthropic) get
stand-ins where they are not installed, because its evaluator does not use them. KernelBench
compiles with torch's ``load_inline``; as in its own scripts, builds are
pre-compiled in parallel CPU processes (``precompile``), then evaluated on the GPU, each in a
fresh spawned process with KernelBench's 180 s limit (``verdict_in_fresh_process``, its
``batch_eval`` with one GPU: one after another, unless the caller runs several at once). One process for all would not do: torch renames a second
extension of the same name and different source (``name_v1``) and compiles it again, outside the
pre-compiled cache.
"""

from __future__ import annotations

import copy
import importlib.util
import inspect
import sys
import types
from multiprocessing import TimeoutError as PoolTimeout
from multiprocessing import get_context
from pathlib import Path

from maxcode.runs.kernelbench_format import kernelbench_label


class _RecordStandIn:
    """pydantic.BaseModel's part KernelBench uses (``KernelExecResult(**fields)``, class defaults
    copied per instance), for machines without pydantic: a record type, no evaluation logic."""

    def __init__(self, **values: object):
        for cls in reversed(type(self).__mro__):
            for name in getattr(cls, "__annotations__", {}):
                if hasattr(cls, name):
                    setattr(self, name, copy.deepcopy(getattr(cls, name)))
        for name, value in values.items():
            setattr(self, name, value)


LLM_CLIENTS = {
    "dotenv": {"load_dotenv": lambda *a, **k: None},
    "openai": {"OpenAI": object},
    "litellm": {"completion": None},
    "together": {"Together": object},
    "google.generativeai": {},
    "anthropic": {},
}
"""The LLM clients KernelBench's modules import (its utils.py, in the labels' version) and its
evaluator never calls: stand-ins, so the harness imports where they are not installed (an
installed one is imported as it is, so this process's own clients stay real)."""


def _installed(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # its parent package is missing
        return False


def import_kernelbench(kb_src: Path) -> types.ModuleType:
    try:
        import pydantic  # noqa: F401
    except ImportError:
        print(
            "pydantic is not installed: KernelBench's KernelExecResult is built on a plain record "
            "class instead (no evaluation logic is replaced)",
            file=sys.stderr,
        )
        stub = types.ModuleType("pydantic")
        stub.BaseModel = _RecordStandIn  # type: ignore[attr-defined]
        sys.modules["pydantic"] = stub
    for name, attrs in LLM_CLIENTS.items():
        if name not in sys.modules and not _installed(name):
            stub = types.ModuleType(name)
            stub.__dict__.update(attrs)
            sys.modules[name] = stub
    if not _installed("google"):  # google.generativeai's namespace package
        sys.modules["google"] = types.ModuleType("google")
    sys.path.insert(0, str(kb_src))
    import kernelbench.eval as kbe

    return kbe


def precompile(args: tuple[str, str, str]) -> tuple[bool, str]:
    kb_src, source, build_dir = args
    kbe = import_kernelbench(Path(kb_src))
    ok, _, err = kbe.build_compile_cache(source, False, build_dir)
    return ok, err or ""


KB_TIMEOUT_S = 180  # KernelBench's own per-sample limit in eval_from_generations.py


def verdict_in_fresh_process(kb_src: str, reference: str, src: str, build_dir: str) -> dict:
    """KernelBench's verdict on one pre-compiled candidate, in a process of its own."""
    with get_context("spawn").Pool(1) as pool:
        job = pool.apply_async(verdict, (kb_src, reference, src, build_dir))
        try:
            return job.get(timeout=KB_TIMEOUT_S)
        except PoolTimeout:
            pool.terminate()
            return {"category": "timeout", "speedup": None, "detail": f"over {KB_TIMEOUT_S} s"}


def verdict(kb_src: str, reference: str, src: str, build_dir: str) -> dict:
    """KernelBench's verdict with its own settings (runs in the spawned process)."""
    import torch

    kbe = import_kernelbench(Path(kb_src))
    settings = {
        "seed_num": 42,
        "num_correct_trials": 5,
        "num_perf_trials": 100,
        "measure_performance": True,
        "timing_method": "cuda_event",
        "build_dir": build_dir,
        "device": torch.device("cuda:0"),
        "backend": "cuda",
        "precision": torch.float32,
        "check_for_excessive_speedup": True,
    }
    # the labels' older harness (src/eval.py of the run) takes only some of them
    accepted = inspect.signature(kbe.eval_kernel_against_ref).parameters
    r = kbe.eval_kernel_against_ref(
        reference, src, **{k: v for k, v in settings.items() if k in accepted}
    )
    if r is None:
        return {"category": "compile_error", "speedup": None, "detail": "None"}
    # the same rules as the published labels: a runtime or CUDA error is a runtime_error even
    # where KernelBench files it as an incorrect result
    label = kernelbench_label(
        {"compiled": r.compiled, "correctness": r.correctness, "metadata": r.metadata or {}},
        harness="KernelBench here",
    )
    if label.verdict != "ok":
        detail = label.error or str(r.metadata)
        return {"category": label.verdict, "speedup": None, "detail": detail[:200]}
    ref_runtime = getattr(r, "ref_runtime", None)  # the older harness times no reference
    return {
        "category": "ok",
        "speedup": ref_runtime / r.runtime if ref_runtime else None,
        "runtime": r.runtime,
        "ref_runtime": ref_runtime,
        # KernelBench's runtime is the mean of its trials: min/max/std show what moved it.
        "runtime_stats": r.runtime_stats,
        "ref_runtime_stats": getattr(r, "ref_runtime_stats", None),
    }
