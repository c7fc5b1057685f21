"""`maxcode optimize`: one target, the same loop, evaluators and critics as the pipeline.

Every check that can refuse a run happens before anything is spent or written: flags,
target, tests, prices and keys, and (with ``--resume``) that ``--out`` holds a run of this
target, these tests and these settings. ``--out`` only grows: records are appended, a step
in flight is set aside, and the best file is replaced by atomic rename when a better
candidate is found.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

from rich.console import Console

from maxcode.errors import ConfigError, LLMConfigError, RunMismatch
from maxcode.evaluate.result import Status
from maxcode.llm.config import role_config_from_dict
from maxcode.llm.prices import load_prices_file, lookup
from maxcode.loader import load
from maxcode.optimize.target import (
    TargetError,
    cpp_task,
    cuda_task,
    detect_kind,
    make_tests,
    read_target,
)
from maxcode.params import EvaluationParams, read_params_file
from maxcode.records import atomic_write_text, provenance, sha256_text
from maxcode.search.config import MethodConfig, method_from_params
from maxcode.search.loop import GROWABLE, RunContext, differences, run_search
from maxcode.search.records import CandidateRecord, Record, RunEnd, RunStart, read_records

PRESETS = Path(__file__).resolve().parents[3] / "presets"
DEFAULT_PARAMS = PRESETS / "offline.yaml"
# `--method maxcode` is the paper's full observation (trajectory + critique + best), or,
# with a reward-to-go model, the same with reranking; any other name is looked up as is.
METHOD_ALIASES = {"maxcode": "traj-critique-best-perf"}
R2G_METHOD = "maxcode+r2g"
TIMING_MODES = ("instructions", "cachegrind", "wall")
KINDS = ("cpp", "cuda")
TIMING_NOTE = {
    "instructions": "instructions executed (valgrind): the same count on every run; "
    "--timing wall for wall-clock time",
    "cachegrind": "instructions + simulated cache misses (valgrind): repeatable; "
    "--timing wall for wall-clock time",
    "wall": "wall-clock time, interleaved repeats: noisy on a busy machine (the summary gives "
    "the measured spread)",
}


@dataclass
class OptimizeOptions:
    target: Path
    out: Path
    kind: str | None = None
    method: str = "maxcode"
    params: Path | None = None  # None: the offline preset shipped with maxcode
    llm: str | None = None  # BACKEND:MODEL
    base_url: str | None = None
    max_tokens: int | None = None
    depth: int | None = None  # None: the method's value in params
    k: int | None = None
    budget_evals: int | None = None
    budget_usd: float | None = None
    price_in: float | None = None
    price_out: float | None = None
    prices: Path | None = None
    tests: Path | None = None
    make_tests: int | None = None
    r2g_model: Path | None = None
    resume: bool = False
    seed: int = 0
    timing: str | None = None  # None: params' evaluation.cpp.timing (instructions)


def check_flags(opts: OptimizeOptions) -> None:
    """Flag values that are wrong whatever the files say; each message names the flag."""
    if opts.kind is not None and opts.kind not in KINDS:
        raise TargetError(f"--kind {opts.kind}: choose cpp or cuda")
    for flag, value in (
        ("--depth", opts.depth),
        ("--k", opts.k),
        ("--make-tests", opts.make_tests),
        ("--budget-evals", opts.budget_evals),
        ("--max-tokens", opts.max_tokens),
    ):
        if value is not None and value < 1:
            raise TargetError(f"{flag} {value}: must be at least 1")
    if opts.budget_usd is not None and opts.budget_usd <= 0:
        raise TargetError(f"--budget-usd {opts.budget_usd}: must be more than 0")
    if opts.timing is not None and opts.timing not in TIMING_MODES:
        raise TargetError(f"--timing {opts.timing}: choose one of {', '.join(TIMING_MODES)}")
    if (opts.price_in is None) != (opts.price_out is None):
        raise TargetError("--price-in and --price-out go together (USD per 1M tokens)")
    if opts.price_in is not None and (opts.price_in < 0 or opts.price_out < 0):
        raise TargetError("--price-in/--price-out: must be >= 0 USD per 1M tokens")
    if opts.price_in is not None and opts.prices is not None:
        raise TargetError("--price-in/--price-out and --prices: give one of them")
    if opts.llm is None and (opts.price_in is not None or opts.prices or opts.base_url):
        raise TargetError("--price-in/--price-out/--prices/--base-url apply to an --llm model")
    if opts.make_tests is not None and opts.tests is None:
        raise TargetError("--make-tests N needs --tests DIR holding the input.<i>.txt files")


def load_method_params(path: Path | None) -> dict:
    """The parameter file's ``search``, ``methods``, ``evaluation`` and ``llm`` blocks.

    The one place `optimize` reads parameters (the pipeline's loader checks paths this
    command does not use, such as suite checkouts).
    """
    path = path or DEFAULT_PARAMS
    try:
        params = read_params_file(path)
    except ConfigError as err:
        raise TargetError(f"--params {err}") from None
    if not isinstance(params.get("methods"), dict):
        raise TargetError(f"--params {path}: has no `methods:` block")
    return params


def method_config(opts: OptimizeOptions, params: dict) -> MethodConfig:
    """The method as params define it, sized and capped by the command line."""
    name = opts.method
    if name == "maxcode":
        name = R2G_METHOD if opts.r2g_model else METHOD_ALIASES[name]
    methods = params["methods"]
    if name not in methods:
        raise TargetError(
            f"--method {opts.method}: not defined in {opts.params or DEFAULT_PARAMS}; "
            f"choose maxcode or one of {sorted(methods)}"
        )
    try:
        method = method_from_params(name, params.get("search") or {}, methods[name])
    except ConfigError as err:
        raise TargetError(f"--params {opts.params or DEFAULT_PARAMS}: {err}") from None
    if method.rerank == "model" and not opts.r2g_model:
        raise TargetError(f"--method {opts.method}: reranks with a model; pass --r2g-model DIR")
    k = opts.k or method.k
    budget = method.budget
    if opts.budget_evals is not None:
        budget = replace(budget, max_evaluations=opts.budget_evals)
    if opts.budget_usd is not None:
        budget = replace(budget, max_cost_usd=opts.budget_usd)
    return replace(
        method,
        depth=opts.depth or method.depth,
        k=k,
        execute_top_m=None if method.execute_top_m is None else min(method.execute_top_m, k),
        budget=budget,
    )


def evaluation_params(opts: OptimizeOptions, kind: str, params: dict) -> EvaluationParams:
    """The params' ``evaluation:`` block; a C++ target's timing mode from --timing, else it."""
    try:
        evaluation = load(EvaluationParams, params.get("evaluation"), "evaluation")
    except ConfigError as err:
        raise TargetError(f"--params {opts.params or DEFAULT_PARAMS}: {err}") from None
    if kind == "cpp":
        opts.timing = opts.timing or evaluation.cpp.timing
        evaluation = replace(evaluation, cpp=replace(evaluation.cpp, timing=opts.timing))
    return evaluation


def role_config(opts: OptimizeOptions, params: dict) -> dict:
    """The generator's (and critic's) role block, prices and key checked before any call."""

    if opts.llm is None:
        return {"backend": "offline"}
    backend, _, model = opts.llm.partition(":")
    if not model:
        raise TargetError(f"--llm {opts.llm}: write BACKEND:MODEL, e.g. openai:gpt-4o")
    # The params' generator block for this very model (sampling, prices) is the base.
    base = dict((params.get("llm") or {}).get("generator") or {})
    role = base if (base.get("backend"), base.get("model")) == (backend, model) else {}
    role.update(backend=backend, model=model)
    if opts.base_url:
        role["base_url"] = opts.base_url
    if opts.max_tokens:
        role["max_tokens"] = opts.max_tokens
    if opts.price_in is not None:
        role.update(price_input_per_mtok=opts.price_in, price_output_per_mtok=opts.price_out)
    elif opts.prices is not None:
        try:
            price = lookup(backend, model, load_prices_file(opts.prices))
        except LLMConfigError as err:
            raise TargetError(str(err)) from None
        if price is None:
            raise TargetError(f"--prices {opts.prices}: has no entry for {backend}:{model}")
        role.update(
            price_input_per_mtok=price.input,
            price_output_per_mtok=price.output,
            price_cached_input_per_mtok=price.cached_input,
        )
    try:
        cfg = role_config_from_dict("generator", role)
    except LLMConfigError as err:
        raise TargetError(f"--llm {opts.llm}: {err}") from None
    if cfg.key_env and not os.environ.get(cfg.key_env) and not cfg.local_server:
        raise TargetError(
            f"--llm {opts.llm}: set {cfg.key_env} in the environment (nothing was spent); "
            "a server on this machine (--base-url http://localhost:PORT/v1) needs no key"
        )
    if opts.budget_usd is not None and cfg.price is None:
        raise TargetError(
            f"--budget-usd {opts.budget_usd:g}: the price of {opts.llm} is not in maxcode's price "
            "table; set --price-in and --price-out (USD per 1M tokens) or --prices FILE "
            "(nothing was spent)"
        )
    return role


def fingerprint(opts: OptimizeOptions, kind: str, source: str, method: MethodConfig, role: dict):
    """What a resumed run must share with the records in --out (depth and budget may grow)."""

    settings = {
        "kind": kind,
        "method": {k: v for k, v in method.to_dict().items() if k not in GROWABLE},
        # what decides the proposals; the server address, prices and caps may change
        "llm": {
            k: v
            for k, v in role.items()
            if k not in ("budget", "base_url") and not k.startswith("price_")
        },
        "timing": opts.timing,
        "seed": opts.seed,
        "r2g_model": str(opts.r2g_model) if opts.r2g_model else None,
    }
    return {
        "target": {"file": opts.target.name, "sha256": sha256_text(source)[:16]},
        "tests": {
            "dir": str(opts.tests) if opts.tests else None,
            "sha256": _dir_hash(opts.tests) if opts.tests else None,
            "make_tests": opts.make_tests,
        },
        "settings": settings,
    }


def check_out(opts: OptimizeOptions, expected: dict) -> list[Record]:
    """The records to resume (empty for a fresh run); refuses, changing nothing, otherwise.

    The whole file is read strictly here, before anything is written: a line that is not
    JSON, or a record with an unknown or missing field, stops the run naming its line.
    """

    run_path = opts.out / "run.jsonl"
    if run_path.exists() and not opts.resume:
        raise TargetError(
            f"{run_path} exists: pass --resume to continue it, or choose another --out"
        )
    if not run_path.exists():
        ours = [opts.out / n for n in ("report.html", f"best{opts.target.suffix}")]
        clash = [str(p) for p in ours if p.exists()]
        if clash:
            raise TargetError(
                f"--out {opts.out}: already holds {', '.join(clash)} but no run.jsonl; "
                "choose another --out (nothing there is replaced)"
            )
        return []
    records = read_records(run_path)
    first = records[0] if records else None
    found = first.fingerprint if isinstance(first, RunStart) else None
    if not found:
        raise TargetError(
            f"--resume: {run_path} has no fingerprint of its target and settings (another tool, "
            "or an older maxcode); choose another --out. Nothing in --out was changed"
        )
    what = differences("", found, expected)
    if what:
        raise TargetError(
            f"--resume: {run_path} is a run of another target, tests or settings "
            f"({'; '.join(d.lstrip('.') for d in what)}); choose another --out or repeat that "
            "run's arguments. Nothing in --out was changed"
        )
    return records


def optimize(opts: OptimizeOptions, console: Console | None = None) -> dict:
    """Run, resume or extend the search; write the best file, run.jsonl and report.html."""
    check_flags(opts)
    console = console or Console(stderr=True, highlight=False, markup=False, soft_wrap=True)
    kind = detect_kind(opts.target, opts.kind)
    source = read_target(opts.target)
    params = load_method_params(opts.params)
    method = method_config(opts, params)
    role = role_config(opts, params)
    evaluation = evaluation_params(opts, kind, params)
    if kind == "cpp" and opts.tests is None:
        raise TargetError(
            f"{opts.target}: C++ targets need --tests DIR with input.<i>.txt/output.<i>.txt pairs "
            "(or input files only, with --make-tests N)"
        )
    if opts.tests is not None and not opts.tests.is_dir():
        raise TargetError(f"--tests {opts.tests}: not a directory")
    expected = fingerprint(opts, kind, source, method, role)
    replayed = check_out(opts, expected)
    console.print(_first_line(opts, kind, method, role, replayed), soft_wrap=True)
    return _run(opts, kind, method, role, evaluation, expected, replayed, console)


def _first_line(opts, kind: str, method: MethodConfig, role: dict, replayed: list[Record]) -> str:

    if role["backend"] == "offline":
        policy = "offline " + ("C++ source transformations" if kind == "cpp" else "CUDA templates")
        policy += " (no LLM configured)"
    else:
        cfg = role_config_from_dict("generator", role)
        price = cfg.price
        policy = f"{cfg.identity}" + (
            f" at ${price.input:g}/${price.output:g} per 1M tokens in/out"
            if price
            else " (no price)"
        )
    evaluator = (
        f"cpp, timing {opts.timing}: {TIMING_NOTE[opts.timing]}" if kind == "cpp" else "cuda"
    )
    tests = (
        f"outputs of {opts.make_tests} inputs in {opts.tests} made by your program"
        if opts.make_tests
        else f"{opts.tests}"
        if opts.tests
        else "the KernelBench get_inputs()"
    )
    b = method.budget
    budget = f"{method.depth} steps x {method.executed_per_step} evaluations"
    if b.max_evaluations:
        budget += f", at most {b.max_evaluations} evaluations"
    budget += f", at most ${b.max_cost_usd:g}" if b.max_cost_usd else ", no dollar cap"
    head = "resuming" if replayed else "optimizing"
    return (
        f"maxcode optimize: {head} {opts.target} | method {method.name} | policy {policy} | "
        f"evaluator {evaluator} | tests {tests} | budget {budget} | out {opts.out}"
    )


def _run(opts, kind, method, role, evaluation, expected, replayed, console) -> dict:
    from maxcode.optimize.live import LiveView
    from maxcode.roles import build_critic, build_evaluator, build_policy, run_budget

    run_path = opts.out / "run.jsonl"
    opts.out.mkdir(parents=True, exist_ok=True)
    cache = opts.out / ".cache"
    generated: list[str] = []
    if kind == "cpp":
        tests_dir = opts.tests
        if opts.make_tests is not None:
            tests_dir, generated = _generated_tests(opts, cache)
            console.print(
                f"tests: made {len(generated)} expected outputs by running {opts.target.name}: "
                f"{', '.join(generated)}"
            )
        task = cpp_task(opts.target, tests_dir)
        evaluator = build_evaluator("cpp", evaluation, cache, profile=method.profile)
        _evaluate_original(opts, task, evaluator, console)
    else:
        task = cuda_task(opts.target)
        _require_gpu()
        evaluator = build_evaluator("cuda", evaluation, cache, profile=method.profile)
    spend = run_budget(method.budget, "raise --budget-usd (or the method's budget in --params)")
    try:
        policy = build_policy(role, task.language, cache, run_budget=spend)
        critic = (
            build_critic(role, task.language, cache, run_budget=spend) if method.critique else None
        )
    except LLMConfigError as err:
        raise TargetError(f"--llm {opts.llm}: {err}") from None
    reranker = None
    if method.rerank == "model":
        from maxcode.r2g.reranker import load_reranker

        reranker = load_reranker(opts.r2g_model)
    best = BestFile(opts.out / f"best{opts.target.suffix}")
    for r in replayed:  # a resumed run's best so far stays until a faster one is found
        if isinstance(r, CandidateRecord) and r.executed and (r.reward or 0) > best.reward:
            best.offer(r.source, r.reward)
    view = LiveView(method, console, on_best=best.offer)
    ctx = RunContext(
        task=task,
        method=method,
        seed=opts.seed,
        policy=policy,
        evaluator=evaluator,
        critic=critic,
        reranker=reranker,
        provenance=provenance({"optimize": {k: str(v) for k, v in vars(opts).items()}}),
        on_event=view.handle,
        llm_budget=spend,
        fingerprint=expected,
    )
    try:
        with view:
            end = RunEnd.from_dict(run_search(ctx, run_path), str(run_path))
    except RunMismatch as err:
        raise TargetError(
            f"--resume: {err}; choose another --out or repeat that run's arguments"
        ) from None
    unpriced = (
        role["backend"] != "offline" and role_config_from_dict("generator", role).price is None
    )
    return _publish(opts, task, end, kind, method, policy, best, generated, unpriced)


class BestFile:
    """The best program so far, replaced by atomic rename only by a faster correct one."""

    def __init__(self, path: Path):
        self.path = path
        self.reward = 1.0  # the original's speed: only a faster program is written

    def offer(self, source: str, reward: float) -> None:
        if reward > self.reward:
            atomic_write_text(self.path, source)
            self.reward = reward


def _generated_tests(opts: OptimizeOptions, cache: Path) -> tuple[Path, list[str]]:
    """Expected outputs made by the user's program, published to --out/tests by rename;
    an existing --out/tests is used only if it holds exactly these tests."""
    out = opts.out / "tests"
    names = [f"output.{i}.txt" for i in range(opts.make_tests)]
    staged = Path(tempfile.mkdtemp(dir=opts.out, prefix=".tests."))
    try:
        make_tests(
            read_target(opts.target),
            opts.tests,
            opts.make_tests,
            staged,
            _program_runner(opts, cache),
        )
        if not out.exists():
            os.replace(staged, out)
        elif _dir_hash(out) != _dir_hash(staged):
            raise TargetError(
                f"--out {opts.out}: its tests/ folder holds other tests than --make-tests "
                f"{opts.make_tests} makes now; choose another --out (nothing there is replaced)"
            )
    finally:
        if staged.exists():
            shutil.rmtree(staged)  # our own staging copy, never the user's files
    return out, [str(out / n) for n in names]


def _evaluate_original(opts: OptimizeOptions, task, evaluator, console: Console) -> None:
    """The original's own evaluation (compile, tests, timing), with a line before and after."""
    from maxcode.evaluate.cpp import EvaluatorError

    n = len(task.tests())
    console.print(f"evaluating the original on {n} tests (compile, run, {opts.timing} timing)...")
    try:
        baseline = evaluator.evaluate(task, task.reference_source)
    except EvaluatorError as err:
        message = str(err).split("; fix the task's")[0]
        message = message.replace(f"task {task.task_id}: the reference program fails ", "")
        message = message.replace(f"task {task.task_id}: the reference program ", "")
        raise TargetError(
            f"{opts.target} as given fails --tests {task.tests_dir}: "
            + _user_paths(message, opts.target)
            + "; fix the expected outputs there, or make them from your program with "
            "--make-tests N"
        ) from None
    if baseline.status is not Status.OK:
        raise TargetError(
            f"{opts.target}: the program as given fails its own tests ({baseline.status.value}: "
            f"{_user_paths(baseline.reason, opts.target)}); fix it or its tests first"
        )
    t = baseline.timing
    cost = f"{t.reference:.4g} {t.unit}" if t else "untimed"
    console.print(f"original: correct on {n} tests, {cost}")


