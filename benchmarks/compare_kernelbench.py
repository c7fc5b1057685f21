"""Run KernelBench's own harness beside ours on the same candidates; compare verdicts and speedups.

KernelBench's code is never part of this project: point ``--kb-src`` at the ``src/``
folder of a checkout (github.com/ScalingIntelligence/KernelBench). Its LLM-client
imports (dotenv, openai, litellm) are stubbed because its evaluator does not use them.
KernelBench compiles with torch's ``load_inline``; as in its own scripts, builds are
pre-compiled in parallel CPU processes, then evaluated one after another on the GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import types
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from cuda_candidates import benchmark_set

from maxcode.evaluate.cuda import CudaEvalConfig, CudaEvaluator


def _import_kernelbench(kb_src: Path) -> types.ModuleType:
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
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    items = [(t, v, s) for t, v, s in benchmark_set(args.tasks) if v in args.variants]
    labels = [f"{t.metadata['file_name']}:{v}" for t, v, _ in items]
    print(f"{len(items)} candidates")

    t = time.monotonic()
    with CudaEvaluator(CudaEvalConfig(), args.ours_cache or args.work / "ours") as ev:
        ours = ev.evaluate_items([(task, src) for task, _, src in items])
    t_ours = time.monotonic() - t
    cache_state = "given build cache" if args.ours_cache else "cold build cache"
    print(f"ours: {t_ours:.1f} s total ({cache_state}, compile + evaluate)")

    kbe = _import_kernelbench(args.kb_src)
    import torch

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
    t = time.monotonic()
    kb = []
    for (task, _, src), d, (ok, err) in zip(items, dirs, pre, strict=True):
        if not ok:
            kb.append({"category": "compile_error", "speedup": None, "detail": err[:200]})
            continue
        r = kbe.eval_kernel_against_ref(
            task.reference_source,
            src,
            seed_num=42,
            num_correct_trials=5,
            num_perf_trials=100,
            measure_performance=True,
            timing_method="cuda_event",
            build_dir=d,
            device=torch.device("cuda:0"),
            backend="cuda",
            precision=torch.float32,
            check_for_excessive_speedup=True,
        )
        if r is None or not r.compiled:
            kb.append(
                {
                    "category": "compile_error",
                    "speedup": None,
                    "detail": str(r.metadata if r else "None")[:200],
                }
            )
        elif not r.correctness:
            kb.append({"category": "incorrect", "speedup": None, "detail": str(r.metadata)[:200]})
        else:
            kb.append(
                {
                    "category": "correct",
                    "speedup": r.ref_runtime / r.runtime,
                    "runtime": r.runtime,
                    "ref_runtime": r.ref_runtime,
                }
            )
    t_kb_eval = time.monotonic() - t
    print(
        f"KernelBench: {t_pre:.1f} s parallel pre-compile ({os.cpu_count()} processes) + {t_kb_eval:.1f} s evaluation = {t_pre + t_kb_eval:.1f} s"
    )

    agree, ratios, rows = 0, [], []
    for label, o, k in zip(labels, ours, kb, strict=True):
        cat = _ours_category(o.status.value)
        agree += cat == k["category"]
        ratio = o.speedup / k["speedup"] if o.speedup and k["speedup"] else None
        if ratio:
            ratios.append(ratio)
        rows.append(
            {
                "candidate": label,
                "ours": o.status.value,
                "kernelbench": k["category"],
                "ours_speedup": o.speedup,
                "kb_speedup": k["speedup"],
                "ratio": ratio,
            }
        )
        mark = (
            ""
            if cat == k["category"]
            else "   <-- DISAGREE: " + (o.reason or k.get("detail", ""))[:120]
        )
        ours_s = f"{o.speedup:7.3f}" if o.speedup else "      -"
        kb_s = f"{k['speedup']:7.3f}" if k["speedup"] else "      -"
        print(
            f"{label:36s} ours {o.status.value:14s} {ours_s}   KB {k['category']:13s} {kb_s}{mark}"
        )
    print(f"verdict agreement: {agree}/{len(items)}")
    if ratios:
        print(
            f"speedup ratio ours/KB over {len(ratios)} correct candidates: median {statistics.median(ratios):.3f}, min {min(ratios):.3f}, max {max(ratios):.3f}"
        )
    print(
        f"wall time for the same candidates: ours {t_ours:.1f} s vs KernelBench {t_pre + t_kb_eval:.1f} s ({(t_pre + t_kb_eval) / t_ours:.1f}x)"
    )
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "rows": rows,
                    "agree": agree,
                    "n": len(items),
                    "t_ours": t_ours,
                    "t_kb_precompile": t_pre,
                    "t_kb_eval": t_kb_eval,
                },
                indent=1,
            )
        )


if __name__ == "__main__":
    main()
