"""The offline CUDA policy over the built-in CUDA suite, on a GPU: what the search finds.

For every task: a full MaxCode search (trajectory + offline critique + best-so-far,
--depth steps of --k proposals) with the offline CUDA policy, every candidate through
the real CUDA evaluator. All tasks' searches run side by side and each step's
candidates of every task go to the evaluator in one batch, so compiles use every core
while the GPU worker times earlier candidates. Prints and writes (--json) per task the
family, whether a correct candidate was found, and the best speedup over eager and over
torch.compile; per family the share correct and mean / median speedups; overall the
share of supported tasks with a correct candidate.

    python benchmarks/bench_offline_cuda_policy.py [--depth 3] [--k 3] [--seed 0] [--json out.json]

With --kernelbench DIR (a KernelBench checkout, e.g. $KB/KernelBench) the tasks are real
problems instead: --per-level N per --levels level, drawn with --sample-seed from the
problems the policy supports (CPU-side analysis, as bench_offline_cuda_coverage.py), at
the problem sizes the files ship with. Aggregates then also give, per level, the share of
the level's problems the policy supports, the median and geometric-mean speedup and the
share above 1.0 (over eager and over torch.compile), the candidates evaluated, and how
often the best candidate came after the first step. A task whose best correct candidate is
not faster than eager (the library) is reported as such: it has no candidate to offer.

Time on one GPU: compiles run on every core, GPU evaluations one after another (correctness
trials, shape check, eager and torch.compile timing). The defaults allow 14 supported tasks x
3 x 3 = 126 candidates; --wall-budget-s stops every search from starting a step after that many
seconds, so the run ends in about that time plus one step (each row records how many
steps ran).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import signal
import statistics
import tempfile
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from result_json import add_json_argument, headline, json_path, write_result

from maxcode.critique.offline import OfflineCritic
from maxcode.evaluate.cuda import CudaEvalConfig, CudaEvaluator
from maxcode.evaluate.result import EvalResult
from maxcode.policy.offline_cuda import OfflineCudaPolicy
from maxcode.records import hardware_fingerprint, read_jsonl
from maxcode.search.config import Budget, MethodConfig
from maxcode.search.loop import RunContext, run_search
from maxcode.tasks.builtin_cuda import load_builtin_cuda
from maxcode.tasks.kernelbench import load_problem_file
from maxcode.tasks.model import Task


class BatchingEvaluator:
    """Evaluator protocol over one CudaEvaluator shared by concurrent searches: callers
    wait until every search still running has submitted its step, then all candidates
    are evaluated in one ``evaluate_items`` call (compiles in parallel, one GPU queue)."""

    def __init__(self, evaluator: CudaEvaluator, runs: int):
        self.inner = evaluator
        self.name = evaluator.name
        self._active = runs
        self._cond = threading.Condition()
        self._pending: list[tuple[Task, list[str], dict]] = []

    def evaluate(self, task: Task, source: str) -> EvalResult:
        return self.evaluate_many(task, [source])[0]

    def evaluate_many(self, task: Task, sources: Sequence[str]) -> list[EvalResult]:
        slot: dict = {}
        with self._cond:
            self._pending.append((task, list(sources), slot))
            self._flush_if_complete()
            while "results" not in slot and "error" not in slot:
                self._cond.wait()
        if "error" in slot:
            raise slot["error"]
        return slot["results"]

    def finished(self) -> None:
        with self._cond:
            self._active -= 1
            self._flush_if_complete()

    def _flush_if_complete(self) -> None:
        """Called with the lock held; evaluates when every active search is waiting."""
        if not self._pending or len(self._pending) < self._active:
            return
        batch, self._pending = self._pending, []
        items = [(task, s) for task, sources, _ in batch for s in sources]
        try:
            results = self.inner.evaluate_items(items)
        except Exception as err:  # hand the failure to every waiting search
            for _, _, slot in batch:
                slot["error"] = err
        else:
            at = 0
            for _, sources, slot in batch:
                slot["results"] = results[at : at + len(sources)]
                at += len(sources)
        self._cond.notify_all()


def search(task: Task, method: MethodConfig, seed: int, policy, batcher, out: Path) -> dict:
    try:
        ctx = RunContext(task, method, seed, policy, batcher, OfflineCritic())
        run_search(ctx, out)
    finally:
        batcher.finished()
    return summarize(task, policy, out)


def summarize(task: Task, policy: OfflineCudaPolicy, out: Path) -> dict:
    analysis = policy.analyze(task.reference_source, task.metadata["file_name"])
    records = [r for r in read_jsonl(out) if r["kind"] == "candidate"]
    executed = [r for r in records if r["executed"]]
    correct = [r for r in executed if r["evaluation"]["status"] == "ok"]
    best = max(correct, key=lambda r: r["evaluation"]["figures"]["speedup_vs_eager"], default=None)
    first = max(
        (r for r in correct if r["step"] == 0),
        key=lambda r: r["evaluation"]["figures"]["speedup_vs_eager"],
        default=None,
    )
    statuses: dict[str, int] = {}
    for r in executed:
        statuses[r["evaluation"]["status"]] = statuses.get(r["evaluation"]["status"], 0) + 1
    return {
        "task": task.task_id,
        "level": task.metadata.get("level"),
        "file_name": task.metadata["file_name"],
        "family": analysis.plan.family if analysis.plan else None,
        "variants": [p.describe() for p in analysis.variants],
        "best_stages": best["meta"].get("stages") if best else None,
        "unsupported_reason": analysis.reason or None,
        "executed": len(executed),
        "statuses": statuses,
        "correct_found": best is not None,
        "best_speedup_vs_eager": best["evaluation"]["figures"]["speedup_vs_eager"]
        if best
        else None,
        "best_speedup_vs_compiled": best["evaluation"]["figures"].get("speedup_vs_compiled")
        if best
        else None,
        "compiled_reference_error": best["evaluation"]["figures"].get("compiled_reference_error")
        if best
        else None,
        "best_params": best["meta"]["params"] if best else None,
        "best_step": best["step"] if best else None,
        # Not faster than eager (the library): nothing to offer, as ``maxcode optimize`` says.
        "offered": best is not None and best["evaluation"]["figures"]["speedup_vs_eager"] > 1.0,
        "steps": len({r["step"] for r in records}),
        **_where_time_goes(best, first),
        "first_failure": next(
            (
                r["evaluation"]["reason"][:300]
                for r in executed
                if r["evaluation"]["status"] != "ok"
            ),
            None,
        ),
    }


def _where_time_goes(best: dict | None, first: dict | None) -> dict:
    """The best candidate's runtime split into library stages and kernels of its own, next to
    eager and torch.compile (all medians of one evaluation, ms); whether it beat the first
    step's best by more than both runtimes' relative IQRs (a later best inside the timing
    spread is a tie, not a gain of the search)."""
    if best is None:
        return {}
    figures = best["evaluation"]["figures"]
    runtime = figures.get("runtime_ms", {})
    best_ms = runtime.get("candidate", {}).get("median")
    share = figures.get("own_kernel_share_pct")
    out = {
        "best_ms": best_ms,
        "eager_ms": runtime.get("eager", {}).get("median"),
        "compiled_ms": runtime.get("compiled", {}).get("median"),
        "own_kernel_share_pct": share,
        "library_ms": round(best_ms * (1 - share / 100), 4)
        if best_ms is not None and share is not None
        else None,
    }
    if first is not None and best_ms:
        first_ms = first["evaluation"]["figures"]["runtime_ms"]["candidate"]["median"]
        spread = (first["evaluation"]["timing"] or {}).get("candidate_spread", 0.0) + (
            best["evaluation"]["timing"] or {}
        ).get("candidate_spread", 0.0)
        out["first_step_best_ms"] = first_ms
        out["gain_over_first_step"] = round(first_ms / best_ms - 1, 4)
        out["clearly_after_first_step"] = best["step"] > 0 and first_ms / best_ms - 1 > spread
    return out


def aggregate(rows: list[dict], coverage: dict | None = None) -> dict:
    families: dict[str, dict] = {}
    for fam in sorted({r["family"] for r in rows if r["family"]}):
        mine = [r for r in rows if r["family"] == fam]
        eager = [r["best_speedup_vs_eager"] for r in mine if r["correct_found"]]
        compiled = [
            r["best_speedup_vs_compiled"]
            for r in mine
            if r["correct_found"] and r["best_speedup_vs_compiled"] is not None
        ]
        families[fam] = {
            "tasks": len(mine),
            "share_correct": sum(r["correct_found"] for r in mine) / len(mine),
            "mean_speedup_vs_eager": statistics.fmean(eager) if eager else None,
            "median_speedup_vs_eager": statistics.median(eager) if eager else None,
            "mean_speedup_vs_compiled": statistics.fmean(compiled) if compiled else None,
            "median_speedup_vs_compiled": statistics.median(compiled) if compiled else None,
        }
    supported = [r for r in rows if r["family"]]
    levels = {}
    for level in sorted({r["level"] for r in supported if r.get("level") is not None}):
        mine = [r for r in supported if r["level"] == level]
        levels[level] = {"tasks": len(mine), **(coverage or {}).get(level, {}), **_speedups(mine)}
    return {
        "families": families,
        "levels": levels,
        "all": _speedups(supported) if supported else {},
        "supported_tasks": len(supported),
        "unsupported_tasks": len(rows) - len(supported),
        "share_supported_correct": (
            sum(r["correct_found"] for r in supported) / len(supported) if supported else None
        ),
    }


def _speedups(rows: list[dict]) -> dict:
    """Correct share; median, geometric mean and share > 1.0 of the best speedups (a task with
    no correct candidate counts as no speedup: it is left out of the speedup figures)."""
    correct = [r for r in rows if r["correct_found"]]
    out: dict = {
        "share_correct": len(correct) / len(rows),
        "evaluations": sum(r.get("executed", 0) for r in rows),
        "share_best_after_first_step": (
            sum((r.get("best_step") or 0) > 0 for r in correct) / len(correct) if correct else None
        ),
        "share_best_clearly_after_first_step": (
            sum(bool(r.get("clearly_after_first_step")) for r in correct) / len(correct)
            if correct
            else None
        ),
        "not_offered": sorted(r["task"] for r in correct if not r.get("offered", True)),
    }
    # The most a candidate keeping its library stages could reach vs torch.compile, its own
    # kernels free; at or below 1.0 (the library stages alone are slower than torch.compile's
    # whole forward) no kernel of ours can close the gap.
    bounds = {
        r["task"]: r["compiled_ms"] / r["library_ms"]
        for r in correct
        if r.get("library_ms") and r.get("compiled_ms")
    }
    out["library_alone_slower_than_compiled"] = sorted(t for t, b in bounds.items() if b <= 1.0)
    out["library_bound_problems"] = len(bounds)
    out["geomean_vs_compiled_library_bound"] = (
        math.exp(statistics.fmean(math.log(b) for b in bounds.values())) if bounds else None
    )
    for key, name in (("best_speedup_vs_eager", "eager"), ("best_speedup_vs_compiled", "compiled")):
        values = [r[key] for r in rows if r["correct_found"] and r[key]]
        out[f"median_vs_{name}"] = statistics.median(values) if values else None
        out[f"geomean_vs_{name}"] = (
            math.exp(statistics.fmean(math.log(v) for v in values)) if values else None
        )
        out[f"share_above_1_vs_{name}"] = (
            sum(v > 1.0 for v in values) / len(values) if values else None
        )
    return out


def kernelbench_sample(
    kb: Path,
    levels: list[int],
    per_level: list[int],
    seed: int,
    policy: OfflineCudaPolicy,
    coverage: dict | None = None,
) -> list[Task]:
    """``per_level`` supported problems of each level, drawn with ``seed``; ``coverage`` gets
    each level's problem count and supported share."""
    tasks = []
    for level, count in zip(levels, per_level, strict=True):
        folder = kb / f"level{level}"
        if not folder.is_dir():
            raise SystemExit(f"--kernelbench {kb}: no level{level}/ folder")
        supported = []
        for path in sorted(folder.glob("*.py")):
            task = load_problem_file(path, level=level)
            if policy.analyze(task.reference_source, path.name).plan is not None:
                supported.append(task)
        problems = len(list(folder.glob("*.py")))
        if coverage is not None and problems:
            coverage[level] = {"problems": problems, "share_supported": len(supported) / problems}
        tasks += random.Random(seed).sample(supported, min(count, len(supported)))
    return tasks