def _user_paths(text: str, target: Path) -> str:
    """Compiler messages name the file the user wrote, not the sandbox's copy of it."""
    return text.replace("main.cpp", str(target))


def _publish(
    opts,
    task,
    end: RunEnd,
    kind: str,
    method: MethodConfig,
    policy,
    best: BestFile,
    generated: list[str],
    unpriced: bool,
) -> dict:
    from maxcode.optimize.report import write_report

    records = read_records(opts.out / "run.jsonl")
    winner = next(
        (
            r
            for r in records
            if isinstance(r, CandidateRecord) and r.candidate_id == end.best_candidate_id
        ),
        None,
    )
    if winner is not None and winner.reward > 1.0:
        best.offer(winner.source, winner.reward)  # a resumed run's replayed best
    else:
        winner = None
    summary = _summary(end, winner, best.path, unpriced)
    header = {
        "target": str(opts.target),
        "kind": kind,
        "method": method.name,
        "policy": policy.name + (" (offline)" if policy.offline else ""),
        "timing": opts.timing or "-",
        "tests": str(task.tests_dir) if task.tests_dir else "get_inputs()",
        "generated tests": ", ".join(generated) if generated else "none",
        "depth x k": f"{method.depth} x {method.k}",
    }
    write_report(
        opts.out / "report.html", records, task.reference_source, opts.target.name, header, summary
    )
    return {"summary": summary, "best_path": str(best.path), **end.to_dict()}


