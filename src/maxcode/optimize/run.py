"""`maxcode optimize`: one target, the same loop, evaluators and critics as the pipeline."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from maxcode.evaluate.result import Status
from maxcode.optimize.live import LiveView
from maxcode.optimize.report import write_report
from maxcode.optimize.target import TargetError, cpp_task, cuda_task, detect_kind
from maxcode.records import atomic_write_text, provenance, read_jsonl
from maxcode.search.config import Budget, MethodConfig
from maxcode.search.loop import RunContext, run_search

METHODS = ("maxcode", "cuda-llm", "effi-learner", "best-of-n")
KEY_ENV = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}


@dataclass
class OptimizeOptions:
    target: Path
    out: Path
    kind: str | None = None
    method: str = "maxcode"
    llm: str | None = None  # BACKEND:MODEL
    base_url: str | None = None
    depth: int = 4
    k: int = 4
    budget_evals: int | None = None
    budget_usd: float | None = None
    tests: Path | None = None
    make_tests: int | None = None
    r2g_model: Path | None = None
    resume: bool = False
    seed: int = 0
    timing: str = "wall"


def method_config(opts: OptimizeOptions) -> MethodConfig:
    """The pipeline's method configurations, sized by the command line."""
    budget = Budget(max_evaluations=opts.budget_evals, max_cost_usd=opts.budget_usd)
    common = {"name": opts.method, "depth": opts.depth, "k": opts.k, "budget": budget}
    if opts.method == "maxcode":
        rerank = {"rerank": "model", "execute_top_m": max(1, opts.k // 4)} if opts.r2g_model else {}
        return MethodConfig(**common, trajectory="all", critique=True, best=True, **rerank)
    if opts.method == "cuda-llm":
        return MethodConfig(**common, trajectory="best_per_step")
    if opts.method == "effi-learner":
        return MethodConfig(**common, trajectory="last", profile=True)
    if opts.method == "best-of-n":
        return MethodConfig(**{**common, "depth": 1, "k": opts.depth * opts.k}, trajectory="none")
    raise TargetError(f"--method {opts.method!r}: choose one of {list(METHODS)}")


def role_config(opts: OptimizeOptions) -> dict:
    if opts.llm is None:
        return {"backend": "offline"}
    backend, _, model = opts.llm.partition(":")
    if not model:
        raise TargetError(f"--llm {opts.llm!r}: write BACKEND:MODEL, e.g. openai:gpt-4o")
    env = KEY_ENV.get(backend)
    if env and not os.environ.get(env) and not opts.base_url:
        raise TargetError(f"--llm {opts.llm}: set {env} in the environment (nothing was spent)")
    role = {"backend": backend, "model": model}
    if opts.base_url:
        role["base_url"] = opts.base_url
    return role


def optimize(opts: OptimizeOptions, console: Console | None = None) -> dict:
    """Run (or resume) the search; write best file, run.jsonl and report.html into ``out``."""
    from maxcode.evaluate.cpp import CppEvalConfig
    from maxcode.params import EvaluationParams
    from maxcode.roles import build_critic, build_evaluator, build_policy

    console = console or Console(stderr=True)
    kind = detect_kind(opts.target, opts.kind)
    run_path = opts.out / "run.jsonl"
    if run_path.exists() and not opts.resume:
        raise TargetError(
            f"{run_path} exists: pass --resume to continue it, or choose another --out"
        )
    method = method_config(opts)
    role = role_config(opts)
    opts.out.mkdir(parents=True, exist_ok=True)
    cache = opts.out / ".cache"
    evaluation = EvaluationParams(cpp=CppEvalConfig(timing=opts.timing))
    if kind == "cpp":
        evaluator = build_evaluator("cpp", evaluation, cache, profile=method.profile)
        task = cpp_task(opts.target, opts.tests, opts.make_tests, opts.out, _program_runner(cache))
        baseline = evaluator.evaluate(task, task.reference_source)
        if baseline.status is not Status.OK:
            raise TargetError(
                f"{opts.target}: the program as given fails its own tests ({baseline.status.value}: "
                f"{baseline.reason}); fix it or its tests first"
            )
    else:
        task = cuda_task(opts.target)
        _require_gpu()
        evaluator = build_evaluator("cuda", evaluation, cache, profile=method.profile)
    policy = build_policy(role, task.language, cache)
    console.print(
        f"policy: {policy.name}"
        + (
            " (offline: no LLM configured; "
            + (
                "C++ source transformations"
                if kind == "cpp"
                else "CUDA kernel templates and tuning"
            )
            + ", not an LLM)"
            if policy.offline
            else ""
        )
    )
    reranker = None
    if method.rerank == "model":
        from maxcode.r2g.reranker import load_reranker

        reranker = load_reranker(opts.r2g_model)
    critic_role = role if opts.llm else {"backend": "offline"}
    view = LiveView(method, console)
    ctx = RunContext(
        task=task,
        method=method,
        seed=opts.seed,
        policy=policy,
        evaluator=evaluator,
        critic=build_critic(critic_role, task.language, cache) if method.critique else None,
        reranker=reranker,
        provenance=provenance({"optimize": {k: str(v) for k, v in vars(opts).items()}}),
        on_event=view.handle,
    )
    with view:
        end = run_search(ctx, run_path)
    return _publish(opts, task, end, kind, policy)


def _publish(opts: OptimizeOptions, task, end: dict, kind: str, policy) -> dict:
    records = list(read_jsonl(opts.out / "run.jsonl"))
    best = next(
        (
            r
            for r in records
            if r["kind"] == "candidate" and r["candidate_id"] == end["best_candidate_id"]
        ),
        None,
    )
    suffix = opts.target.suffix
    best_path = opts.out / f"best{suffix}"
    atomic_write_text(best_path, best["source"] if best else task.reference_source)
    summary = _summary(end, best, best_path)
    header = {
        "target": str(opts.target),
        "kind": kind,
        "method": opts.method,
        "policy": policy.name + (" (offline)" if policy.offline else ""),
        "depth x k": f"{opts.depth} x {opts.k}",
    }
    write_report(
        opts.out / "report.html", records, task.reference_source, opts.target.name, header, summary
    )
    return {
        "summary": summary,
        "best_reward": end["best_reward"],
        "best_path": str(best_path),
        **end,
    }


def _summary(end: dict, best: dict | None, best_path: Path) -> str:
    usage = end["usage"]
    cost = (
        f"{end['evaluations']} evaluations, {usage['calls']} LLM calls, "
        f"{usage['input_tokens'] + usage['output_tokens']} tokens, ${usage['cost_usd']:.4f}"
    )
    if best is None:
        return f"No correct candidate was found ({cost}); {best_path} is the original, unchanged."
    timing = best["evaluation"]["timing"] or {}
    spreads = [
        s for s in (timing.get("candidate_spread"), timing.get("reference_spread")) if s is not None
    ]
    confidence = (
        f"timing spread (relative IQR over {timing.get('repeats', 1)} repeats) up to {max(spreads) * 100:.1f}%"
        if spreads
        else f"{timing.get('mode', '?')} timing, deterministic"
        if timing.get("mode") in ("instructions", "cachegrind")
        else "timing spread not measured"
    )
    verdict = "faster" if end["best_reward"] > 1.0 else "not faster"
    return (
        f"Best candidate: {end['best_reward']:.3f}x the original's speed ({verdict}), correct on every test, "
        f"written to {best_path}. Cost: {cost}. Confidence: {confidence}. Stopped by {end['stopped_by']}."
    )


def _program_runner(cache: Path):
    """Compile and run the user's own program in the sandbox (for --make-tests)."""
    from maxcode.evaluate.compile import Compiler
    from maxcode.evaluate.sandbox import Limits, Sandbox

    def run(source: str, input_path: Path) -> str:
        outcome = Compiler(cache / "bin").compile(source)
        if not outcome.ok:
            raise TargetError(f"the target does not compile as given: {outcome.first_error}")
        result = Sandbox(cache / "sandbox").run(
            [Sandbox.PROGRAM], Limits(), stdin_path=input_path, copy_program=outcome.binary
        )
        if result.timed_out or result.exit_code != 0:
            raise TargetError(
                f"the target failed on {input_path} (exit {result.exit_code}, timed out: {result.timed_out})"
            )
        return result.stdout.decode()

    return run


def _require_gpu() -> None:
    try:
        import torch
    except ModuleNotFoundError as err:
        raise TargetError("CUDA targets need torch with CUDA; install it on a GPU machine") from err
    if not torch.cuda.is_available():
        raise TargetError(
            "CUDA targets run on the local GPU, and this machine has none (torch.cuda.is_available() is False)"
        )