def _fmt(x: float | None) -> str:
    return f"{x:6.2f}x" if x is not None else "     -"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--depth", type=int, default=3, help="search steps")
    parser.add_argument("--k", type=int, default=3, help="proposals per step")
    parser.add_argument("--seed", type=int, default=0, help="search seed")
    parser.add_argument("--timing-trials", type=int, default=30, help="timed calls per variant")
    parser.add_argument(
        "--wall-budget-s",
        type=float,
        default=240.0,
        help="no search starts a step after this many seconds (the loop's max_wall_s budget)",
    )
    parser.add_argument(
        "--tasks",
        nargs="*",
        help="only these problem file names of the sample or suite (default: all)",
    )
    parser.add_argument(
        "--kernelbench",
        type=Path,
        nargs="?",
        const=Path(os.environ.get("KB", ".kb")) / "KernelBench",
        help="a KernelBench checkout: sample real problems (default $KB/KernelBench)",
    )
    parser.add_argument("--levels", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--per-level", type=int, nargs="+", default=[15, 15])
    parser.add_argument("--sample-seed", type=int, default=0)
    parser.add_argument(
        "--group-size", type=int, default=1000, help="tasks searched side by side at a time"
    )
    parser.add_argument(
        "--cache", type=Path, help="build cache directory (default: a temporary one)"
    )
    parser.add_argument(
        "--logs",
        type=Path,
        help="keep each task's search log (rollout JSONL) here (default: a temporary folder); "
        "on SIGTERM the rows are summarized from the logs as far as they got and written. With "
        "--merge: summarize the rows again from the logs found under this folder",
    )
    parser.add_argument(
        "--fast-inputs",
        action="store_true",
        help="correctness inputs made on the GPU (CudaEvalConfig.fast_inputs): same "
        "distributions, other values than KernelBench's CPU generator, which takes a minute "
        "per candidate on level 1's multi-GB inputs",
    )
    parser.add_argument(
        "--references-only",
        action="store_true",
        help="no search: each sampled task's reference figures (eager and torch.compile, as "
        "the evaluator measures them for every candidate), for --merge",
    )
    parser.add_argument(
        "--merge",
        nargs="+",
        type=Path,
        metavar="JSON",
        help="no GPU: print the search rows of these --json files as one sample; tasks whose "
        "run had no torch.compile figure take it from a --references-only file among them",
    )
    add_json_argument(parser, "offline-cuda-policy")
    args = parser.parse_args()
    args.json = json_path(args.json, "offline-cuda-policy")
    args.coverage = {}
    policy = OfflineCudaPolicy()
    if args.merge:
        rebuild = summarize_from_logs(args.logs, args.kernelbench, policy) if args.logs else None
        rows, seconds, args.coverage, parts = merge(args.merge, rebuild)
        report(rows, seconds, args.coverage)
        _write(args, "merged", rows, seconds, parts)
        return
    if args.kernelbench is not None:
        if len(args.per_level) != len(args.levels):
            parser.error("--per-level needs one count per --levels entry")
        tasks = kernelbench_sample(
            args.kernelbench, args.levels, args.per_level, args.sample_seed, policy, args.coverage
        )
    else:
        tasks = load_builtin_cuda()
    if args.tasks:  # a part of the sample (or of the built-in suite), e.g. what a cut run left
        tasks = [t for t in tasks if t.metadata["file_name"] in args.tasks]
    method = MethodConfig(
        name="traj-critique-best-perf",
        depth=args.depth,
        k=args.k,
        trajectory="all",
        critique=True,
        best=True,
        budget=Budget(max_wall_s=args.wall_budget_s),
    )
    for task in tasks:  # graph capture once per task, before the searches start
        policy.analyze(task.reference_source, task.metadata["file_name"])
    print(f"hardware: {hardware_fingerprint()}")
    if args.references_only:
        print(f"{len(tasks)} tasks, reference figures only (eager and torch.compile)")
    else:
        print(
            f"{len(tasks)} tasks, depth {args.depth}, k {args.k}, seed {args.seed}, {policy.name}, "
            f"no step started after {args.wall_budget_s:.0f} s"
            + (", correctness inputs made on the GPU (--fast-inputs)" if args.fast_inputs else "")
        )
    start = time.perf_counter()
    rows: list[dict] = []
    groups = [tasks[i : i + args.group_size] for i in range(0, len(tasks), args.group_size)]
    with tempfile.TemporaryDirectory(prefix="bench-offline-cuda-") as tmp:
        cache = args.cache or Path(tmp) / "cache"
        logs = args.logs or Path(tmp)
        logs.mkdir(parents=True, exist_ok=True)
        _write_partial_on_sigterm(args, policy, tasks, logs, start)
        config = CudaEvalConfig(timing_trials=args.timing_trials, fast_inputs=args.fast_inputs)
        with CudaEvaluator(config, cache) as evaluator:
            if args.references_only:
                references(evaluator, tasks, args.json)
                return
            for (
                group
            ) in groups:  # results are written after each group (a run cut short keeps them)
                batcher = BatchingEvaluator(evaluator, len(group))
                with ThreadPoolExecutor(len(group)) as pool:
                    futures = [
                        pool.submit(
                            search,
                            t,
                            method,
                            args.seed,
                            policy,
                            batcher,
                            logs / f"{t.task_id}.jsonl",
                        )
                        for t in group
                    ]
                    rows += [f.result() for f in futures]
                _write(args, policy, rows, time.perf_counter() - start)
                print(
                    f"{len(rows)}/{len(tasks)} tasks done, {time.perf_counter() - start:.0f} s",
                    flush=True,
                )
    seconds = time.perf_counter() - start
    report(rows, seconds, args.coverage)
    _write(args, policy, rows, seconds)


def report(rows: list[dict], seconds: float, coverage: dict | None = None) -> None:
    """Per task, per family and per level: correct share and speedups (vs torch.compile marked
    * where it comes from a separate reference-only run, see ``--merge``)."""
    print(
        f"\n{'task':<32} {'family':<12} {'correct':<8} {'vs eager':>9} {'vs compile':>10}  statuses"
    )
    for r in rows:
        print(
            f"{r['task']:<32} {r['family'] or 'unsupported':<12} {r['correct_found']!s:<8} "
            f"{_fmt(r['best_speedup_vs_eager']):>9} {_fmt(r['best_speedup_vs_compiled']):>9}"
            f"{'*' if r.get('vs_compiled_from') else ' '}  "
            f"{r['statuses'] or r['unsupported_reason']}"
        )
        if r["correct_found"] and not r.get("offered", True):
            print("    no candidate faster than eager (the library): nothing to offer")
        if r.get("library_ms") is not None and r.get("compiled_ms"):
            print(
                f"    best {r['best_ms']:.3f} ms = library {r['library_ms']:.3f} + own kernels "
                f"{r['best_ms'] - r['library_ms']:.3f}; eager {r['eager_ms']:.3f}, torch.compile "
                f"{r['compiled_ms']:.3f}; {r['steps']} steps, best at step {r['best_step']}"
                + (" (clearly after the first)" if r.get("clearly_after_first_step") else "")
            )
        if r.get("compiled_reference_error"):
            print(
                f"    torch.compile of the reference failed: {r['compiled_reference_error'][:300]}"
            )
    agg = aggregate(rows, coverage)
    print(
        f"\n{'family':<12} {'tasks':>5} {'correct':>8} {'mean/median vs eager':>22} {'mean/median vs compile':>24}"
    )
    for fam, f in agg["families"].items():
        print(
            f"{fam:<12} {f['tasks']:>5} {f['share_correct']:>8.0%} "
            f"{_fmt(f['mean_speedup_vs_eager'])} / {_fmt(f['median_speedup_vs_eager'])}   "
            f"{_fmt(f['mean_speedup_vs_compiled'])} / {_fmt(f['median_speedup_vs_compiled'])}"
        )
    for level, f in agg["levels"].items():
        print(
            f"level {level}: {f['tasks']} tasks, correct {f['share_correct']:.0%}; vs eager median "
            f"{_fmt(f['median_vs_eager'])} geomean {_fmt(f['geomean_vs_eager'])} share>1 "
            f"{f['share_above_1_vs_eager'] if f['share_above_1_vs_eager'] is not None else '-'}; "
            f"vs compile median {_fmt(f['median_vs_compiled'])} geomean {_fmt(f['geomean_vs_compiled'])} "
            f"share>1 {f['share_above_1_vs_compiled'] if f['share_above_1_vs_compiled'] is not None else '-'}"
        )
        supported = (
            f"{f['share_supported']:.0%} of {f['problems']} problems"
            if "share_supported" in f
            else "-"
        )
        after, clearly = f["share_best_after_first_step"], f["share_best_clearly_after_first_step"]
        print(
            f"    supported {supported}; {f['evaluations']} candidates evaluated; best after "
            f"the first step {f'{after:.0%}' if after is not None else '-'} (by more than the "
            f"timing spread {f'{clearly:.0%}' if clearly is not None else '-'}); not faster than "
            f"eager: {', '.join(f['not_offered']) or 'none'}"
        )
        print(
            "    library stages alone slower than torch.compile's whole forward: "
            f"{', '.join(f['library_alone_slower_than_compiled']) or 'none'}"
        )
        if f["geomean_vs_compiled_library_bound"] is not None:
            print(
                f"    with kernels of our own taking no time, geomean vs compile "
                f"{_fmt(f['geomean_vs_compiled_library_bound'])} (the {f['library_bound_problems']}"
                " problems whose best candidate keeps library stages)"
            )
    if any(r.get("vs_compiled_from") for r in rows):
        print(
            "* vs torch.compile = (the candidate's speedup over eager) / (torch.compile's speedup "
            "over eager, timed interleaved in a reference-only run on the same GPU model)"
        )
    evaluations = sum(r["executed"] for r in rows)
    print(f"budget used: {evaluations} candidates evaluated, {seconds:.0f} s wall")
    share = agg["share_supported_correct"]
    print(
        f"\ncorrect candidate for {share:.0%} of {agg['supported_tasks']} supported tasks "
        f"({agg['unsupported_tasks']} unsupported); {seconds:.0f} s"
    )


def references(evaluator: CudaEvaluator, tasks: list[Task], out: Path | None) -> None:
    """Each task's eager and torch.compile figures; written after each task (a cut run keeps them)."""
    rows = []
    for task in tasks:
        t0 = time.perf_counter()
        got = evaluator.reference_figures(task)
        ref = got["reference"] or {}
        eager = (ref.get("eager") or {}).get("median")
        compiled = (ref.get("compiled") or {}).get("median")
        rows.append(
            {
                "task": task.task_id,
                "file_name": task.metadata["file_name"],
                "eager_ms": eager,
                "compiled_ms": compiled,
                "compiled_speedup_over_eager": round(eager / compiled, 4)
                if eager and compiled
                else None,
                "error": got.get("reference_error") or ref.get("compiled_reference_error"),
                "seconds": round(time.perf_counter() - t0, 1),
            }
        )
        r = rows[-1]
        print(
            f"{r['task']:<32} eager {eager or float('nan'):9.4f} ms  torch.compile "
            f"{compiled or float('nan'):9.4f} ms  ({r['seconds']} s) {r['error'] or ''}",
            flush=True,
        )
        write_result("offline-cuda-policy", {"references": rows}, None, out)


def merge(paths: list[Path], rebuild=None) -> tuple[list[dict], float, dict, list[dict]]:
    """Search rows of several runs (parts of one sample) as one list, each passed through
    ``rebuild`` if given, and each part's provenance (where it ran); a row with no
    torch.compile figure gets one from a reference-only run: its speedup over eager divided by
    torch.compile's."""
    rows, refs, seconds, coverage, parts = [], {}, 0.0, {}, []
    for path in paths:
        record = json.loads(path.read_text())
        data = record.get("data", record)  # a result file, or a bare one from before result_json
        parts.append(
            {key: record.get(key) for key in ("date", "commit", "hardware", "command")}
            | {"seconds": data.get("seconds"), "tasks": len(data.get("rows", []))}
        )
        rows += [rebuild(r) if rebuild else r for r in data.get("rows", [])]
        coverage.update({int(k): v for k, v in data.get("coverage", {}).items()})
        seconds += data.get("seconds", 0.0)
        refs.update({r["task"]: r for r in data.get("references", [])})
    for r in rows:
        ref = refs.get(r["task"], {})
        ratio = ref.get("compiled_speedup_over_eager")
        if r["best_speedup_vs_compiled"] is None and r["best_speedup_vs_eager"] and ratio:
            r["best_speedup_vs_compiled"] = round(r["best_speedup_vs_eager"] / ratio, 4)
            r["vs_compiled_from"] = "reference-only run"
            r["compiled_reference_error"] = None
    return rows, seconds, coverage, parts


def summarize_from_logs(logs: Path, kb: Path | None, policy: OfflineCudaPolicy):
    """For --merge --logs: a row summarized again from its task's search log (found anywhere
    under ``logs``), so rows written by an older summary gain its newer fields."""

    def rebuild(row: dict) -> dict:
        found = sorted(logs.rglob(f"{row['task']}.jsonl"))
        if not found:
            return row
        if kb is None:
            raise SystemExit("--merge --logs needs --kernelbench (the checkout the runs used)")
        task = load_problem_file(kb / f"level{row['level']}" / row["file_name"], level=row["level"])
        return {**summarize(task, policy, found[0]), **({"cut": True} if row.get("cut") else {})}

    return rebuild


def _write_partial_on_sigterm(
    args: argparse.Namespace, policy: OfflineCudaPolicy, tasks: list[Task], logs: Path, start: float
) -> None:
    """A run stopped by SIGTERM (``timeout``) still writes its rows: each task summarized from
    the steps its log holds so far, marked ``cut``."""

    def handler(signum, frame):
        rows = []
        for task in tasks:
            log = logs / f"{task.task_id}.jsonl"
            if log.is_file():  # read_jsonl skips a record cut mid-write
                rows.append({**summarize(task, policy, log), "cut": True})
        _write(args, policy, rows, time.perf_counter() - start)
        print(f"stopped by signal {signum}: {len(rows)} rows written from the logs", flush=True)
        os._exit(128 + signum)

    signal.signal(signal.SIGTERM, handler)


def _write(
    args: argparse.Namespace,
    policy: OfflineCudaPolicy | str,
    rows: list[dict],
    seconds: float,
    parts: list[dict] | None = None,
) -> None:
    summary = aggregate(rows, args.coverage)
    data = {
        "policy": policy if isinstance(policy, str) else policy.name,
        "depth": args.depth,
        "fast_inputs": args.fast_inputs,
        "k": args.k,
        "seed": args.seed,
        "seconds": seconds,
        "evaluations": sum(r["executed"] for r in rows),
        "rows": rows,
        "coverage": args.coverage,
        "aggregate": summary,
        **({"parts": parts} if parts else {}),
    }
    found = sum(bool(r.get("correct_found")) for r in rows)
    headlines = [headline("tasks with a correct candidate", f"{found}/{len(rows)}")]
    for level, figures in summary["levels"].items():
        for key, label in (
            ("geomean_vs_eager", "geomean speedup over eager"),
            ("geomean_vs_compiled", "geomean vs torch.compile"),
        ):
            if figures.get(key) is not None:
                headlines.append(headline(f"level {level}: {label}", round(figures[key], 2), "x"))
    measured_on = "; ".join(sorted({p["hardware"] for p in parts or [] if p.get("hardware")}))
    write_result("offline-cuda-policy", data, headlines, args.json, measured_on=measured_on or None)


if __name__ == "__main__":
    main()