def _summary(
    end: RunEnd, best: CandidateRecord | None, best_path: Path, unpriced: bool = False
) -> str:
    usage = end.usage
    cost = (
        f"{end.evaluations} evaluations, {usage.calls} LLM calls, "
        f"{usage.input_tokens + usage.output_tokens} tokens, "
        + (
            "cost unknown (no price for the model: --price-in/--price-out)"
            if unpriced
            else f"${usage.cost_usd:.4f}"
        )
    )
    stopped = end.stopped_by
    stop = (
        f"Stopped for the budget before crossing it ({stopped.removeprefix('budget: ')})."
        if stopped.startswith("budget")
        else f"Stopped by {stopped}."
    )
    if best is None:
        return (
            f"No correct candidate beat the original ({cost}); {best_path} was not written. {stop}"
        )
    timing = best.evaluation["timing"] or {}
    spreads = [
        s for s in (timing.get("candidate_spread"), timing.get("reference_spread")) if s is not None
    ]
    confidence = (
        f"wall timing spread (relative IQR over {timing.get('repeats', 1)} repeats) up to "
        f"{max(spreads) * 100:.1f}%"
        if spreads
        else f"{timing.get('mode', '?')} timing, the same on every run"
        if timing.get("mode") in ("instructions", "cachegrind")
        else "timing spread not measured"
    )
    return (
        f"Best candidate: {end.best_reward:.3f}x the original's speed, correct on every test, "
        f"written to {best_path}.{_against_compiled(best.evaluation)} Cost: {cost}. "
        f"Confidence: {confidence}. {stop}"
    )


