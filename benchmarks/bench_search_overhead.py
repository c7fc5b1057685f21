"""Search overhead per step: time the loop spends outside LLM calls and evaluations.

Runs the real loop (observation building, record writing with fsync, returns) with a
policy and evaluator that answer instantly, and compares the per-step overhead with
the cost of one real C++ evaluation measured in the same run.

    python benchmarks/bench_search_overhead.py [--depth 8] [--k 8]
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from pathlib import Path

from result_json import add_json_argument, headline, write_result

from maxcode.evaluate.result import EvalResult, Status, Timing
from maxcode.search.config import MethodConfig
from maxcode.search.loop import RunContext, run_search
from maxcode.search.types import Critique, Observation, Proposal
from maxcode.tasks.model import Task


class InstantPolicy:
    name, offline = "instant", True

    def propose(self, obs: Observation, k: int, rng: random.Random) -> list[Proposal]:
        body = "x" * 4000  # a realistic source size: records carry full sources
        return [Proposal(source=f"// {obs.step}.{i}.{rng.random()}\n{body}") for i in range(k)]


class InstantEvaluator:
    name = "instant"

    def evaluate(self, task: Task, source: str) -> EvalResult:
        return EvalResult(
            Status.OK, timing=Timing("wall", "s", 0.5 + random.random(), 1.0), evaluator="instant"
        )


class InstantCritic:
    name, offline = "instant", True

    def critique(self, task: Task, source: str, result: EvalResult) -> Critique:
        return Critique("memory-bound: fuse the loops", "instant", True)


def overhead_per_step(depth: int, k: int, repeats: int) -> list[float]:
    task = Task(task_id="t", suite="bench", language="cpp", reference_source="int main(){}")
    method = MethodConfig(name="full", depth=depth, k=k, trajectory="all", critique=True, best=True)
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(repeats):
            ctx = RunContext(task, method, r, InstantPolicy(), InstantEvaluator(), InstantCritic())
            start = time.perf_counter()
            run_search(ctx, Path(tmp) / f"run{r}.jsonl")
            out.append((time.perf_counter() - start) / depth)
    return out


def one_real_evaluation() -> float:
    from maxcode.evaluate.cpp import CppEvalConfig, CppEvaluator
    from maxcode.tasks.builtin import materialize_builtin_cpp

    with tempfile.TemporaryDirectory() as tmp:
        task = materialize_builtin_cpp(
            Path(tmp) / "suite", n_tests=3, problems=["io_prefix_sums_endl"]
        )[0]
        evaluator = CppEvaluator(CppEvalConfig(), Path(tmp) / "cache")
        evaluator.evaluate(task, task.reference_source)  # warm: reference timing and compiler
        variant = task.reference_source + "\n// variant\n"
        start = time.perf_counter()
        evaluator.evaluate(task, variant)
        return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--depth", type=int, default=8)
    ap.add_argument("--k", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=5)
    add_json_argument(ap, "search-overhead")
    args = ap.parse_args()
    per_step = overhead_per_step(args.depth, args.k, args.repeats)
    med = statistics.median(per_step)
    print(
        f"loop overhead per step (k={args.k}, full observation): median {med * 1e3:.2f} ms over {args.repeats} runs"
    )
    eval_s = one_real_evaluation()
    print(f"one real C++ evaluation (compile + tests + timing): {eval_s * 1e3:.1f} ms")
    print(f"overhead per step / one evaluation: {med / eval_s:.4f}")
    print(f"overhead per step / the step's {args.k} evaluations: {med / (args.k * eval_s):.5f}")
    figures = {"args": vars(args) | {"json": None}, "overhead_per_step_s": per_step}
    figures |= {"one_cpp_evaluation_s": eval_s}
    headlines = [
        headline(f"search loop overhead per step (k={args.k})", round(med * 1e3, 2), "ms"),
        headline("the same / the step's evaluations", round(med / (args.k * eval_s), 5)),
    ]
    print("wrote", write_result("search-overhead", figures, headlines, args.json))


if __name__ == "__main__":
    main()
