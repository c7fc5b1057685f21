"""Measure corpus candidates with our CUDA evaluator, resumably, beside the published labels.

Each program is evaluated against the reference its run used (``references.json``), in
batches; every result is appended to ``results.jsonl`` as it arrives, so a kill loses at most
the candidates in flight and a rerun skips every (code hash, task hash, evaluator, GPU) it
already holds. After the last batch it writes, from ``results.jsonl``:

- ``runs/<owner>__<repo>/<run>/eval_results.json``: our verdicts in KernelBench's format,
  keyed by problem id, so KernelBench's own tools read them;
- ``agreement.json`` / ``agreement.md``: our verdict against each usable published label,
  per source, with the cause of each disagreement;
- ``measurements.jsonl``: the measurements without the candidates' code, keyed by
  (code hash, task hash, evaluator, GPU): what a machine without a GPU replays.
"""

from __future__ import annotations

import hashlib
import json
import sys
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import zip_longest
from pathlib import Path

from maxcode.errors import CorpusFormatError
from maxcode.evaluate.result import EvalResult
from maxcode.records import JsonlWriter, atomic_write_json, atomic_write_text, read_jsonl
from maxcode.runs.agreement import DOCUMENTED, agrees, disagreement_cause
from maxcode.runs.corpus import Checkout, same_text
from maxcode.runs.kernelbench_format import first_line
from maxcode.runs.record import CorpusRecord, read_corpus, read_references
from maxcode.tasks.kernelbench import check_problem_source
from maxcode.tasks.model import Task

EvaluateItems = Callable[
    [Sequence[tuple[Task, str]], Callable[[int, EvalResult], None]], list[EvalResult]
]


@dataclass(frozen=True)
class Candidate:
    record: CorpusRecord
    task: Task

    @property
    def task_hash(self) -> str:
        return self.record.problem.reference_hash


def task_of(record: CorpusRecord, reference: str) -> Task:
    p = record.problem
    check_problem_source(reference, f"references.json[{p.reference_hash[:12]}]")
    return Task(
        task_id=f"corpus-L{p.level}-{p.problem_id}-{p.reference_hash[:8]}",
        suite="corpus",
        language="cuda",
        reference_source=reference,
        tags=(f"level{p.level}",),
        metadata={"level": p.level, "problem_id": p.problem_id, "file_name": p.file_name},
    )


def stratified(records: list[CorpusRecord], n: int | None, seed: int) -> list[CorpusRecord]:
    """``n`` programs of levels 1 and 2, round-robin over (level, source, first label) strata,
    each stratum in an order set by a hash of the seed and the program: the same sample on
    every machine, and any prefix mixes levels, sources and labels."""
    pool = [r for r in records if r.problem.level in (1, 2)]
    if n is None:
        return pool
    strata: dict[tuple, list[CorpusRecord]] = defaultdict(list)
    for r in pool:
        a = r.attempts[0]
        strata[(r.problem.level, a.repo, a.label.verdict)].append(r)
    for members in strata.values():
        members.sort(key=lambda r: hashlib.sha256(f"{seed}:{r.key}".encode()).hexdigest())
    picked: list[CorpusRecord] = []
    keys = sorted(strata, key=lambda k: (k[1], k[2], k[0]))  # levels alternate within a round
    while len(picked) < n and any(strata[k] for k in keys):
        for k in keys:
            if strata[k] and len(picked) < n:
                picked.append(strata[k].pop(0))
    return picked


def by_problem(
    records: list[CorpusRecord], per_problem: int, n: int | None, seed: int
) -> list[CorpusRecord]:
    """Whole problems of levels 1 and 2, up to ``per_problem`` programs each (round-robin over
    the problem's (source, first label) strata), problems in an order set by a hash of the seed
    with the levels alternating, until ``n`` programs: a sample in which every problem has
    enough candidates to rank, where ``stratified`` spreads a few over many problems."""
    problems: dict[str, list[CorpusRecord]] = defaultdict(list)
    for r in records:
        if r.problem.level in (1, 2):
            problems[r.problem.key].append(r)

    def digest(text: str) -> str:
        return hashlib.sha256(f"{seed}:{text}".encode()).hexdigest()

    levels: dict[int, list[str]] = defaultdict(list)
    for key in sorted(problems, key=digest):
        levels[problems[key][0].problem.level].append(key)
    order = [k for pair in zip_longest(levels[1], levels[2]) for k in pair if k is not None]
    picked: list[CorpusRecord] = []
    for key in order:
        chosen = stratified(problems[key], per_problem, seed)
        if n is not None and len(picked) + len(chosen) > n:
            break
        picked += chosen
    return picked


class Progress:
    """One stderr line: done/total, rate and the time left at that rate."""

    def __init__(self, total: int, stream=sys.stderr):
        self.total, self.done, self.stream = total, 0, stream
        self.t0 = time.monotonic()

    def step(self, label: str) -> None:
        self.done += 1
        elapsed = time.monotonic() - self.t0
        rate = self.done / elapsed if elapsed > 0 else 0.0
        left = (self.total - self.done) / rate if rate else 0.0
        width = 30
        bar = "#" * int(width * self.done / max(1, self.total))
        self.stream.write(
            f"\r[{bar:<{width}}] {self.done}/{self.total} {60 * rate:.1f}/min "
            f"ETA {int(left // 60)}:{int(left % 60):02d} {label[:40]:<40}"
        )
        self.stream.flush()
        if self.done == self.total:
            self.stream.write("\n")


