"""Public candidate sets through CudaEvaluator: throughput, and agreement with the published labels.

Two sets (``--source``, both read by ``public_candidates.py``):

* ``kernelbench-runs`` (default): one-shot LLM generations for KernelBench levels 1 and 2 with
  the verdicts KernelBench's own harness gave them (``$KB/runs/<run>/``, A100-40GB labels), a
  deterministic stratified sample of ``-n`` of them (default 64).
* ``cuda-l1``: CUDA-L1's published H100 set (``--h100``; ``--variant``: its ``custom_code``
  or one of its baselines) with its reported speedups, ``-n`` of them spread over the static
  technique classes (CUDA graphs, stored output, TF32, cudnn.benchmark, custom kernel, lower
  precision, torch.compile, torch rewrite; default: all). Instead of the agreement table, each
  pass prints per primary class and per technique the candidates' count, our verdicts, the
  check ids that rejected them, and our median speedup beside CUDA-L1's reported one.
  ``--with-kernel`` keeps the candidates (of either set) that define
  a kernel of their own, so the dynamic checks decide them.

Modes:

* ``ours`` (default): the sample through ``CudaEvaluator.evaluate_items`` in ``--passes``
  over one build cache: ``cold`` (fresh), ``warm`` (rebuilds nothing; re-run and re-timed on
  the GPU), ``warm2`` (``--twice`` runs all three). Prints candidates/min, first-result latency,
  seconds per stage (from each result's figures), peak GPU memory per candidate, the
  agreement table against the labels with each disagreement's cause and evidence (CUDA-L1:
  the per-class tables), and the median run-to-run speedup difference between two passes
  over the same candidates.
* ``kernelbench`` (``kernelbench-runs``): KernelBench's own ``eval_kernel_against_ref``
  (``--kb-src``, default ``$KB/src``) on the first ``--kb-n`` candidates of the same sample,
  as its scripts run it (parallel pre-compile, then each candidate in a fresh process; with
  ``--kb-jobs`` above 1, that many at once, each as soon as its build is done): its
  per-candidate seconds and its verdicts on this GPU (read by the published labels' rules),
  the peer figure for throughput and a same-GPU label; with ``--ours-json``, the agreement
  table against ours, each disagreement with its named cause.
* ``--dry-run``: list the sample, load every problem and run our static checks (no GPU).
* ``--merge A.json B.json ...``: one report over parts of a sample run with ``--skip``.

Results: ``cuda-real-candidates`` (ours), ``cuda-real-candidates-kernelbench`` (kernelbench),
``cuda-l1`` (``--source cuda-l1``).

Both modes first print the host (CPU model, cores, load, and the speed of torch's serial CPU
generator, which the large level-1 inputs are made with): the throughput follows the host's
CPU. ``--set key=value`` (repeatable) overrides a CudaEvalConfig field (values parsed as
YAML), so the same command runs under any evaluator settings. A figure the evaluator does not
report prints as ``n/a``. Every figure is measured in this run; ``--json`` keeps them all.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import fields
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).parent))

from public_candidates import (
    CAUSES,
    CLASSES,
    CUDA_L1_VARIANTS,
    DOCUMENTED,
    VERDICTS,
    CorpusError,
    CudaL1Candidate,
    RealCandidate,
    agrees,
    defines_a_kernel,
    disagreement_cause,
    first_line,
    load_cuda_l1,
    load_runs,
    primary_class,
    same_gpu_cause,
    spread_over_classes,
    stratified_sample,
    techniques,
)
from result_json import add_json_argument, headline, json_path, write_result

from maxcode.evaluate.cuda import CudaEvalConfig, CudaEvaluator
from maxcode.evaluate.result import EvalResult

RUNS = (
    "gemini_level1_run",
    "gemini_level2_run",
    "qwen3_level1_run",
    "qwencoder_level1_run",
    "qwencoder_level2_run",
)
PASSES = ("cold", "warm", "warm2")
RUNS_SOURCE, CUDA_L1_SOURCE = "kernelbench-runs", "cuda-l1"
SOURCE_DEFAULTS = {
    RUNS_SOURCE: {"n": 64, "levels": [1, 2], "passes": ["cold", "warm"]},
    CUDA_L1_SOURCE: {"n": 0, "levels": [1, 2, 3], "passes": ["cold"]},
}
"""Per set: sample size (0: all), levels, passes."""
BENCHMARKS = {
    (RUNS_SOURCE, "ours"): "cuda-real-candidates",
    (RUNS_SOURCE, "kernelbench"): "cuda-real-candidates-kernelbench",
    (CUDA_L1_SOURCE, "ours"): "cuda-l1",
}
Candidate = RealCandidate | CudaL1Candidate


def parse_overrides(pairs: list[str]) -> dict[str, Any]:
    """``key=value`` pairs for CudaEvalConfig.from_dict: YAML values (numbers, booleans, lists,
    mappings), except for a string field, which keeps the text as written ('9.0' stays a string)."""
    string_fields = {f.name for f in fields(CudaEvalConfig) if f.type in (str, "str")}
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise CorpusError(f"--set {pair!r}: expected key=value, e.g. --set timing_trials=50")
        out[key] = value if key in string_fields else yaml.safe_load(value)
    return out


SLOT_STAGE = "in a GPU slot (wall)"
INPUTS_AHEAD_STAGE = "waiting for inputs made ahead"
INPUTS_HELD_STAGE = "queued while its inputs were made ahead"
LARGE_PEAK_MB = 15_000.0
"""Candidates peaking above this are the multi-GB level-1 problems (14 of the default 64-candidate sample)."""


def slot_occupancy(rows: list[dict[str, Any]], slots: int) -> dict[str, Any] | None:
    """How full the GPU slots were from the first admission to the last result: the slot
    seconds of every candidate over ``slots`` times that span, and the large candidates' share
    of them (with their seconds waiting for CPU-made inputs). None without slot times."""
    held = [
        (r["arrival_s"] - r["stage_seconds"][SLOT_STAGE], r) for r in rows
        if SLOT_STAGE in r["stage_seconds"]
    ]  # fmt: skip
    if not held:
        return None
    span = max(r["arrival_s"] for _, r in held) - min(start for start, _ in held)
    total = sum(r["stage_seconds"][SLOT_STAGE] for _, r in held)
    large = [r for _, r in held if (r["peak_gpu_memory_mb"] or 0) > LARGE_PEAK_MB]
    large_s = sum(r["stage_seconds"][SLOT_STAGE] for r in large)
    return {
        "slots": slots,
        "span_s": round(span, 2),
        "slot_seconds": round(total, 2),
        "busy_slots_mean": round(total / span, 2) if span > 0 else None,
        "large_candidates": len(large),
        "large_slot_seconds": round(large_s, 2),
        "large_made_ahead": sum(1 for r in large if r.get("trial_inputs_made_ahead")),
        "large_inputs_wait_s": round(
            sum(
                r["stage_seconds"].get("correctness_inputs", 0.0)
                + r["stage_seconds"].get(INPUTS_AHEAD_STAGE, 0.0)
                for r in large
            ),
            2,
        ),
    }


def stage_seconds(result: EvalResult) -> dict[str, float]:
    """Seconds per stage of one evaluation, as its figures report them (compile: the build jobs)."""
    fig = result.figures
    out: dict[str, float] = {}
    if not fig.get("build_cached") and "compile_seconds" in fig:
        out["compile"] = fig["compile_seconds"]
    if not fig.get("build_cached") and "compile_wall_seconds" in fig:
        out["compile (job wall)"] = fig["compile_wall_seconds"]
    if "gpu_queue_seconds" in fig:
        out["queued for the GPU"] = fig["gpu_queue_seconds"]
    if "inputs_ahead_queue_seconds" in fig:  # of that, while its task's inputs were made ahead
        out[INPUTS_HELD_STAGE] = fig["inputs_ahead_queue_seconds"]
    if "gpu_slot_seconds" in fig:
        out[SLOT_STAGE] = fig["gpu_slot_seconds"]
    if "inputs_ready_wait_seconds" in fig:  # in its slot, before its process started
        out[INPUTS_AHEAD_STAGE] = fig["inputs_ready_wait_seconds"]
    for name, seconds in (fig.get("stage_seconds") or {}).items():
        out[name] = seconds
    if "reference_wait_seconds" in fig:
        out["reference (wait)"] = fig["reference_wait_seconds"]
    for name, seconds in (fig.get("reference_stage_seconds") or {}).items():
        out[f"reference: {name}"] = seconds  # where the wait went, when it measured the reference
    return out


def peak_gpu_memory_mb(result: EvalResult) -> float | None:
    """The candidate process's peak GPU memory (MiB, the worker's ``peak_gpu_mb``); None (n/a)
    where the candidate never reached the GPU."""
    return result.figures.get("peak_gpu_mb")


def run_pass(
    name: str,
    sample: list[Candidate],
    config: CudaEvalConfig,
    cache: Path,
    save: Callable[[dict[str, Any]], None],
) -> dict[str, Any]:
    """One pass of the sample through the evaluator; each row is saved as its result arrives,
    so a run stopped by a time limit keeps what it measured."""
    items = [(c.task(), c.source) for c in sample]
    rows: list[dict[str, Any] | None] = [None] * len(items)
    summary: dict[str, Any] = {"pass": name, "cache": str(cache), "candidates": len(items)}
    lock = threading.Lock()
    t0 = time.monotonic()

    def on_result(index: int, result: EvalResult) -> None:
        arrival = time.monotonic() - t0
        with lock:
            rows[index] = _row(sample[index], result, arrival)
            summary["rows"] = [r for r in rows if r is not None]
            save(summary)
            n = len(summary["rows"])
        print(
            f"  [{name} {n}/{len(items)} {arrival:6.1f} s] {sample[index].key}: {result.status.value}",
            flush=True,
        )

    with CudaEvaluator(config, cache) as ev:
        ev.evaluate_items(items, on_result=on_result)
        slots = ev.gpu_slot_count
    wall = time.monotonic() - t0
    arrivals = [r["arrival_s"] for r in summary["rows"]]
    gpu_arrivals = [
        r["arrival_s"] for r in summary["rows"] if r["stage_seconds"].get("load") is not None
    ]
    summary.update(
        gpu_slots=slots,
        wall_s=round(wall, 2),
        candidates_per_min=round(60 * len(items) / wall, 2),
        first_result_s=round(min(arrivals), 2),
        first_gpu_result_s=round(min(gpu_arrivals), 2) if gpu_arrivals else None,
    )
    print(
        f"{name}: {len(items)} candidates in {wall:.1f} s = {summary['candidates_per_min']} per min; "
        f"first result after {summary['first_result_s']} s, first from the GPU after "
        f"{_fmt(summary['first_gpu_result_s'], ' s')}",
        flush=True,
    )
    return summary


def published(c: Candidate) -> dict[str, Any]:
    """What the set says of a candidate: KernelBench's label, or CUDA-L1's classes and score."""
    if isinstance(c, CudaL1Candidate):
        return {
            "candidate": c.key,
            "class": primary_class(c.source),
            "techniques": techniques(c.source),
            "score": c.score,
        }
    return {"candidate": c.key, "label": c.label.verdict, "hardware": c.label.hardware}


def _label_fields(c: RealCandidate, r: EvalResult) -> dict[str, Any]:
    agree = agrees(c.label.verdict, r.status.value)
    return {
        "problem": c.problem_file.name,
        "problem_differs_from_upstream": c.differs_from_upstream,
        "label": c.label.verdict,
        "label_error": c.label.error,
        "label_hardware": c.label.hardware,
        "label_runtime_ms": c.label.runtime_ms,
        "agree": agree,
        "cause": None
        if agree
        else disagreement_cause(
            c.problem_file.read_text(), c.label, r.status.value, r.reason, c.source
        ),
    }


def _row(c: Candidate, r: EvalResult, arrival: float) -> dict[str, Any]:
    if isinstance(c, CudaL1Candidate):
        row = published(c)
    else:
        row = {"candidate": c.key, **_label_fields(c, r)}
    return row | {
        "ours": r.status.value,
        "reason": first_line(r.reason),
        "speedup": r.speedup,
        "stage_seconds": stage_seconds(r),
        "peak_gpu_memory_mb": peak_gpu_memory_mb(r),
        "failed_check": r.figures.get("failed_check"),
        "build_cached": r.figures.get("build_cached"),
        "arrival_s": round(arrival, 2),
        "sandbox": r.sandbox,
        "run_alone_after": r.figures.get("run_alone_after"),
        "paused_s": r.figures.get("paused_seconds"),
        "trial_inputs_ahead": r.figures.get("trial_inputs_ahead"),
        "trial_inputs_made_ahead": r.figures.get("trial_inputs_made_ahead", False),
        "warnings": r.figures.get("warnings", []),
        "tf32": r.figures.get("tf32"),
    }


def _fmt(value: float | None, unit: str = "", digits: int = 1) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}{unit}"


def print_stages(summary: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Median, max and total seconds per stage over the candidates that reached it."""
    per_stage: dict[str, list[float]] = defaultdict(list)
    for row in summary["rows"]:
        for stage, seconds in row["stage_seconds"].items():
            per_stage[stage].append(seconds)
    table = {
        stage: {
            "n": len(v),
            "median_s": round(statistics.median(v), 3),
            "max_s": round(max(v), 3),
            "total_s": round(sum(v), 2),
        }
        for stage, v in per_stage.items()
    }
    print(f"\nseconds per stage ({summary['pass']}):")
    print(f"  {'stage':22s} {'n':>4s} {'median':>8s} {'max':>8s} {'total':>9s}")
    for stage, s in table.items():
        print(
            f"  {stage:22s} {s['n']:4d} {s['median_s']:8.2f} {s['max_s']:8.2f} {s['total_s']:9.1f}"
        )
    peaks = [
        (r["candidate"], r["peak_gpu_memory_mb"]) for r in summary["rows"] if r["stage_seconds"]
    ]
    print("peak GPU memory per candidate (MiB):")
    for key, mb in peaks:
        print(f"  {key:34s} {_fmt(mb, '', 0)}")
    return table


