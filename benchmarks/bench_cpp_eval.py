"""C++ evaluator costs and agreement, every number measured in this run.

Prints: sandbox overhead per run against a bare ``subprocess`` run of the same binary
(target: under 5 ms), evaluations per minute with 1 and 2 workers (scaling), the cost of
each timing mode per test case, and Spearman's rho of ``instructions`` and ``cachegrind``
against ``wall`` (elapsed) and against the CPU time of the same wall-mode runs (programs
ranked by cost, and tasks ranked by speedup) on the built-in suite's slow/fast programs.
Run it with ``nice`` on a machine as quiet as you have; it prints the load average it saw.

    PYTHONPATH=src nice python benchmarks/bench_cpp_eval.py [--runs 200] [--tests 3] \
        [--json out.json]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from result_json import add_json_argument, headline, write_result
from scipy.stats import spearmanr

from maxcode.evaluate.compile import Compiler
from maxcode.evaluate.cpp import CppEvalConfig, CppEvaluator
from maxcode.evaluate.result import Status
from maxcode.evaluate.sandbox import Limits, Sandbox
from maxcode.records import provenance
from maxcode.tasks.builtin import materialize_builtin_cpp
from maxcode.tasks.model import Task
from maxcode.tasks.pie import load_pie_records

TRIVIAL = '#include <cstdio>\nint main() { int x; if (scanf("%d", &x) == 1) printf("%d\\n", x); }\n'


def sandbox_overhead(cache: Path, runs: int) -> dict:
    """Median wall time per run, bare subprocess vs sandbox, same binary, same input."""
    binary = Compiler(cache).compile(TRIVIAL).binary
    sandbox = Sandbox(cache)
    with tempfile.NamedTemporaryFile("w", suffix=".txt") as inp:
        inp.write("7\n")
        inp.flush()
        bare, boxed = [], []
        for _ in range(runs):  # interleaved so machine load hits both alike
            t = time.perf_counter()
            with open(inp.name) as f:
                subprocess.run([str(binary)], stdin=f, capture_output=True, check=True)
            bare.append(time.perf_counter() - t)
            t = time.perf_counter()
            out = sandbox.run(
                [Sandbox.PROGRAM], Limits(), stdin_path=Path(inp.name), copy_program=binary
            )
            boxed.append(time.perf_counter() - t)
            assert out.stdout == b"7\n", out
    b, s = statistics.median(bare) * 1e3, statistics.median(boxed) * 1e3
    b10, s10 = (statistics.quantiles(x, n=10)[0] * 1e3 for x in (bare, boxed))
    return {
        "runs": runs,
        "bare_ms": b,
        "sandbox_ms": s,
        "overhead_ms": s - b,
        "ratio": s / b,
        "bare_p10_ms": b10,
        "sandbox_p10_ms": s10,
        "overhead_p10_ms": s10 - b10,
        "isolation": sandbox.isolation,
    }


def throughput(tasks: list[Task], cache: Path, mode: str, workers: int) -> dict:
    """Evaluations per minute over (task, fast program) pairs, compile cache warm."""
    ev = CppEvaluator(CppEvalConfig(timing=mode, repeats=3, workers=workers), cache)
    pairs = [(t, t.target_source) for t in tasks]
    for t, s in pairs:  # warm compile cache and reference checks: measure evaluation only
        ev.evaluate(t, s)
    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        results = list(pool.map(lambda p: ev.evaluate(*p), pairs))
    seconds = time.perf_counter() - start
    assert all(r.status is Status.OK for r in results), [r.reason for r in results]
    return {
        "mode": mode,
        "workers": workers,
        "evaluations": len(pairs),
        "seconds": seconds,
        "per_minute": 60 * len(pairs) / seconds,
    }


def mode_costs(tasks: list[Task], cache: Path) -> tuple[dict, dict]:
    """Seconds per test case of one candidate evaluation per mode (reference cache warm),
    plus per-task candidate/reference costs for the rank agreement."""
    costs, measured = {}, {}
    for mode in ("wall", "instructions", "cachegrind"):
        ev = CppEvaluator(CppEvalConfig(timing=mode, repeats=5), cache)
        for t in tasks:  # warm: compile, reference check, deterministic reference counts
            ev.evaluate(t, t.target_source)
        n_tests = sum(len(t.tests()) for t in tasks)
        start = time.perf_counter()
        rows = {t.task_id: ev.evaluate(t, t.target_source) for t in tasks}
        costs[mode] = (time.perf_counter() - start) / n_tests
        measured[mode] = {k: (r.timing.candidate, r.timing.reference) for k, r in rows.items()}
        if mode == "wall":
            measured["cpu_time"] = {
                k: (r.figures["cpu_time_s"]["candidate"], r.figures["cpu_time_s"]["reference"])
                for k, r in rows.items()
            }
    return costs, measured


def agreement(measured: dict) -> dict:
    """Spearman's rho of each deterministic mode against elapsed (wall) and CPU time."""
    ids = sorted(measured["wall"])
    out = {}
    for name in ("instructions", "cachegrind"):
        for base in ("wall", "cpu_time"):
            a, b = measured[base], measured[name]
            out[f"{name}_vs_{base}"] = {
                "programs_rho": spearmanr(
                    [x for k in ids for x in a[k]], [x for k in ids for x in b[k]]
                ).statistic,
                "speedups_rho": spearmanr(
                    [a[k][1] / a[k][0] for k in ids], [b[k][1] / b[k][0] for k in ids]
                ).statistic,
                "n_programs": 2 * len(ids),
                "n_tasks": len(ids),
                # the search's own question: is the candidate faster than the reference?
                "pair_order_agreement": sum((a[k][0] < a[k][1]) == (b[k][0] < b[k][1]) for k in ids)
                / len(ids),
            }
    out["speedups"] = {k: {m: measured[m][k][1] / measured[m][k][0] for m in measured} for k in ids}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=200, help="runs for the overhead measurement")
    ap.add_argument("--tests", type=int, default=3, help="tests per built-in problem")
    add_json_argument(ap, "cpp-eval")
    args = ap.parse_args()
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="bench-cpp-eval-") as tmp:
        cache = Path(tmp) / "cache"
        materialize_builtin_cpp(Path(tmp) / "suite", n_tests=args.tests)
        tasks = load_pie_records(
            Path(tmp) / "suite/records.jsonl", Path(tmp) / "suite/tests", "cpp_builtin"
        )
        t = time.perf_counter()
        Compiler(cache).compile_many(
            [s for x in tasks for s in (x.reference_source, x.target_source)], 2
        )
        compile_s = (time.perf_counter() - t) / (2 * len(tasks))
        overhead = sandbox_overhead(cache, args.runs)
        # 1 and 2 workers alternated twice, so drifting machine load hits both alike
        scale = {
            mode: [throughput(tasks, cache, mode, w) for w in (1, 2, 1, 2)]
            for mode in ("instructions", "wall")
        }
        rates = {
            mode: {
                w: statistics.mean(r["per_minute"] for r in runs if r["workers"] == w)
                for w in (1, 2)
            }
            for mode, runs in scale.items()
        }
        costs, measured = mode_costs(tasks, cache)
        agree = agreement(measured)
    figures = {
        "sandbox": overhead,
        "compile_s_per_program_2_workers": compile_s,
        "throughput_runs": scale,
        "evaluations_per_minute": rates,
        "scaling_1_to_2": {mode: r[2] / r[1] for mode, r in rates.items()},
        "seconds_per_test_case": costs,
        "mode_cost_vs_wall": {m: c / costs["wall"] for m, c in costs.items()},
        "agreement_with_wall": agree,
        "load_average_before_after": [load_before, os.getloadavg()],
        "provenance": provenance({"runs": args.runs, "tests": args.tests}),
    }
    print(f"machine: {figures['provenance']['hardware']}")
    print(f"load average before {load_before[0]:.2f}, after {os.getloadavg()[0]:.2f}")
    print(f"isolation: {overhead['isolation']}")
    print(
        f"sandbox overhead: bare {overhead['bare_ms']:.2f} ms, sandbox {overhead['sandbox_ms']:.2f} ms "
        f"per run -> +{overhead['overhead_ms']:.2f} ms ({overhead['ratio']:.2f}x) "
        f"[target < 5 ms: {'met' if overhead['overhead_ms'] < 5 else 'MISSED'}]"
    )
    print(
        f"  10th percentile (least disturbed runs): bare {overhead['bare_p10_ms']:.2f} ms, "
        f"sandbox {overhead['sandbox_p10_ms']:.2f} ms -> +{overhead['overhead_p10_ms']:.2f} ms"
    )
    print(f"compile: {compile_s:.2f} s per program (g++ -O3, 2 parallel)")
    for mode, r in rates.items():
        print(
            f"throughput ({mode}, {args.tests} tests, 3 repeats in wall): {r[1]:.1f} evaluations/min "
            f"with 1 worker, {r[2]:.1f} with 2 -> scaling {r[2] / r[1]:.2f}x"
        )
    for m, c in costs.items():
        print(
            f"timing mode {m:>12}: {c * 1e3:8.1f} ms per test case ({c / costs['wall']:.2f}x wall)"
        )
    for key, a in agree.items():
        if key != "speedups":
            print(
                f"Spearman rho {key}: programs by cost {a['programs_rho']:.3f} "
                f"(n={a['n_programs']}), tasks by speedup {a['speedups_rho']:.3f} (n={a['n_tasks']}), "
                f"faster-than-reference agreement {a['pair_order_agreement']:.0%}"
            )
    print("per-task speedups:      wall  cpu_time  instructions  cachegrind")
    for k, v in agree["speedups"].items():
        print(
            f"  {k:24s} {v['wall']:7.2f} {v['cpu_time']:9.2f} {v['instructions']:13.2f}"
            f" {v['cachegrind']:11.2f}"
        )
    headlines = [
        headline("sandbox overhead per run", round(overhead["overhead_ms"], 2), "ms"),
        *(headline(f"cost per test case, {m}", round(c * 1e3, 1), "ms") for m, c in costs.items()),
    ]
    print("wrote", write_result("cpp-eval", figures, headlines, args.json))


if __name__ == "__main__":
    main()
