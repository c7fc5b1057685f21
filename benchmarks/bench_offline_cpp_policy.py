"""The built-in C++ suite measured: slow vs trusted fast program, and what the offline policy finds.

For every problem: runtime per test of slow.cpp (the reference) and fast.cpp, measured by
the real C++ evaluator in the same run (wall clock, repeats interleaved, median); then a
full MaxCode search (trajectory + offline critique + best-so-far, --depth steps of --k
proposals) with the offline policy, every candidate evaluated the same way: which
transformation sets keep the output correct, and the best speedup over slow.cpp.

    python benchmarks/bench_offline_cpp_policy.py [--tests 5] [--repeats 3] [--depth 4] [--k 4] [--json out.json]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from result_json import add_json_argument, headline, write_result

from maxcode.critique.offline import OfflineCritic
from maxcode.evaluate.cpp import CppEvalConfig, CppEvaluator
from maxcode.policy.offline_cpp import OfflineCppPolicy
from maxcode.records import hardware_fingerprint, read_jsonl
from maxcode.search.config import MethodConfig
from maxcode.search.loop import RunContext, run_search
from maxcode.tasks.builtin import materialize_builtin_cpp


def measure(tests: int, repeats: int, depth: int, k: int, problems: list[str] | None) -> list[dict]:
    rows = []
    method = MethodConfig(
        name="traj-critique-best-perf", depth=depth, k=k, trajectory="all", critique=True, best=True
    )
    with tempfile.TemporaryDirectory(prefix="bench-offline-cpp-") as tmp:
        tasks = materialize_builtin_cpp(Path(tmp) / "suite", n_tests=tests, problems=problems)
        evaluator = CppEvaluator(
            CppEvalConfig(timing="wall", repeats=repeats, workers=1), Path(tmp) / "cache"
        )
        for task in tasks:
            start = time.perf_counter()
            fast = evaluator.evaluate(task, task.target_source or "")
            if fast.timing is None:
                raise RuntimeError(f"{task.task_id}: fast.cpp failed: {fast.reason}")
            out = Path(tmp) / f"{task.task_id}.jsonl"
            ctx = RunContext(task, method, 0, OfflineCppPolicy(), evaluator, OfflineCritic())
            end = run_search(ctx, out)
            executed = [r for r in read_jsonl(out) if r["kind"] == "candidate" and r["executed"]]
            found = [
                {
                    "step": r["step"],
                    "transformations": r["meta"]["transformations"],
                    "status": r["evaluation"]["status"],
                    "speedup": r["evaluation"]["speedup"],
                }
                for r in executed
            ]
            correct = [f for f in found if f["speedup"] is not None]
            best = max(correct, key=lambda f: f["speedup"], default=None)
            rows.append(
                {
                    "problem": task.task_id,
                    "slowness": task.metadata["slowness"],
                    "slow_ms_per_test": 1000 * fast.timing.reference / tests,
                    "fast_ms_per_test": 1000 * fast.timing.candidate / tests,
                    "fast_speedup": fast.speedup,
                    "spread": max(
                        fast.timing.candidate_spread or 0, fast.timing.reference_spread or 0
                    ),
                    "candidates": found,
                    "best": best,
                    "step_rewards": end["step_rewards"],
                    "seconds": time.perf_counter() - start,
                }
            )
            print_row(rows[-1], len(found), len(correct))
    return rows


def print_row(row: dict, proposed: int, correct: int) -> None:
    best = row["best"]
    best_text = (
        f"{'+'.join(best['transformations'])} {best['speedup']:.2f}x (step {best['step']})"
        if best
        else "(no transformation applies)"
    )
    print(
        f"{row['problem']:<24} {row['slowness']:<15} {row['slow_ms_per_test']:8.1f} "
        f"{row['fast_ms_per_test']:8.1f} {row['fast_speedup']:7.2f}x   {correct}/{proposed:<3}  {best_text}",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", type=int, default=5, help="tests per problem")
    parser.add_argument("--repeats", type=int, default=3, help="timing repeats per test")
    parser.add_argument("--depth", type=int, default=4, help="search steps")
    parser.add_argument("--k", type=int, default=4, help="proposals per step")
    parser.add_argument("--problems", nargs="*", help="problem ids (default: all)")
    add_json_argument(parser, "offline-cpp-policy")
    args = parser.parse_args()
    print(f"hardware: {hardware_fingerprint()}")
    print(
        f"{args.tests} tests per problem, {args.repeats} repeats, wall clock, g++ -O3 (evaluator flags)"
    )
    print(
        f"{'problem':<24} {'slowness':<15} {'slow ms':>8} {'fast ms':>8} {'fast/slow':>8}   "
        "correct/executed  best rewrite found by the search (speedup over slow.cpp)"
    )
    rows = measure(args.tests, args.repeats, args.depth, args.k, args.problems)
    found = [r for r in rows if r["best"] and r["best"]["speedup"] >= 1.2]
    print(
        f"policy reaches >= 1.2x on {len(found)}/{len(rows)} problems; "
        f"fast.cpp median speedup {sorted(r['fast_speedup'] for r in rows)[len(rows) // 2]:.2f}x"
    )
    headlines = [
        headline("problems where the offline policy reaches >= 1.2x", f"{len(found)}/{len(rows)}")
    ]
    print("wrote", write_result("offline-cpp-policy", {"rows": rows}, headlines, args.json))


if __name__ == "__main__":
    main()