def print_agreement(summary: dict[str, Any]) -> dict[str, Any]:
    """Rows: KernelBench's label; columns: our verdict. Then each disagreement with its cause."""
    rows = summary["rows"]
    ours_cols = sorted(
        {r["ours"] for r in rows},
        key=lambda s: (s not in VERDICTS, VERDICTS.index(s) if s in VERDICTS else s),
    )
    counts = Counter((r["label"], r["ours"]) for r in rows)
    tf32 = ", ".join(sorted({str(r.get("tf32")) for r in rows}))
    print(
        f"\nagreement with KernelBench's labels ({summary['pass']}, tf32: {tf32}; rows: label, columns: ours):"
    )
    print(f"  {'label / ours':16s}" + "".join(f"{c:>15s}" for c in ours_cols))
    for label in VERDICTS:
        print(f"  {label:16s}" + "".join(f"{counts[(label, c)]:15d}" for c in ours_cols))
    agree = sum(r["agree"] for r in rows)
    by_cause = Counter(r["cause"] for r in rows if not r["agree"])
    documented = sum(n for cause, n in by_cause.items() if cause in DOCUMENTED)
    print(
        f"agree: {agree}/{len(rows)}; disagreements by cause: "
        + ", ".join(f"{c} {by_cause[c]}" for c in CAUSES if by_cause[c])
    )
    if len(rows) > documented:
        print(
            f"agreement where the disagreement is not a documented difference: {agree}/{len(rows) - documented} = {agree / (len(rows) - documented):.1%}"
        )
    for r in rows:
        if not r["agree"]:
            print(
                f"  {r['candidate']:34s} label {r['label']:13s} ours {r['ours']:13s} [{r['cause']}]"
            )
            print(
                f"      label: {r['label_error'] or r['label']}\n      ours:  {r['reason'] or r['ours']}"
            )
    return {
        "table": {f"{label}|{ours}": n for (label, ours), n in counts.items()},
        "agree": agree,
        "n": len(rows),
        "by_cause": dict(by_cause),
        "documented_differences": documented,
    }


