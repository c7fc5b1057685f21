"""Run KernelBench's own harness beside ours on the same candidates; compare verdicts and speedups.

KernelBench's code is never part of this project: point ``--kb-src`` at the ``src/``
folder of a checkout (github.com/ScalingIntelligence/KernelBench). Its LLM-client
imports (dotenv, openai, litellm) are stubbed because its evaluator does not use them.
KernelBench compiles with torch's ``load_inline``; as in its own scripts, builds are
pre-compiled in parallel CPU processes, then evaluated one after another on the GPU, each
in a fresh spawned process with KernelBench's 180 s limit (its ``batch_eval`` with one
GPU). One process for all would not do: torch renames a second extension of the same name
and different source (``name_v1``) and compiles it again, outside the pre-compiled cache.
"""

from __future__ import annotations

import argparse
import copy
import inspect
import json
import os
import statistics
import sys
import time
import types
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import TimeoutError as PoolTimeout
from multiprocessing import get_context
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from cuda_candidates import benchmark_set

from maxcode.evaluate.cuda import CudaEvalConfig, CudaEvaluator


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


def _import_kernelbench(kb_src: Path) -> types.ModuleType:
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
    for name, attrs in {
        "dotenv": {"load_dotenv": lambda *a, **k: None},
        "openai": {"OpenAI": object},
        "litellm": {"completion": None},
    }.items():
        if name not in sys.modules:
            stub = types.ModuleType(name)
            stub.__dict__.update(attrs)
            sys.modules[name] = stub
    sys.path.insert(0, str(kb_src))
    import kernelbench.eval as kbe

    return kbe


def _kb_precompile(args: tuple[str, str, str]) -> tuple[bool, str]:
    kb_src, source, build_dir = args
    kbe = _import_kernelbench(Path(kb_src))
    ok, _, err = kbe.build_compile_cache(source, False, build_dir)
    return ok, err or ""