def _against_compiled(evaluation: dict | None) -> str:
    """A CUDA candidate next to the user's one-line alternative, ``torch.compile(model)``:
    said plainly when it is slower (empty where the evaluator has no torch.compile figure)."""
    figures = (evaluation or {}).get("figures") or {}
    ratio = figures.get("speedup_vs_compiled")
    if ratio is None:
        return ""
    if ratio < 1.0:
        return (
            f" It is slower than torch.compile(model) ({ratio:.3f}x its speed): no candidate "
            "faster than torch.compile was found, which is the faster choice for this model."
        )
    return f" It is {ratio:.3f}x the speed of torch.compile(model)."


def _dir_hash(folder: Path) -> str:
    h = hashlib.sha256()
    if folder.is_dir():
        for p in sorted(folder.rglob("*")):
            if p.is_file():
                h.update(json.dumps(str(p.relative_to(folder))).encode())
                h.update(hashlib.sha256(p.read_bytes()).digest())
    return h.hexdigest()[:16]


def _program_runner(opts: OptimizeOptions, cache: Path):
    """Compile and run the user's own program in the sandbox (for --make-tests)."""
    from maxcode.evaluate.compile import Compiler
    from maxcode.evaluate.sandbox import Limits, Sandbox

    def run(source: str, input_path: Path) -> str:
        outcome = Compiler(cache / "bin").compile(source)
        if not outcome.ok:
            raise TargetError(
                f"{opts.target} does not compile: {_user_paths(outcome.first_error, opts.target)}"
            )
        result = Sandbox(cache / "sandbox").run(
            [Sandbox.PROGRAM], Limits(), stdin_path=input_path, copy_program=outcome.binary
        )
        if result.timed_out or result.exit_code != 0:
            raise TargetError(
                f"--make-tests: {opts.target} failed on {input_path} (exit {result.exit_code}, "
                f"timed out: {result.timed_out}); fix the program or that input"
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