def run_to_run(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Relative difference of each candidate's speedup between two passes (timed in both)."""
    speedups = {r["candidate"]: r["speedup"] for r in a["rows"] if r["speedup"]}
    diffs = [
        abs(r["speedup"] - speedups[r["candidate"]]) / speedups[r["candidate"]]
        for r in b["rows"]
        if r["speedup"] and r["candidate"] in speedups
    ]
    out = {
        "passes": [a["pass"], b["pass"]],
        "n": len(diffs),
        "median": round(statistics.median(diffs), 4) if diffs else None,
        "max": round(max(diffs), 4) if diffs else None,
    }
    print(
        f"run-to-run speedup difference {a['pass']} vs {b['pass']} over {out['n']} timed candidates: "
        f"median {_fmt(out['median'] and 100 * out['median'], '%', 2)}, max {_fmt(out['max'] and 100 * out['max'], '%', 1)}"
    )
    return out


def per_class_table(rows: list[dict[str, Any]], key: str) -> dict[str, dict[str, Any]]:
    """Per CUDA-L1 class (``key``: 'class' or 'techniques'): count, verdicts, check ids, median
    speedups, ours and CUDA-L1's reported ones."""
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        names = row[key] if isinstance(row[key], list) else [row[key]]
        for name in names or ["torch rewrite"]:
            groups[name].append(row)
    table = {}
    for name in CLASSES:
        members = groups.get(name, [])
        if not members:
            continue
        ours = [r["speedup"] for r in members if r.get("speedup")]
        theirs = [r["score"] for r in members if r.get("speedup") and r["score"]]
        table[name] = {
            "n": len(members),
            "verdicts": dict(Counter(r.get("ours", "not run") for r in members)),
            "checks": dict(Counter(r["failed_check"] for r in members if r.get("failed_check"))),
            "our_median_speedup": round(statistics.median(ours), 3) if ours else None,
            "their_median_speedup": round(statistics.median(theirs), 3) if theirs else None,
        }
    return table


def print_class_tables(rows: list[dict[str, Any]], into: dict[str, Any]) -> None:
    """The per-class and per-technique tables of CUDA-L1 rows, printed and kept in ``into``."""
    into["by_class"] = per_class_table(rows, "class")
    into["by_technique"] = per_class_table(rows, "techniques")
    for title, key in (
        ("per primary class (a candidate counts once):", "by_class"),
        ("per technique (a candidate counts under each technique it uses):", "by_technique"),
    ):
        print(f"\n{title}")
        print(
            f"  {'class':18s} {'n':>4s}  {'ours / theirs (median speedup)':32s} verdicts; rejecting checks"
        )
        for name, t in into[key].items():
            ours = "n/a" if t["our_median_speedup"] is None else f"{t['our_median_speedup']:.2f}x"
            theirs = (
                "n/a" if t["their_median_speedup"] is None else f"{t['their_median_speedup']:.2f}x"
            )
            verdicts = ", ".join(f"{v} {n}" for v, n in sorted(t["verdicts"].items()))
            checks = ", ".join(f"{c} {n}" for c, n in sorted(t["checks"].items())) or "-"
            print(f"  {name:18s} {t['n']:4d}  {ours:>9s} / {theirs:<20s} {verdicts}; {checks}")


def mode_ours(args: argparse.Namespace, sample: list[Candidate], report: dict) -> None:
    config = CudaEvalConfig.from_dict(parse_overrides(args.set), origin="--set")
    report["config"] = config.to_dict()
    args.work.mkdir(parents=True, exist_ok=True)
    # fresh unless given: a cold build cache
    cache = args.cache or Path(tempfile.mkdtemp(prefix="cache-", dir=args.work))
    report["passes"] = []
    for name in args.passes:
        report["passes"].append({"pass": name})
        if not args.keep_references:  # each pass times the references again: an honest spread
            shutil.rmtree(cache / "references", ignore_errors=True)

        def save(summary: dict[str, Any]) -> None:
            report["passes"][-1] = summary
            _write(args.json, report)

        timed = sample
        if name != "cold" and args.warm_timed_only:  # the spread concerns the timed ones
            cold = report["passes"][0]
            correct = {r["candidate"] for r in cold.get("rows", []) if r["ours"] == "ok"}
            timed = [c for c in sample if c.key in correct]
        summary = run_pass(name, timed, config, cache, save)
        summarize_pass(summary, args.source)
        save(summary)
    report["run_to_run"] = compare_passes(report["passes"])
    _write(args.json, report)


def summarize_pass(summary: dict[str, Any], source: str) -> None:
    levels = Counter(r.get("sandbox") or "n/a (static verdict)" for r in summary["rows"])
    print(f"\nsandbox level of the results ({summary['pass']}):")
    for level, n in levels.most_common():
        print(f"  {n:4d}  {level}")
    again = [r for r in summary["rows"] if r.get("run_alone_after")]
    paused = [r["paused_s"] for r in summary["rows"] if r.get("paused_s")]
    print(
        f"run again with the GPU alone (out of memory or time beside others): {len(again)}"
        + "".join(f"\n  {r['candidate']}: {r['run_alone_after']}" for r in again)
    )
    if paused:
        print(
            f"seconds candidates' processes stood still for a neighbour's timing: median "
            f"{statistics.median(paused):.1f}, max {max(paused):.1f}, total {sum(paused):.0f}"
        )
    summary["stages"] = print_stages(summary)
    # a merged report's parts each had their own evaluator and clock: no occupancy there
    slots = summary.get("gpu_slots")
    summary["slots"] = slot_occupancy(summary["rows"], slots) if slots else None
    if summary["slots"]:
        o = summary["slots"]
        print(
            f"GPU slots: {o['busy_slots_mean']} of {o['slots']} busy on average over "
            f"{o['span_s']:.0f} s (first admission to last result); candidates peaking over "
            f"{LARGE_PEAK_MB / 1000:.0f} GB: {o['large_candidates']}, "
            f"{o['large_slot_seconds']:.0f} of {o['slot_seconds']:.0f} slot seconds, "
            f"{o['large_inputs_wait_s']:.0f} s of it waiting for CPU-made inputs "
            f"({o['large_made_ahead']} of them had their inputs made ahead)"
        )
    if source == CUDA_L1_SOURCE:
        print_class_tables(summary["rows"], summary)
    else:
        summary["agreement"] = print_agreement(summary)


def compare_passes(passes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Run-to-run speedup differences between consecutive passes over the same candidates."""
    return [run_to_run(a, b) for a, b in itertools.pairwise(passes)]


def mode_merge(paths: list[Path], report: dict) -> None:
    """Several parts of one sample (``--skip``) as one: their rows per pass, summed wall times."""
    parts = [json.loads(p.read_text()) for p in paths]
    parts = [p.get("data", p) for p in parts]  # result files, or bare ones from before result_json
    report["source"] = parts[0].get("source", RUNS_SOURCE)
    names = [p["pass"] for p in parts[0].get("passes", [])]
    merged = []
    for i, name in enumerate(names):
        rows = [r for part in parts for r in part["passes"][i]["rows"]]
        wall = sum(part["passes"][i].get("wall_s", 0.0) for part in parts)
        summary = {
            "pass": name,
            "candidates": len(rows),
            "wall_s": round(wall, 2),
            "candidates_per_min": round(60 * len(rows) / wall, 2) if wall else None,
            "parts": [str(p) for p in paths],
            "rows": rows,
        }
        print(
            f"{name}: {len(rows)} candidates in {len(parts)} parts, {wall:.1f} s of evaluation = "
            f"{_fmt(summary['candidates_per_min'], ' per min', 2)} (parts run one after another, each with its own evaluator)"
        )
        summarize_pass(summary, report["source"])
        merged.append(summary)
    report["passes"] = merged
    report["run_to_run"] = compare_passes(merged)


def mode_kernelbench(args: argparse.Namespace, sample: list[RealCandidate], report: dict) -> None:
    """KernelBench's harness on the first --kb-n candidates, as its own scripts run it: a
    parallel pre-compile, then each candidate in a fresh process. With --kb-jobs above 1 a
    candidate is evaluated as soon as its build is done, so a run cut short still has rows;
    with 1 the evaluations wait for every build (its timings need the CPU to themselves). A
    rerun with the same --json and --work resumes: candidates with a row are not run again."""
    from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor, as_completed, wait
    from multiprocessing import get_context

    from kernelbench_harness import precompile

    chosen = sample[: args.kb_n]
    earlier = _earlier_kernelbench_rows(args.json, {c.key for c in chosen})
    todo = [c for c in chosen if c.key not in earlier]
    if earlier:
        print(f"KernelBench: {len(earlier)} candidates have a row in {args.json}; {len(todo)} left")
    builds = args.work / "kernelbench-builds"
    dirs = {c.key: str(builds / c.key.replace("/", "_")) for c in todo}
    for d in dirs.values():  # torch's build lock, left by a run killed mid-build, blocks forever
        for lock in Path(d).glob("*/lock"):
            lock.unlink()
    rows = dict(earlier)
    lock = threading.Lock()
    t_start = time.monotonic()
    t_pre: float | None = None  # known once every build is done

    def evaluate(c: RealCandidate, built: tuple[bool, str]) -> None:
        ok, err = built
        t = time.monotonic()
        verdict = (
            _kb_verdict_or_crash(
                str(args.kb_src), c.problem_file.read_text(), c.source, dirs[c.key]
            )
            if ok
            else {"category": "compile_error", "speedup": None, "detail": first_line(err)}
        )
        seconds = time.monotonic() - t
        row = {
            "candidate": c.key,
            "label": c.label.verdict,
            "kernelbench_here": verdict["category"],
            "detail": first_line(str(verdict.get("detail", ""))),
            # timings taken beside other evaluations are no speedup figure
            "speedup": verdict.get("speedup") if args.kb_jobs == 1 else None,
            "eval_seconds": round(seconds, 2),
        }
        with lock:
            rows[c.key] = row
            print(
                f"  {c.key:34s} label {c.label.verdict:13s} KernelBench here {row['kernelbench_here']:13s} {seconds:6.1f} s  {row['detail'][:100]}",
                flush=True,
            )
            report["kernelbench"] = _kernelbench_report(chosen, rows, args.kb_jobs, t_pre)
            _write(args.json, report)

    with (
        ProcessPoolExecutor(os.cpu_count(), mp_context=get_context("spawn")) as compiler,
        ThreadPoolExecutor(args.kb_jobs) as evaluator,
    ):
        building = {
            compiler.submit(precompile, (str(args.kb_src), c.source, dirs[c.key])): c for c in todo
        }
        if args.kb_jobs == 1:
            wait(building)
        evaluations = [
            evaluator.submit(evaluate, building[f], f.result()) for f in as_completed(building)
        ]
        t_pre = time.monotonic() - t_start
        print(
            f"KernelBench: parallel pre-compile of {len(todo)} candidates ({os.cpu_count()} processes) done after {t_pre:.1f} s",
            flush=True,
        )
        for f in evaluations:
            f.result()
    wall = time.monotonic() - t_start
    report["kernelbench"] = _kernelbench_report(chosen, rows, args.kb_jobs, t_pre)
    ordered = report["kernelbench"]["rows"]
    secs = [rows[c.key]["eval_seconds"] for c in todo]
    report["kernelbench"].update(
        {
            "wall_s": round(wall, 2),
            "per_candidate_median_s": round(statistics.median(secs), 2) if secs else None,
            "per_candidate_with_precompile_s": round(wall / len(todo), 2) if todo else None,
        }
    )
    per_min = f"{60 * len(todo) / wall:.2f} per min" if todo else "nothing left to run"
    print(
        f"KernelBench's harness: {len(todo)} candidates, {args.kb_jobs} at a time, {wall:.1f} s "
        f"with the pre-compile (median {_fmt(report['kernelbench']['per_candidate_median_s'], ' s')} "
        f"each to evaluate) = {per_min}; same verdict as the A100 label: "
        f"{sum(r['label'] == r['kernelbench_here'] for r in ordered)}/{len(ordered)}"
    )
    if args.ours_json:
        print_same_gpu_agreement(args.ours_json, ordered, report)
    _write(args.json, report)


def _earlier_kernelbench_rows(path: Path, keys: set[str]) -> dict[str, dict]:
    """The rows an earlier run of this sample wrote to ``path`` (empty when there is none)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return {}
    rows = data.get("data", data).get("kernelbench", {}).get("rows", [])
    return {r["candidate"]: r for r in rows if r.get("candidate") in keys}


def _kernelbench_report(
    chosen: list[RealCandidate], rows: dict, jobs: int, t_pre: float | None
) -> dict:
    return {
        "jobs": jobs,
        "precompile_wall_s": round(t_pre, 2) if t_pre is not None else None,
        "rows": [rows[c.key] for c in chosen if c.key in rows],
    }


def print_same_gpu_agreement(ours_json: Path, kb_rows: list[dict], report: dict) -> None:
    """Ours (the first pass of an ours-mode JSON of the same sample) against KernelBench's
    harness on this GPU, candidate by candidate; each disagreement with its named cause."""
    data = json.loads(ours_json.read_text())
    passes = data.get("data", data).get("passes") or [{}]
    ours = {r["candidate"]: r for r in passes[0].get("rows", [])}
    rows = []
    for kb in kb_rows:
        mine = ours.get(kb["candidate"])
        if mine is None:
            continue
        agree = mine["ours"] == kb["kernelbench_here"]
        rows.append(
            {
                "candidate": kb["candidate"],
                "ours": mine["ours"],
                "kernelbench_here": kb["kernelbench_here"],
                "agree": agree,
                "cause": None if agree else same_gpu_cause(mine, kb),
                "tf32": mine.get("tf32"),
                "ours_reason": mine.get("reason", ""),
                "kernelbench_detail": kb["detail"],
            }
        )
    tf32 = sorted({str(r["tf32"]) for r in rows})
    print(f"\nours vs KernelBench's harness on this GPU (tf32: {', '.join(tf32)}):")
    print("  " + " ".join(f"{v[:9]:>9s}" for v in ("KB \\ ours", *VERDICTS, "rejected", "timeout")))
    for kb_verdict in (*VERDICTS, "timeout"):
        counts = [
            sum(r["kernelbench_here"] == kb_verdict and r["ours"] == v for r in rows)
            for v in (*VERDICTS, "rejected", "timeout")
        ]
        print("  " + " ".join(f"{x:>9}" for x in (kb_verdict[:9], *counts)))
    by_cause = Counter(r["cause"] for r in rows if not r["agree"])
    print(
        f"agree: {sum(r['agree'] for r in rows)}/{len(rows)}; disagreements by cause: "
        + (", ".join(f"{c} {n}" for c, n in by_cause.items()) or "none")
    )
    for r in rows:
        if not r["agree"]:
            print(
                f"  {r['candidate']:34s} KB {r['kernelbench_here']:13s} ours {r['ours']:13s} "
                f"[{r['cause']}] {r['ours_reason'][:90] or r['kernelbench_detail'][:90]}"
            )
    report["same_gpu_agreement"] = {"rows": rows, "by_cause": dict(by_cause)}


def _check_kernelbench_imports(kb_src: Path) -> None:
    """Fail before any work, in one line, when KernelBench's harness cannot be imported here."""
    from kernelbench_harness import import_kernelbench

    try:
        import_kernelbench(kb_src)
    except ImportError as err:
        raise CorpusError(
            f"--kb-src {kb_src}: KernelBench's harness cannot be imported here ({err}); install what it names"
        ) from err


def _kb_verdict_or_crash(kb_src: str, reference: str, source: str, build_dir: str) -> dict:
    """KernelBench's verdict; an exception its harness lets through is its runtime_error (as its
    batch scripts record it), so one candidate cannot stop the others."""
    from kernelbench_harness import verdict_in_fresh_process

    try:
        return verdict_in_fresh_process(kb_src, reference, source, build_dir)
    except Exception as err:  # raised in KernelBench's process, re-raised here by the pool
        return {
            "category": "runtime_error",
            "speedup": None,
            "detail": f"{type(err).__name__}: {err}",
        }


def mode_dry_run(sample: list[Candidate], report: dict) -> None:
    """Load every problem and apply our static checks: what can be known without a GPU."""
    from maxcode.evaluate.cuda.checks import static_findings

    for c, entry in zip(sample, report["sample"], strict=True):
        task = c.task()
        try:
            findings = [f.check_id for f in static_findings(c.source, reference_is_fp32=True)]
        except (SyntaxError, ValueError) as err:
            findings = [f"not Python: {err}"]
        said = (
            f"label {entry['label']:13s}"
            if "label" in entry
            else f"class {entry['class']:16s} score {entry['score']}"
        )
        print(f"  {c.key:34s} {task.task_id:18s} {said} static {findings or '-'}")
    if report["source"] == CUDA_L1_SOURCE:
        print_class_tables(report["sample"], report)
    report["dry_run"] = True


def _headlines(report: dict) -> list[dict]:
    out = []
    for p in report.get("passes", []):
        if p.get("candidates_per_min") is not None:
            out.append(headline(f"{p['pass']} pass", p["candidates_per_min"], "candidates/min"))
        if p.get("agreement"):
            agree = p["agreement"]
            out.append(
                headline(
                    f"{p['pass']} pass: agree with the labels",
                    f"{agree['agree']}/{p['candidates']}",
                )
            )
    kb = report.get("kernelbench", {})
    if kb.get("per_candidate_with_precompile_s") is not None:
        out.append(
            headline(
                "KernelBench's harness per candidate", kb["per_candidate_with_precompile_s"], "s"
            )
        )
    same = report.get("same_gpu_agreement")
    if same:
        rows = same["rows"]
        out.append(
            headline(
                "ours vs KernelBench's harness on this GPU: same verdict",
                f"{sum(r['agree'] for r in rows)}/{len(rows)}, "
                f"{same['by_cause'].get('other', 0)} disagreements without a named cause",
            )
        )
    return out


def benchmark_of(report: dict) -> str:
    return BENCHMARKS[report.get("source", RUNS_SOURCE), report.get("mode", "ours")]


def _write(path: Path | None, report: dict) -> None:
    """Rewritten as the run grows, so a run cut short keeps what it measured."""
    if path is not None:
        write_result(benchmark_of(report), report, _headlines(report), path)


def main(argv: list[str] | None = None) -> int:
    kb = Path(os.environ.get("KB", ".kb"))
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--source", choices=list(SOURCE_DEFAULTS), default=RUNS_SOURCE, help="the candidate set"
    )
    parser.add_argument("--mode", choices=("ours", "kernelbench"), default="ours")
    parser.add_argument(
        "--runs-dir",
        type=Path,
        default=kb / "runs",
        help="kernelbench-runs: folder of KernelBench run folders (default $KB/runs)",
    )
    parser.add_argument("--runs", nargs="+", default=list(RUNS), help="kernelbench-runs")
    parser.add_argument(
        "--problems",
        type=Path,
        default=kb / "technoabsurdist" / "KernelBench",
        help="kernelbench-runs: the problem copy the runs used",
    )
    parser.add_argument(
        "--upstream",
        type=Path,
        default=kb / "KernelBench",
        help="kernelbench-runs: upstream KernelBench problems, to say which differ",
    )
    parser.add_argument(
        "--h100",
        type=Path,
        default=kb / "cuda-l1" / "optimized_cuda_code" / "h100.json",
        help="cuda-l1: CUDA-L1's set (default $KB/cuda-l1/optimized_cuda_code/h100.json)",
    )
    parser.add_argument(
        "--variant", choices=CUDA_L1_VARIANTS, default="custom_code", help="cuda-l1: which code"
    )
    parser.add_argument(
        "--kb-src", type=Path, default=kb / "src", help="KernelBench's src/ (mode kernelbench)"
    )
    parser.add_argument(
        "-n",
        type=int,
        default=None,
        help="candidates in the sample, 0 = all (default: 64 of kernelbench-runs, all of cuda-l1)",
    )
    parser.add_argument(
        "--skip",
        type=int,
        default=0,
        help="leave out the first SKIP of the sample (run a sample in parts)",
    )
    parser.add_argument(
        "--kb-n", type=int, default=6, help="candidates KernelBench's harness evaluates"
    )
    parser.add_argument(
        "--kb-jobs",
        type=int,
        default=1,
        help="mode kernelbench: evaluations at once on the GPU, each in a fresh process (default 1, "
        "as its scripts run one per GPU); above 1 its verdicts are the same but its timings are "
        "taken side by side, so no KernelBench speedup is recorded",
    )
    parser.add_argument(
        "--ours-json",
        type=Path,
        help="mode kernelbench: an ours-mode JSON of the same sample, for the agreement table "
        "of ours against KernelBench's harness on this GPU, each disagreement with its cause",
    )
    parser.add_argument(
        "--only",
        nargs="+",
        metavar="CANDIDATE",
        help="evaluate only these candidates of the sample (keys as printed, e.g. qwen3_level1_run/L1/P49): the run-to-run spread of a chosen part",
    )
    parser.add_argument(
        "--with-kernel",
        action="store_true",
        help="only candidates that define a kernel of their own (pass the static no_custom_kernel check), so the dynamic checks decide them",
    )
    parser.add_argument("--seed", type=int, default=0, help="kernelbench-runs: the sample's seed")
    parser.add_argument(
        "--levels",
        type=int,
        nargs="+",
        default=None,
        help="default: 1 2 of kernelbench-runs, 1 2 3 of cuda-l1",
    )
    parser.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="CudaEvalConfig override"
    )
    parser.add_argument(
        "--passes",
        nargs="+",
        choices=PASSES,
        default=None,
        help="passes in order over one build cache: cold (fresh), warm, warm2 "
        "(default: cold warm of kernelbench-runs, cold of cuda-l1)",
    )
    parser.add_argument(
        "--warm-timed-only",
        action="store_true",
        help="warm passes evaluate only the candidates the cold pass found correct (the ones the run-to-run spread is about)",
    )
    parser.add_argument(
        "--keep-references",
        action="store_true",
        help="warm passes reuse the reference figures of the cold one (default: each pass times them again, so the run-to-run spread includes the reference's)",
    )
    parser.add_argument(
        "--twice",
        action="store_true",
        help="all three passes: the run-to-run spread of the same candidates, timed warm twice",
    )
    parser.add_argument(
        "--merge",
        type=Path,
        nargs="+",
        help="one report from the --json files of several parts (--skip) of a sample",
    )
    parser.add_argument(
        "--work", type=Path, default=Path(tempfile.gettempdir()) / "maxcode-real-cuda"
    )
    parser.add_argument(
        "--cache", type=Path, help="build cache to start from (default: a fresh one under --work)"
    )
    add_json_argument(parser, "<source and mode's benchmark>")
    parser.add_argument(
        "--dry-run", action="store_true", help="list the sample and run the static checks; no GPU"
    )
    args = parser.parse_args(argv)
    for name, default in SOURCE_DEFAULTS[args.source].items():
        if getattr(args, name) is None:
            setattr(args, name, default)
    if args.twice:
        args.passes = list(PASSES)
    if args.merge:
        report: dict[str, Any] = {"argv": sys.argv, "mode": "ours"}
        try:
            mode_merge(args.merge, report)
        except (OSError, json.JSONDecodeError, KeyError, IndexError) as err:
            print(
                f"error: --merge: {err}; give the --json files of parts of one sample",
                file=sys.stderr,
            )
            return 2
        _write(json_path(args.json, benchmark_of(report)), report)
        return 0
    report = {"argv": sys.argv, "source": args.source, "mode": args.mode}
    if not args.dry_run:  # a dry run measures nothing: it writes only where --json says
        args.json = json_path(args.json, benchmark_of(report))
    try:
        if args.n < 0 or args.kb_n < 1 or args.kb_jobs < 1 or args.skip < 0:
            raise CorpusError("-n must be >= 0, --kb-n and --kb-jobs >= 1 and --skip >= 0")
        if args.source == CUDA_L1_SOURCE:
            if args.mode != "ours":
                raise CorpusError(
                    "--mode kernelbench: KernelBench's harness runs on --source kernelbench-runs only"
                )
            sample = load_cuda_l1_sample(args, report)
        else:
            sample = load_runs_sample(args, report)
        if args.mode == "kernelbench" and not (args.kb_src / "kernelbench" / "eval.py").is_file():
            raise CorpusError(
                f"--kb-src {args.kb_src}: no kernelbench/eval.py; point it at KernelBench's src/ folder"
            )
        if args.mode == "kernelbench" and not args.dry_run:
            _check_kernelbench_imports(args.kb_src)
        if not args.dry_run:
            CudaEvalConfig.from_dict(parse_overrides(args.set), origin="--set")
    except (CorpusError, ValueError, TypeError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    report["sample"] = [published(c) for c in sample]
    if args.dry_run:
        mode_dry_run(sample, report)
        _write(args.json, report)
        return 0
    report["host"] = describe_host()
    print("host: " + ", ".join(f"{k} {v}" for k, v in report["host"].items()))
    if args.mode == "ours":
        mode_ours(args, sample, report)
    else:
        mode_kernelbench(args, sample, report)
    _write(args.json, report)
    return 0


def _sampled(pool: list, args: argparse.Namespace, pick) -> list:
    """``-n`` of ``pool`` (0: all) after the first ``--skip``, chosen by ``pick(pool, count)``;
    of those, the ``--only`` ones."""
    if args.with_kernel:
        pool = [c for c in pool if defines_a_kernel(c.source)]
    sample = pick(pool, (args.n or len(pool)) + args.skip)[args.skip :]
    if args.only:
        unknown = sorted(set(args.only) - {c.key for c in sample})
        if unknown:
            raise CorpusError(
                f"--only: not in the sample: {', '.join(unknown)}; give keys the sample lists (see --dry-run)"
            )
        sample = [c for c in sample if c.key in set(args.only)]
    return sample


def load_runs_sample(args: argparse.Namespace, report: dict) -> list[RealCandidate]:
    """The stratified sample of the KernelBench runs; prints and records what it was drawn from."""
    upstream = args.upstream if args.upstream.is_dir() else None
    if not args.problems.is_dir():
        raise CorpusError(
            f"--problems {args.problems}: no such folder; point it (or $KB) at the KernelBench copy the runs used"
        )
    corpus = load_runs(args.runs_dir, args.runs, args.problems, upstream)
    sample = _sampled(
        corpus, args, lambda pool, n: stratified_sample(pool, n, args.seed, tuple(args.levels))
    )
    differing = sorted({c.problem_file.name for c in sample if c.differs_from_upstream})
    report["problems_differing_from_upstream"] = differing
    print(
        f"{len(sample)} candidates of {len(corpus)} (runs {', '.join(args.runs)}; labels: "
        + ", ".join(f"{v} {n}" for v, n in Counter(c.label.verdict for c in sample).items())
        + f"; labels' GPU: {', '.join(sorted({c.label.hardware for c in sample}))})"
    )
    print(
        "problem copy vs upstream: "
        + (
            "no upstream copy given"
            if upstream is None
            else f"{len(differing)} of the sample's problems differ: {', '.join(differing) or 'none'}"
        )
    )
    return sample


def load_cuda_l1_sample(args: argparse.Namespace, report: dict) -> list[CudaL1Candidate]:
    """``-n`` of CUDA-L1's candidates spread over the technique classes."""
    pool = load_cuda_l1(args.h100, args.variant, tuple(args.levels))
    sample = _sampled(pool, args, spread_over_classes)
    report["variant"] = args.variant
    print(
        f"{len(sample)} CUDA-L1 candidates of {len(pool)} ({args.variant}, levels {args.levels}): "
        + ", ".join(f"{k} {n}" for k, n in Counter(primary_class(c.source) for c in sample).items())
    )
    return sample


def describe_host() -> dict[str, Any]:
    """What throughput here depends on besides the GPU: the host's CPU (compiles, and
    KernelBench's serial CPU input generator on the GPU slots' path) and how busy it was."""
    import torch

    model = f"unknown ({platform.machine()})"  # /proc/cpuinfo names no model on some CPUs
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    torch.rand(1 << 20)
    t0 = time.perf_counter()
    torch.rand(1 << 25)  # the serial generator the correctness trials' inputs come from
    ns = (time.perf_counter() - t0) / (1 << 25) * 1e9
    return {
        "cpu": model,
        "cores": os.cpu_count(),
        "load_1min": round(os.getloadavg()[0], 2),
        "serial_rand_ns_per_element": round(ns, 2),
    }


if __name__ == "__main__":
    sys.exit(main())