def _ours_category(status: str) -> str:
    return {"ok": "correct", "wrong_answer": "incorrect", "compile_error": "compile_error"}.get(
        status, status
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--kb-src", type=Path, required=True)
    parser.add_argument("--variants", nargs="+", default=["fast", "slow", "wrong", "compile_error"])
    parser.add_argument(
        "--tasks", nargs="+", default=None, help="built-in task files (default: all templated)"
    )
    parser.add_argument("--work", type=Path, default=Path("/tmp/kb-compare"))
    parser.add_argument(
        "--ours-cache",
        type=Path,
        default=None,
        help="our build cache (default: cold, under --work)",
    )
    parser.add_argument("--json", type=Path, help="written after every candidate")
    parser.add_argument(
        "--budget-s",
        type=float,
        default=float("inf"),
        help="stop KernelBench's evaluations after this many seconds of the whole run",
    )
    args = parser.parse_args()
    start = time.monotonic()
    items = [(t, v, s) for t, v, s in benchmark_set(args.tasks) if v in args.variants]
    labels = [f"{t.metadata['file_name']}:{v}" for t, v, _ in items]
    print(f"{len(items)} candidates")

    t = time.monotonic()
    with CudaEvaluator(CudaEvalConfig(), args.ours_cache or args.work / "ours") as ev:
        ours = ev.evaluate_items([(task, src) for task, _, src in items])
    t_ours = time.monotonic() - t
    cache_state = "given build cache" if args.ours_cache else "cold build cache"
    print(f"ours: {t_ours:.1f} s total ({cache_state}, compile + evaluate)", flush=True)

    dirs = [str(args.work / "kb" / f"c{i}") for i in range(len(items))]
    t = time.monotonic()
    with ProcessPoolExecutor(os.cpu_count(), mp_context=get_context("spawn")) as pool:
        pre = list(
            pool.map(
                _kb_precompile,
                [(str(args.kb_src), src, d) for (_, _, src), d in zip(items, dirs, strict=True)],
            )
        )
    t_pre = time.monotonic() - t
    print(
        f"KernelBench: parallel pre-compile ({os.cpu_count()} processes) {t_pre:.1f} s", flush=True
    )

    summary = {"n": len(items), "t_ours": t_ours, "t_kb_precompile": t_pre, "rows": []}
    t = time.monotonic()
    for label, (task, _, src), d, (ok, err), o in zip(labels, items, dirs, pre, ours, strict=True):
        if time.monotonic() - start > args.budget_s:
            print(f"budget of {args.budget_s:.0f} s reached: KernelBench did not evaluate the rest")
            break
        t_one = time.monotonic()
        k = (
            _kb_verdict_in_fresh_process(str(args.kb_src), task.reference_source, src, d)
            if ok
            else {
                "category": "compile_error",
                "speedup": None,
                "detail": err[:200],
            }
        )
        summary["rows"].append(_compare_row(label, o, k) | {"kb_seconds": time.monotonic() - t_one})
        summary["t_kb_eval"] = time.monotonic() - t
        if args.json:  # after every candidate, so a run cut short keeps what it measured
            args.json.write_text(json.dumps(summary, indent=1))
    t_kb_eval = time.monotonic() - t
    summary["t_kb_eval"] = t_kb_eval
    if args.json:
        args.json.write_text(json.dumps(summary, indent=1))
    rows = summary["rows"]
    agree = sum(r["agree"] for r in rows)
    ratios = [r["ratio"] for r in rows if r["ratio"]]
    print(f"KernelBench: {t_kb_eval:.1f} s evaluation, one candidate after another")
    print(f"verdict agreement: {agree}/{len(rows)} (of {len(items)} candidates)")
    if ratios:
        print(
            f"speedup ratio ours/KB over {len(ratios)} correct candidates: median {statistics.median(ratios):.3f}, min {min(ratios):.3f}, max {max(ratios):.3f}"
        )
    if len(rows) == len(items):
        print(
            f"wall time for the same candidates: ours {t_ours:.1f} s vs KernelBench {t_pre + t_kb_eval:.1f} s ({(t_pre + t_kb_eval) / t_ours:.1f}x)"
        )


KB_TIMEOUT_S = 180  # KernelBench's own per-sample limit in eval_from_generations.py


def _kb_verdict_in_fresh_process(kb_src: str, reference: str, src: str, build_dir: str) -> dict:
    """KernelBench's verdict on one pre-compiled candidate, in a process of its own."""
    with get_context("spawn").Pool(1) as pool:
        job = pool.apply_async(_kb_verdict, (kb_src, reference, src, build_dir))
        try:
            return job.get(timeout=KB_TIMEOUT_S)
        except PoolTimeout:
            pool.terminate()
            return {"category": "timeout", "speedup": None, "detail": f"over {KB_TIMEOUT_S} s"}


def _kb_verdict(kb_src: str, reference: str, src: str, build_dir: str) -> dict:
    """KernelBench's verdict with its own settings (runs in the spawned process)."""
    import torch

    kbe = _import_kernelbench(Path(kb_src))
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
    if r is None or not r.compiled:
        detail = str(r.metadata if r else "None")[:200]
        return {"category": "compile_error", "speedup": None, "detail": detail}
    if not r.correctness:
        return {"category": "incorrect", "speedup": None, "detail": str(r.metadata)[:200]}
    ref_runtime = getattr(r, "ref_runtime", None)  # the older harness times no reference
    return {
        "category": "correct",
        "speedup": ref_runtime / r.runtime if ref_runtime else None,
        "runtime": r.runtime,
        "ref_runtime": ref_runtime,
        # KernelBench's runtime is the mean of its trials: min/max/std show what moved it.
        "runtime_stats": r.runtime_stats,
        "ref_runtime_stats": getattr(r, "ref_runtime_stats", None),
    }


def _compare_row(label: str, ours, kb: dict) -> dict:
    """One candidate's verdicts and speedups side by side, printed as it is made."""
    agree = _ours_category(ours.status.value) == kb["category"]
    ratio = ours.speedup / kb["speedup"] if ours.speedup and kb["speedup"] else None
    mark = "" if agree else "   <-- DISAGREE: " + (ours.reason or kb.get("detail", ""))[:120]
    ours_s = f"{ours.speedup:7.3f}" if ours.speedup else "      -"
    kb_s = f"{kb['speedup']:7.3f}" if kb["speedup"] else "      -"
    print(
        f"{label:36s} ours {ours.status.value:14s} {ours_s}   KB {kb['category']:13s} {kb_s}{mark}",
        flush=True,
    )
    return {
        "candidate": label,
        "ours": ours.status.value,
        "kernelbench": kb["category"],
        "ours_speedup": ours.speedup,
        "kb_speedup": kb["speedup"],
        "kb_runtime_ms": kb.get("runtime"),
        "kb_ref_runtime_ms": kb.get("ref_runtime"),
        "kb_runtime_stats": kb.get("runtime_stats"),
        "kb_ref_runtime_stats": kb.get("ref_runtime_stats"),
        "ratio": ratio,
        "agree": agree,
    }


if __name__ == "__main__":
    main()