MS_PER = {"ms": 1.0, "s": 1000.0}


def _ms(r: EvalResult, which: str) -> float | None:
    if r.timing is None or r.timing.unit not in MS_PER:
        return None
    return getattr(r.timing, which) * MS_PER[r.timing.unit]


def result_row(c: Candidate, r: EvalResult, evaluator: str, gpu: str) -> dict:
    return {
        "key": c.record.key,
        "code_hash": c.record.code_hash,
        "task_hash": c.task_hash,
        "evaluator": evaluator,
        "gpu": gpu,
        "status": r.status.value,
        "reason": first_line(r.reason),
        "speedup": r.speedup,
        "compiled": r.status.compiled,
        "runtime_ms": _ms(r, "candidate") if r.speedup is not None else None,
        "reference_ms": _ms(r, "reference"),
        "sandbox": r.sandbox,
    }


def evaluate_corpus(
    corpus: Path,
    out: Path,
    evaluate_items: EvaluateItems,
    evaluator: str,
    gpu: str,
    limit: int | None = None,
    seed: int = 0,
    batch: int = 32,
    checkout: Checkout | None = None,
    max_seconds: float | None = None,
    per_problem: int | None = None,
    problems: set[str] | None = None,
) -> dict:
    """Evaluate what ``results.jsonl`` lacks, then write the run files, agreement and export.

    ``evaluate_items(items, on_result)`` is the evaluator's batch call (``CudaEvaluator.
    evaluate_items``); ``evaluator`` and ``gpu`` name what measured, for the keys. The sample:
    ``limit`` programs ``stratified``, or with ``per_problem`` whole problems ``by_problem``;
    ``problems`` (keys as "L2/12_Gemm.py") restricts either to those problems. The outputs
    cover every measurement in ``out``, whichever sample measured it.
    """
    everything = read_corpus(corpus)
    references = read_references(corpus)
    records = everything
    if problems is not None:
        unknown = sorted(problems - {r.problem.key for r in records})
        if unknown:
            raise CorpusFormatError(
                f"{corpus}: no programs of problem {unknown[0]!r} ({len(unknown)} unknown); "
                "name problems as `maxcode r2g held-out` prints them"
            )
        records = [r for r in records if r.problem.key in problems]
    if per_problem is None:
        sample = stratified(records, limit, seed)
    else:
        sample = by_problem(records, per_problem, limit, seed)
    out = Path(out)
    results_path = out / "results.jsonl"
    done = {
        (row["code_hash"], row["task_hash"])
        for row in (read_jsonl(results_path) if results_path.is_file() else [])
        if row["evaluator"] == evaluator and row["gpu"] == gpu
    }
    todo = []
    for r in sample:
        if (r.code_hash, r.problem.reference_hash) in done:
            continue
        reference = references.get(r.problem.reference_hash)
        if reference is None:
            raise CorpusFormatError(
                f"{corpus}: references.json lacks {r.problem.reference_hash[:12]} ({r.key}); "
                "rebuild the corpus with `maxcode runs import`"
            )
        todo.append(Candidate(r, task_of(r, reference)))
    progress = Progress(len(todo))
    writer = JsonlWriter(results_path)
    lock = threading.Lock()
    deadline = time.monotonic() + max_seconds if max_seconds is not None else None
    stopped = 0
    try:
        for start in range(0, len(todo), batch):
            if start and deadline is not None and time.monotonic() > deadline:
                stopped = len(todo) - start
                break
            chunk = todo[start : start + batch]

            def on_result(i: int, result: EvalResult, chunk=chunk) -> None:
                with lock:
                    row = result_row(chunk[i], result, evaluator, gpu)
                    row["checkout_differs"] = _differs(chunk[i], checkout)
                    writer.write(row)
                    progress.step(chunk[i].record.key)

            evaluate_items([(c.task, c.record.code) for c in chunk], on_result)
    finally:
        writer.close()
    summary = write_outputs(everything, references, out)  # the folder's measurements, all samples
    summary.update(
        sampled=len(sample),
        evaluated_now=len(todo) - stopped,
        left_for_a_rerun=stopped,
        skipped_as_done=len(sample) - len(todo),
        wall_s=round(time.monotonic() - progress.t0, 1),
    )
    return summary


def _differs(c: Candidate, checkout: Checkout | None) -> bool | None:
    if checkout is None:
        return None
    path = checkout.problem(c.record.problem.level, c.record.problem.problem_id)
    return path is None or not same_text(path.read_text(), c.task.reference_source)


