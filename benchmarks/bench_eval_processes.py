"""Several ``maxcode eval cuda`` processes sharing one GPU, against one at a time.

Each candidate file gets its own ``maxcode eval cuda --json`` process against ``--task``:
first ``--processes`` at once (a pool, the next candidate starting as one ends), then one
process at a time. Both passes share one build cache (``--cache-dir``; a cache with the
candidates built already saves the compile time) and each pass measures the task's
reference afresh (the cache's ``references/`` is removed before it). Prints per candidate the
verdict and speedup over eager of both passes and their ratio, and whether every verdict is
the same; ``--json`` keeps every figure.

    python3 benchmarks/bench_eval_processes.py --task TASK.py --cache-dir DIR CANDIDATE.py ...
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from result_json import add_json_argument, headline, json_path, write_result

BENCHMARK = "cuda-eval-processes"


def evaluate(candidate: Path, task: Path, cache_dir: Path, tf32: str) -> dict[str, Any]:
    """One ``maxcode eval cuda`` process: its verdict, speedup and wall seconds."""
    t0 = time.monotonic()
    argv = [sys.executable, "-m", "maxcode", "eval", "cuda", str(candidate), "--task", str(task)]
    proc = subprocess.run(
        [*argv, "--cache-dir", str(cache_dir), "--tf32", tf32, "--json"],
        capture_output=True,
        text=True,
    )
    seconds = round(time.monotonic() - t0, 2)
    try:
        record = json.loads(proc.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        return {
            "status": f"exit {proc.returncode}",
            "reason": proc.stderr[-300:],
            "seconds": seconds,
        }
    figures = record.get("figures", {})
    print(f"  {candidate.stem}: {record['status']} in {seconds} s", flush=True)
    return {
        "status": record["status"],
        "failed_check": record.get("failed_check"),
        "reason": record["reason"][:300],
        "speedup": record.get("speedup_vs_eager"),
        "paused_seconds": figures.get("paused_seconds"),
        "tf32": figures.get("tf32"),
        "seconds": seconds,
    }


def run_pass(candidates: list[Path], args: argparse.Namespace, processes: int) -> list[dict]:
    shutil.rmtree(args.cache_dir / "references", ignore_errors=True)
    t0 = time.monotonic()
    with ThreadPoolExecutor(processes) as pool:
        rows = list(
            pool.map(lambda c: evaluate(c, args.task, args.cache_dir, args.tf32), candidates)
        )
    print(f"{processes} process(es) at a time: {time.monotonic() - t0:.1f} s", flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("candidates", type=Path, nargs="+", help="candidate .py files")
    parser.add_argument("--task", type=Path, required=True, help="the problem .py they solve")
    parser.add_argument("--cache-dir", type=Path, required=True, help="build cache, shared")
    parser.add_argument("--processes", type=int, default=4, help="processes side by side")
    parser.add_argument("--tf32", default="torch-default", choices=("torch-default", "off"))
    add_json_argument(parser, BENCHMARK)
    args = parser.parse_args(argv)
    for path in [args.task, *args.candidates]:
        if not path.is_file():
            print(f"{path}: no such file", file=sys.stderr)
            return 2
    # side by side first: that pass also fills the build cache, so neither pass times a build
    shared = run_pass(args.candidates, args, args.processes)
    solo = run_pass(args.candidates, args, 1)
    print(f"tf32: {args.tf32}; task {args.task.name}; {args.processes} processes side by side")
    print(f"{'candidate':18s} {'alone':28s} {'side by side':28s} speedup ratio")
    same, ratios = 0, []
    for path, a, b in zip(args.candidates, solo, shared, strict=True):
        va = f"{a['status']} {a.get('failed_check') or ''}".strip()
        vb = f"{b['status']} {b.get('failed_check') or ''}".strip()
        same += va == vb
        ratio = b["speedup"] / a["speedup"] if a.get("speedup") and b.get("speedup") else None
        if ratio is not None:
            ratios.append(ratio)
        sa, sb = (f"{r['speedup']:.3f}x" if r.get("speedup") else "" for r in (a, b))
        shown = f"{ratio:.3f}" if ratio is not None else ""
        print(f"{path.stem:18s} {va + ' ' + sa:28s} {vb + ' ' + sb:28s} {shown}")
    worst = max((abs(r - 1) for r in ratios), default=0.0)
    print(
        f"same verdict: {same}/{len(solo)}; speedup side by side / alone: {len(ratios)} correct, "
        f"largest difference {100 * worst:.1f}%"
    )
    data = {
        "task": str(args.task),
        "tf32": args.tf32,
        "processes": args.processes,
        "alone": dict(zip([c.stem for c in args.candidates], solo, strict=True)),
        "side_by_side": dict(zip([c.stem for c in args.candidates], shared, strict=True)),
        "same_verdicts": same,
        "largest_speedup_difference": round(worst, 4),
    }
    headlines = [
        headline(
            f"same verdicts, {args.processes} processes vs one at a time", f"{same}/{len(solo)}"
        ),
        headline("largest speedup difference, side by side / alone", round(100 * worst, 2), "%"),
    ]
    write_result(BENCHMARK, data, headlines, json_path(args.json, BENCHMARK))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
