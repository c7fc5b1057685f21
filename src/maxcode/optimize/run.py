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
import shlex
import shutil
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

from rich.console import Console

from maxcode.errors import ConfigError, LLMConfigError, RunMismatch
from maxcode.evaluate.compile import PIE_FLAGS
from maxcode.evaluate.result import EvalResult, Status
from maxcode.llm.config import role_config_from_dict
from maxcode.llm.prices import load_prices_file, lookup
from maxcode.loader import load
from maxcode.optimize.confirm import DEFAULT_MIN_SPEEDUP, Confirmation, ConfirmError, confirm
from maxcode.optimize.live import plural
from maxcode.optimize.target import (
    TargetError,
    cpp_task,
    cuda_task,
    detect_kind,
    make_tests,
    read_target,
)
from maxcode.params import EvaluationParams, read_params_file
from maxcode.records import atomic_write_json, atomic_write_text, dir_mode, provenance, sha256_text
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
    cxxflags: str | None = None  # None: params' evaluation.cpp.flags (PIE's --std=c++17 -O3)
    confirm: Path | None = None  # None: the largest test scaled up where its format allows
    min_speedup: float = DEFAULT_MIN_SPEEDUP


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
    if opts.out.exists() and not opts.out.is_dir():
        raise TargetError(f"--out {opts.out}: is a file, not a folder; choose a folder")
    if opts.min_speedup < 1.0:
        raise TargetError(f"--min-speedup {opts.min_speedup:g}: must be at least 1")
    if opts.confirm is not None and (
        not opts.confirm.is_dir() or not any(p.is_file() for p in opts.confirm.iterdir())
    ):
        raise TargetError(f"--confirm {opts.confirm}: not a folder of input files")
    if opts.cxxflags is not None:
        cxxflags(opts)


def cxxflags(opts: OptimizeOptions) -> tuple[str, ...]:
    """--cxxflags split as a shell would split it."""
    try:
        flags = tuple(shlex.split(opts.cxxflags or ""))
    except ValueError as err:
        raise TargetError(f"--cxxflags {opts.cxxflags!r}: {err}") from None
    if any(f.startswith("-o") for f in flags):
        raise TargetError(f"--cxxflags {opts.cxxflags!r}: -o is set by maxcode; leave it out")
    return flags


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
        flags = evaluation.cpp.flags if opts.cxxflags is None else cxxflags(opts)
        opts.cxxflags = shlex.join(flags)
        cpp = replace(evaluation.cpp, timing=opts.timing, flags=flags)
        evaluation = replace(evaluation, cpp=cpp)
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
        "cxxflags": opts.cxxflags,
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


def flags_text(flags: str | None) -> str:
    """The compile flags as the first line and the report state them."""
    if flags == shlex.join(PIE_FLAGS):
        return f"g++ {flags} (what PIE uses; the default, --cxxflags to change)"
    return f"g++ {flags}"


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
        f"cpp, flags {flags_text(opts.cxxflags)}, timing {opts.timing}: {TIMING_NOTE[opts.timing]}"
        if kind == "cpp"
        else "cuda"
    )
    tests = (
        f"outputs of {opts.make_tests} inputs in {opts.tests} made by your program"
        if opts.make_tests
        else f"{opts.tests}"
        if opts.tests
        else "the KernelBench get_inputs()"
    )
    b = method.budget
    budget = f"{plural(method.depth, 'step')} x {plural(method.executed_per_step, 'evaluation')}"
    if b.max_evaluations:
        budget += f", at most {plural(b.max_evaluations, 'evaluation')}"
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
    baseline = None
    if kind == "cpp":
        evaluator = build_evaluator("cpp", evaluation, cache, profile=method.profile)
        tests_dir = opts.tests
        if opts.make_tests is not None:
            tests_dir, generated = _generated_tests(opts, evaluator.evaluator)
            console.print(
                f"tests: made {len(generated)} expected outputs by running {opts.target.name}: "
                f"{', '.join(generated)}"
            )
        task = cpp_task(opts.target, tests_dir)
        baseline = _evaluate_original(opts, task, evaluator, console)
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
    view = LiveView(method, console, offline=policy.offline)
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
    run = _Published(opts, task, kind, method, policy, generated, baseline)
    try:
        with view:
            end = RunEnd.from_dict(run_search(ctx, run_path), str(run_path))
    except RunMismatch as err:
        raise TargetError(
            f"--resume: {err}; choose another --out or repeat that run's arguments"
        ) from None
    except KeyboardInterrupt:
        run.partial_report()
        raise
    unpriced = (
        role["backend"] != "offline" and role_config_from_dict("generator", role).price is None
    )
    return run.publish(end, evaluator, unpriced, console)