def read_measurements(path: Path) -> dict[tuple[str, str], dict]:
    """The evaluation export (``measurements.jsonl``): rows by (code hash, task hash)."""
    path = Path(path)
    if not path.is_file():
        raise CorpusFormatError(f"{path}: no measurement export there; see `maxcode eval runs`")
    out = {}
    for n, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            out[(row["code_hash"], row["task_hash"])] = row
        except (json.JSONDecodeError, KeyError) as err:
            raise CorpusFormatError(f"{path}: line {n}: not a measurement row ({err})") from err
    return out


def write_outputs(records: list[CorpusRecord], references: dict[str, str], out: Path) -> dict:
    rows = list(read_jsonl(out / "results.jsonl"))
    by_key = {(r.code_hash, r.problem.reference_hash): r for r in records}
    measured = [
        (by_key[(row["code_hash"], row["task_hash"])], row)
        for row in rows
        if (row["code_hash"], row["task_hash"]) in by_key
    ]
    _write_run_files(measured, out / "runs")
    agreement = _agreement(measured, references)
    atomic_write_json(out / "agreement.json", agreement)
    atomic_write_text(out / "agreement.md", agreement_markdown(agreement))
    export = [{k: v for k, v in row.items() if k != "key"} for _, row in measured]
    atomic_write_text(
        out / "measurements.jsonl", "".join(json.dumps(e, sort_keys=True) + "\n" for e in export)
    )
    return {"measured": len(measured), "agreement": agreement["all"]}


def kernelbench_entry(row: dict, sample_id: int) -> dict:
    """Our verdict as one ``eval_results.json`` entry (runtimes in ms, -1 where not timed)."""
    status = row["status"]
    meta: dict = {"hardware": row["gpu"], "evaluator": row["evaluator"]}
    if status == "compile_error":
        meta["compilation_error"] = row["reason"]
    elif status in ("runtime_error", "timeout", "memory_limit"):
        meta["runtime_error"] = row["reason"]
    elif status == "wrong_answer":
        meta["correctness_issue"] = row["reason"]
    elif status == "rejected":
        meta["other_error"] = row["reason"]
    return {
        "sample_id": sample_id,
        "compiled": row["compiled"],
        "correctness": status == "ok",
        "runtime": row["runtime_ms"] if row["runtime_ms"] is not None else -1.0,
        "ref_runtime": row["reference_ms"] if row["reference_ms"] is not None else -1.0,
        "metadata": meta,
    }


def _write_run_files(measured: list[tuple[CorpusRecord, dict]], root: Path) -> None:
    per_run: dict[tuple[str, str], dict[str, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for record, row in measured:
        for a in record.attempts:
            entries = per_run[(a.repo, a.run)][str(record.problem.problem_id)]
            entries.append(kernelbench_entry(row, len(entries)))
    for (repo, run), results in per_run.items():
        path = root / repo.replace("/", "__") / run / "eval_results.json"
        atomic_write_json(path, dict(sorted(results.items(), key=lambda kv: int(kv[0]))))


def _agreement(measured: list[tuple[CorpusRecord, dict]], references: dict[str, str]) -> dict:
    pairs: dict[str, Counter] = defaultdict(Counter)
    causes: dict[str, Counter] = defaultdict(Counter)
    for record, row in measured:
        for a in record.attempts:
            if not a.label.usable:
                continue
            for scope in ("all", a.repo):
                pairs[scope][(a.label.verdict, row["status"])] += 1
                if not agrees(a.label.verdict, row["status"]):
                    ref = references.get(record.problem.reference_hash, "")
                    causes[scope][
                        disagreement_cause(ref, a.label, row["status"], row["reason"], record.code)
                    ] += 1
    out = {}
    for scope, counts in pairs.items():
        total = sum(counts.values())
        same = sum(n for (label, ours), n in counts.items() if agrees(label, ours))
        documented = sum(n for c, n in causes[scope].items() if c in DOCUMENTED)
        out[scope] = {
            "labels": total,
            "agree": same,
            "agree_share": same / total if total else None,
            "agree_or_documented_share": (same + documented) / total if total else None,
            "pairs": {f"{label} -> {ours}": n for (label, ours), n in sorted(counts.items())},
            "causes": dict(sorted(causes[scope].items())),
        }
    out.setdefault(
        "all",
        {
            "labels": 0,
            "agree": 0,
            "agree_share": None,
            "agree_or_documented_share": None,
            "pairs": {},
            "causes": {},
        },
    )
    return out


def agreement_markdown(agreement: dict) -> str:
    lines = [
        "# Our verdicts against the published labels",
        "",
        "| source | usable labels | agree | agree or documented cause | disagreements by cause |",
        "|---|---|---|---|---|",
    ]
    for scope, a in agreement.items():
        share = "n/a" if a["agree_share"] is None else f"{a['agree_share']:.1%}"
        doc = (
            "n/a"
            if a["agree_or_documented_share"] is None
            else f"{a['agree_or_documented_share']:.1%}"
        )
        causes = ", ".join(f"{c} {n}" for c, n in a["causes"].items()) or "-"
        lines.append(f"| {scope} | {a['labels']} | {a['agree']} ({share}) | {doc} | {causes} |")
    return "\n".join(lines) + "\n"
