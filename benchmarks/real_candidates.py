"""Real LLM-written KernelBench candidates with the verdicts KernelBench's own harness gave them.

A run folder (KernelBench's ``runs/<run>/`` layout, as published by technoabsurdist/KernelBench)
holds ``level_<L>_problem_<P>_sample_0_kernel.py`` files and ``eval_results.json``: per problem
id, ``compiled``, ``correctness``, ``runtime`` and ``metadata`` (``hardware``,
``compilation_error``, ``runtime_error``, ``cuda_error``, ``correctness_issue``). The problems
are read from the copy the run used (``--problems``), and each is compared with an upstream
KernelBench copy (``--upstream``) so a table can say which problems differ. Nothing here is
part of the project: point the paths (or ``$KB``) at a local copy, never commit it.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from maxcode.errors import CorpusFormatError
from maxcode.runs.agreement import (
    CAUSES,
    DOCUMENTED,
    LABEL_ATOL,
    agrees,
    disagreement_cause,
)
from maxcode.runs.kernelbench_format import compiler_error, first_line, kernelbench_label
from maxcode.runs.layouts import kernelbench_entries
from maxcode.tasks.kernelbench import load_problem_file
from maxcode.tasks.model import Task

__all__ = [  # the label and agreement rules, read from here by the benchmarks
    "CAUSES",
    "DOCUMENTED",
    "LABEL_ATOL",
    "agrees",
    "compiler_error",
    "disagreement_cause",
    "first_line",
]

VERDICTS = ("compile_error", "runtime_error", "wrong_answer", "ok")
"""Label classes, in the order tables print them (KernelBench reports no timeout or rejection)."""


class CorpusError(ValueError):
    """A run folder or problem copy that cannot be read; the message names the path and the fix."""


@dataclass(frozen=True)
class Label:
    """KernelBench's harness verdict on one candidate."""

    verdict: str
    error: str  # first line of the harness's error or correctness issue; "" when ok
    hardware: str
    runtime_ms: float | None  # KernelBench's mean runtime when correct


@dataclass(frozen=True)
class RealCandidate:
    run: str
    level: int
    problem_id: int
    kernel_file: Path
    problem_file: Path
    label: Label
    differs_from_upstream: bool | None  # None: no upstream copy to compare with

    @property
    def key(self) -> str:
        return f"{self.run}/L{self.level}/P{self.problem_id}"

    @property
    def source(self) -> str:
        return self.kernel_file.read_text()

    def task(self) -> Task:
        return load_problem_file(self.problem_file, level=self.level)


def label_from_entry(entry: dict) -> Label:
    """The verdict class of one ``eval_results.json`` entry, by the corpus's label rules."""
    try:
        label = kernelbench_label(entry)
    except CorpusFormatError as err:
        raise CorpusError(str(err)) from err
    return Label(
        verdict=label.verdict, error=label.error, hardware=label.gpu, runtime_ms=label.runtime_ms
    )


def load_run(run_dir: Path, problems: Path, upstream: Path | None = None) -> list[RealCandidate]:
    """Every labelled sample-0 candidate of one run folder, sorted by level then problem id."""
    run_dir = Path(run_dir)
    try:
        entries = [(f, e) for f, e in kernelbench_entries(run_dir) if f.sample == 0]
    except CorpusFormatError as err:
        raise CorpusError(str(err)) from err
    out = []
    for f, entry in entries:
        try:
            label = label_from_entry(entry)
        except CorpusError as err:
            raise CorpusError(
                f"{run_dir / 'eval_results.json'}: problem {f.problem_id}: {err}"
            ) from err
        problem = problem_path(Path(problems), f.level, f.problem_id)
        out.append(
            RealCandidate(
                run=run_dir.name,
                level=f.level,
                problem_id=f.problem_id,
                kernel_file=f.path,
                problem_file=problem,
                label=label,
                differs_from_upstream=_differs(problem, upstream, f.level),
            )
        )
    return sorted(out, key=lambda c: (c.level, c.problem_id))


def problem_path(problems: Path, level: int, problem_id: int) -> Path:
    """``<problems>/level<L>/<P>_<Name>.py``; an error names the folder when it is not there."""
    folder = problems / f"level{level}"
    hits = sorted(folder.glob(f"{problem_id}_*.py"))
    if not hits:
        raise CorpusError(
            f"{folder}: no problem file '{problem_id}_*.py'; pass the KernelBench copy the run used (--problems)"
        )
    return hits[0]


def _differs(problem: Path, upstream: Path | None, level: int) -> bool | None:
    if upstream is None:
        return None
    other = Path(upstream) / f"level{level}" / problem.name
    return other.read_bytes() != problem.read_bytes() if other.is_file() else None


def _interleaved(keys: list[tuple[int, str, str]]) -> list[tuple[int, str, str]]:
    """Strata (level, verdict, run) ordered: per verdict, levels alternate; verdicts interleave."""
    per_verdict: dict[str, list[tuple[int, str, str]]] = defaultdict(list)
    for key in sorted(keys):
        per_verdict[key[1]].append(key)
    for verdict, group in per_verdict.items():
        rank = {k: sum(1 for o in group if o[0] == k[0] and o[2] < k[2]) for k in group}
        per_verdict[verdict] = sorted(group, key=lambda k: (rank[k], k[0], k[2]))
    columns = [per_verdict[v] for v in VERDICTS if v in per_verdict]
    return [
        col[i] for i in range(max(map(len, columns), default=0)) for col in columns if i < len(col)
    ]


def load_runs(
    runs_root: Path, runs: list[str], problems: Path, upstream: Path | None = None
) -> list[RealCandidate]:
    out = []
    for run in runs:
        if not (Path(runs_root) / run).is_dir():
            known = sorted(p.name for p in Path(runs_root).iterdir() if p.is_dir())
            raise CorpusError(f"{runs_root}/{run}: no such run folder; known: {known}")
        out += load_run(Path(runs_root) / run, problems, upstream)
    return out


def stratified_sample(
    candidates: list[RealCandidate], n: int, seed: int = 0, levels: tuple[int, ...] = (1, 2)
) -> list[RealCandidate]:
    """``n`` candidates drawn round-robin over (level, label verdict, run) strata.

    Within a stratum the order is a hash of the seed and the candidate's key, so the sample
    is the same on every machine and does not depend on the order files are listed in; one
    problem is taken at most once per level, so throughput is not measured on one problem's
    repeats. Each round visits the strata with label verdicts interleaved and levels
    alternating, so any prefix of the sample (the part a short run or KernelBench's slower
    harness gets to) mixes labels, runs and levels, and rare labels are not swamped.
    """
    strata: dict[tuple[int, str, str], list[RealCandidate]] = defaultdict(list)
    for c in candidates:
        if c.level in levels:
            strata[(c.level, c.label.verdict, c.run)].append(c)
    for members in strata.values():
        members.sort(key=lambda c: hashlib.sha256(f"{seed}:{c.key}".encode()).hexdigest())
    order = _interleaved(list(strata))
    picked: list[RealCandidate] = []
    seen: set[tuple[int, int]] = set()
    while len(picked) < n and any(strata[s] for s in order):
        for s in order:
            while strata[s]:
                c = strata[s].pop(0)
                if (c.level, c.problem_id) not in seen:
                    seen.add((c.level, c.problem_id))
                    picked.append(c)
                    break
            if len(picked) == n:
                break
    return picked