def _generated_tests(opts: OptimizeOptions, evaluator) -> tuple[Path, list[str]]:
    """Expected outputs made by the user's program (built and run as candidates are),
    published to --out/tests by rename; an existing --out/tests is used only if it holds
    exactly these tests."""
    out = opts.out / "tests"
    names = [f"output.{i}.txt" for i in range(opts.make_tests)]
    staged = Path(tempfile.mkdtemp(dir=opts.out, prefix=".tests."))
    staged.chmod(dir_mode())  # published as an ordinary folder
    try:
        make_tests(
            read_target(opts.target), opts.tests, opts.make_tests, staged, _runner(opts, evaluator)
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


def _runner(opts: OptimizeOptions, evaluator):
    """The user's program on one input, through the evaluator (for --make-tests)."""

    def run(source: str, input_path: Path) -> str:
        build, result = evaluator.run_program(source, input_path)
        if result is None:
            raise TargetError(
                f"{opts.target} does not compile with g++ {opts.cxxflags}: "
                f"{_user_paths(build.first_error, opts.target)}"
            )
        if result.timed_out or result.exit_code != 0:
            raise TargetError(
                f"--make-tests: {opts.target} failed on {input_path} (exit {result.exit_code}, "
                f"timed out: {result.timed_out}); fix the program or that input"
            )
        return result.stdout.decode()

    return run


def _evaluate_original(opts: OptimizeOptions, task, evaluator, console: Console) -> EvalResult:
    """The original's own evaluation (compile, tests, timing), with a line before and after."""
    from maxcode.evaluate.cpp import EvaluatorError

    n = len(task.tests())
    console.print(
        f"evaluating the original on {plural(n, 'test')} (compile, run, {opts.timing} timing)..."
    )
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
    if baseline.status is Status.COMPILE_ERROR:
        first = baseline.reason.removeprefix("compile error: ")
        raise TargetError(
            f"{opts.target} does not compile with g++ {opts.cxxflags}: "
            f"{_user_paths(first, opts.target)}; fix it (or --cxxflags) first"
        )
    if baseline.status is not Status.OK:
        raise TargetError(
            f"{opts.target}: the program as given fails its own tests ({baseline.status.value}: "
            f"{_user_paths(baseline.reason, opts.target)}); fix it or its tests first"
        )
    t = baseline.timing
    cost = f"{t.reference:.4g} {t.unit}" if t else "untimed"
    console.print(f"original: correct on {plural(n, 'test')}, {cost}")
    return baseline


def _user_paths(text: str, target: Path) -> str:
    """Compiler messages name the file the user wrote, not the sandbox's copy of it."""
    return text.replace("main.cpp", str(target))


@dataclass
class _Published:
    """What a run leaves in --out besides run.jsonl: the report, and the best file only
    when its gain holds (C++: confirmed by wall clock on larger inputs)."""

    opts: OptimizeOptions
    task: object
    kind: str
    method: MethodConfig
    policy: object
    generated: list[str]
    baseline: EvalResult | None

    @property
    def best_path(self) -> Path:
        return self.opts.out / f"best{self.opts.target.suffix}"

    def header(self) -> dict:
        opts = self.opts
        header = {
            "target": str(opts.target),
            "kind": self.kind,
            "method": self.method.name,
            "policy": self.policy.name + (" (offline)" if self.policy.offline else ""),
        }
        if self.kind == "cpp":
            header["compile flags"] = flags_text(opts.cxxflags)
            header["minimum speedup"] = f"{opts.min_speedup:g}x (--min-speedup)"
        header |= {
            "timing": opts.timing or "-",
            "tests": str(self.task.tests_dir) if self.task.tests_dir else "get_inputs()",
            "generated tests": ", ".join(self.generated) if self.generated else "none",
            "depth x k": f"{self.method.depth} x {self.method.k}",
        }
        return header

    def partial_report(self) -> None:
        """After Ctrl-C: the finished records, said to be partial; best.* is not written."""
        from maxcode.optimize.report import write_report

        run_path = self.opts.out / "run.jsonl"
        records = read_records(run_path) if run_path.exists() else []
        if not records:
            return
        evaluations = sum(isinstance(r, CandidateRecord) and r.executed for r in records)
        summary = (
            f"Interrupted after {plural(evaluations, 'evaluation')}: this report shows the "
            f"finished work only; nothing was confirmed and {self.best_path.name} was not "
            "written. Resume with --resume and the same arguments."
        )
        write_report(self.opts.out / "report.html", records, self._report_inputs(summary, None))

    def publish(self, end: RunEnd, evaluator, unpriced: bool, console: Console) -> dict:
        from maxcode.optimize.report import write_report

        opts = self.opts
        records = read_records(opts.out / "run.jsonl")
        winner = next(
            (
                r
                for r in records
                if isinstance(r, CandidateRecord) and r.candidate_id == end.best_candidate_id
            ),
            None,
        )
        if winner is None or not winner.reward or winner.reward <= 1.0:
            winner = None
        confirmation, why_not = None, ""
        if winner is not None and self.kind == "cpp":
            console.print("confirming: the original and the best by wall clock on larger inputs...")
            try:
                confirmation = confirm(
                    evaluator.evaluator,
                    self.task.reference_source,
                    winner.source,
                    [c.input_path for c in self.task.tests()],
                    opts.confirm,
                    opts.out / ".cache" / "confirm",
                    opts.min_speedup,
                )
            except ConfirmError as err:
                why_not = f"the confirmation failed: {err}"
        written = winner is not None and (
            self.kind != "cpp" or (confirmation is not None and confirmation.meaningful)
        )
        if written:
            atomic_write_text(self.best_path, winner.source)
        if confirmation is not None:
            atomic_write_json(opts.out / "confirmation.json", confirmation.to_dict())
        summary = _summary(end, winner, self.best_path, confirmation, written, why_not, unpriced)
        inputs = self._report_inputs(summary, winner if written else None, winner, confirmation)
        write_report(opts.out / "report.html", records, inputs)
        result = {"summary": summary, "best_path": str(self.best_path), **end.to_dict()}
        result["best_written"] = written
        result["confirmation"] = confirmation.to_dict() if confirmation else None
        return result

    def _report_inputs(self, summary, best, candidate=None, confirmation=None):
        from maxcode.optimize.report import ReportInputs

        return ReportInputs(
            original=self.task.reference_source,
            target_name=self.opts.target.name,
            header=self.header(),
            summary=summary,
            winner=best,
            best_found=candidate,
            baseline=self.baseline,
            confirmation=confirmation,
            timing=self.opts.timing,
        )


def _summary(
    end: RunEnd,
    best: CandidateRecord | None,
    best_path: Path,
    confirmation: Confirmation | None,
    written: bool,
    why_not: str = "",
    unpriced: bool = False,
) -> str:
    usage = end.usage
    cost = (
        f"{plural(end.evaluations, 'evaluation')}, {plural(usage.calls, 'LLM call')}, "
        f"{plural(usage.input_tokens + usage.output_tokens, 'token')}, "
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
    searched = f"{end.best_reward:.3f}x by {timing.get('mode', '?')} on the tests"
    if confirmation is None and not written:
        return (
            f"No meaningful gain was found: the best candidate ran {searched}, but "
            f"{why_not}; {best_path} was not written. Cost: {cost}. {stop}"
        )
    if confirmation is None:
        return (
            f"Best candidate: {searched}, correct on every test, written to {best_path}."
            f"{_against_compiled(best.evaluation)} Cost: {cost}. {stop}"
        )
    confirmed = confirmation.describe()
    disagree = ""
    if confirmation.speedup > end.best_reward * 1.5:
        disagree = (
            " The two figures disagree: the gain grows with the input, so the small tests "
            "understate it."
        )
    elif confirmation.speedup < end.best_reward / 1.5:
        disagree = (
            " The two figures disagree: the tests' figure does not carry over to larger inputs "
            "and real time (see the report's notes on what instruction counts cannot see)."
        )
    if not written:
        why = (
            "its output differs from the original's on the confirmation inputs"
            if not confirmation.outputs_match
            else f"the confirmed speedup is not above {confirmation.min_speedup:g}x outside "
            "the measured range (--min-speedup)"
        )
        return (
            f"No meaningful gain was found: the best candidate ran {searched} and {confirmed}; "
            f"{why}, so {best_path} was not written.{disagree} Cost: {cost}. {stop}"
        )
    return (
        f"Best candidate: {searched}, confirmed {confirmed}; correct on every test, written to "
        f"{best_path}.{disagree} Cost: {cost}. {stop}"
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


def _require_gpu() -> None:
    try:
        import torch
    except ModuleNotFoundError as err:
        raise TargetError("CUDA targets need torch with CUDA; install it on a GPU machine") from err
    if not torch.cuda.is_available():
        raise TargetError(
            "CUDA targets run on the local GPU, and this machine has none (torch.cuda.is_available() is False)"
        )
