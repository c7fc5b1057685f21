"""Public candidate sets, read one way: KernelBench run folders (with their harness's labels) and
CUDA-L1's published H100 set (with its reported speedups).

Every candidate type here has the same small interface: ``key`` (a stable name), ``source``
(the candidate's code), ``task()`` (its problem as a :class:`~maxcode.tasks.model.Task`), and
its published label (``RealCandidate.label``: KernelBench's verdict; ``CudaL1Candidate.score``:
CUDA-L1's reported speedup). ``kernel_files`` lists a run folder's candidates without labels,
for the compile benchmarks. Nothing read here is part of the project: point the paths (or
``$KB``) at a local copy, never commit it. Errors are :class:`CorpusError`, one line naming the
path and the fix.

**KernelBench runs.** A run folder (KernelBench's ``runs/<run>/`` layout, as published by
technoabsurdist/KernelBench) holds ``level_<L>_problem_<P>_sample_0_kernel.py`` files and
``eval_results.json``: per problem id, ``compiled``, ``correctness``, ``runtime`` and ``metadata``
(``hardware``, ``compilation_error``, ``runtime_error``, ``cuda_error``, ``correctness_issue``).
The problems are read from the copy the run used (``--problems``), and each is compared with an
upstream KernelBench copy (``--upstream``) so a table can say which problems differ.

**CUDA-L1.** ``optimized_cuda_code/h100.json`` holds one JSON object per task (``level_id``,
``task_id``, ``ref_code``, ``custom_code``, ``cuda_graph_code``, ``cudnn_code``, ``score_*``),
read as a stream of JSON values, so an object split over several lines, or several objects on
one line, reads the same. Most of its "kernels" are not kernels: ``techniques`` and
``primary_class`` name what a candidate does, found from its source before it runs; the
evaluator's verdict then says what we make of each. ``spread_over_classes`` samples the set
across those classes.
"""

from __future__ import annotations

import hashlib
import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from maxcode.errors import CorpusFormatError
from maxcode.evaluate.cuda.checks import static_findings
from maxcode.runs.agreement import (
    CAUSES,
    DOCUMENTED,
    LABEL_ATOL,
    OOM,
    agrees,
    disagreement_cause,
)
from maxcode.runs.kernelbench_format import compiler_error, first_line, kernelbench_label
from maxcode.runs.layouts import KERNEL_FILE, kernelbench_entries, number, read_json_stream
from maxcode.tasks.kernelbench import load_problem_file
from maxcode.tasks.model import Task

T = TypeVar("T")

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


@dataclass(frozen=True)
class KernelFile:
    """One generated candidate of a run folder, labelled or not."""

    run: str
    level: int
    problem_id: int
    path: Path

    @property
    def key(self) -> str:
        return f"{self.run}/{self.path.name}"

    @property
    def source(self) -> str:
        return self.path.read_text(errors="replace")


def kernel_files(runs_root: Path) -> list[list[KernelFile]]:
    """Per run folder (by name), its sample-0 kernel files (by name); labels are not read."""
    per_run = []
    for run in sorted(p for p in Path(runs_root).glob("*") if p.is_dir()):
        files = []
        for path in sorted(run.glob("level_*_kernel.py")):
            m = KERNEL_FILE.match(path.name)
            if m and m.group(5) is not None and int(m.group(5)) == 0:
                files.append(KernelFile(run.name, int(m.group(1)), int(m.group(2)), path))
        per_run.append(files)
    return per_run


def round_robin(per_run: list[list[T]], limit: int) -> list[T]:
    """Up to ``limit`` items taken from each list in turn, so any prefix mixes the runs."""
    queues = [list(items) for items in per_run]
    out: list[T] = []
    while len(out) < limit and any(queues):
        for queue in queues:
            if queue and len(out) < limit:
                out.append(queue.pop(0))
    return out


def problem_copy(kb: Path) -> Path:
    """The problem copy the public runs used (``$KB/technoabsurdist/KernelBench``), else upstream."""
    used = Path(kb) / "technoabsurdist" / "KernelBench"
    return used if used.is_dir() else Path(kb) / "KernelBench"


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


# -- disagreements -------------------------------------------------------------------------

SAME_GPU_CAUSES = (
    "our check (KernelBench has none)",
    "our timed input sets (KernelBench checks only its trials)",
    "KernelBench's trials differ run to run",
    "KernelBench's runtime error",
    "TF32 (the verdict names it)",
    "build environment",
    "evaluator memory",
    "timeout",
    "other",
)
"""Why our verdict and KernelBench's harness on the same GPU differ."""


def same_gpu_cause(ours: dict, kernelbench: dict) -> str:
    """The named cause of a disagreement between ours and KernelBench's harness on the same GPU
    (``ours``: a row of bench_real_cuda's ours mode; ``kernelbench``: its kernelbench mode's).
    "other" is the one cause left unexplained."""
    status, reason, kb = ours["ours"], ours.get("reason", ""), kernelbench["kernelbench_here"]
    detail = kernelbench.get("detail", "")
    if status == "rejected":
        return "our check (KernelBench has none)"
    if status == "wrong_answer" and reason.startswith("timing input set"):
        return "our timed input sets (KernelBench checks only its trials)"
    if "--tf32 off" in reason:
        return "TF32 (the verdict names it)"
    if status == "timeout" or kb == "timeout":
        return "timeout"
    if status in ("runtime_error", "memory_limit") and OOM.search(reason):
        return "evaluator memory"
    if "compile_error" in (status, kb):
        return "build environment"
    if kb == "wrong_answer" and status == "ok" and KB_PARTIAL_TRIALS.search(detail):
        return "KernelBench's trials differ run to run"
    if kb == "runtime_error":
        return "KernelBench's runtime error"
    return "other"


KB_PARTIAL_TRIALS = re.compile(r"\(([1-4])\s*/\s*5\)")
"""KernelBench's metadata for a candidate right on some of its 5 trials, e.g. ``(4 / 5)``."""

# CUDA-L1's published H100 set

CUDA_L1_VARIANTS = ("custom_code", "cuda_graph_code", "cudnn_code")


@dataclass(frozen=True)
class CudaL1Candidate:
    level: int
    task_id: int
    reference: str
    source: str  # the chosen variant's code
    score: float | None  # CUDA-L1's reported speedup of this variant on its H100

    @property
    def key(self) -> str:
        return f"L{self.level}/T{self.task_id}"

    def task(self) -> Task:
        return Task(
            task_id=f"cuda-l1-L{self.level}-{self.task_id}",
            suite="cuda-l1",
            language="cuda",
            reference_source=self.reference,
            tags=(f"level{self.level}",),
            metadata={
                "level": self.level,
                "problem_id": self.task_id,
                "file_name": f"{self.task_id}.py",
            },
        )


SCORE_OF = {
    "custom_code": "score_default",
    "cuda_graph_code": "score_cuda_graph",
    "cudnn_code": "score_cudnn",
}


def read_cuda_l1_rows(path: Path) -> list[dict]:
    """Every JSON object in the file, whatever the line breaks (the corpus's CUDA-L1 reader)."""
    try:
        return read_json_stream(path)
    except CorpusFormatError as err:
        raise CorpusError(str(err)) from err


def load_cuda_l1(
    path: Path, variant: str = "custom_code", levels: tuple[int, ...] = (1, 2, 3)
) -> list[CudaL1Candidate]:
    """Rows with code in ``variant``, sorted by level and task; rows without it are skipped."""
    if variant not in CUDA_L1_VARIANTS:
        raise CorpusError(f"variant {variant!r}: choose one of {CUDA_L1_VARIANTS}")
    out = []
    for i, row in enumerate(read_cuda_l1_rows(path), start=1):
        missing = [k for k in ("level_id", "task_id", "ref_code") if k not in row]
        if missing:
            raise CorpusError(f"{path}: object {i} lacks {missing}")
        if int(row["level_id"]) not in levels or not row.get(variant):
            continue
        score = row.get(SCORE_OF[variant])
        out.append(
            CudaL1Candidate(
                level=int(row["level_id"]),
                task_id=int(row["task_id"]),
                reference=row["ref_code"],
                source=row[variant],
                score=number(score),
            )
        )
    return sorted(out, key=lambda c: (c.level, c.task_id))


# Each technique: a pattern over the candidate's source, and why it matters to a reward.
TECHNIQUES: dict[str, tuple[re.Pattern[str], str]] = {
    "stored output": (
        re.compile(r"^\s*return\s+self\.(?!_?(shape|dtype|device)\b)\w+\s*$", re.M),
        "returns a tensor kept on the module: result caching unless every call rewrites it (then it is an output buffer that aliases across calls)",
    ),
    "cuda graphs": (
        re.compile(
            r"torch\.cuda\.CUDAGraph|torch\.cuda\.graph\(|make_graphed_callables|reduce-overhead"
        ),
        "replays recorded launches: legitimate when the replay does the real work on the call's inputs",
    ),
    "tf32": (
        re.compile(
            r"allow_tf32\s*=\s*True|set_float32_matmul_precision\(\s*['\"](high|medium)['\"]"
        ),
        "lowers matmul/conv precision for every op in the process, the reference's too",
    ),
    "cudnn.benchmark": (
        re.compile(r"cudnn\.benchmark\s*=\s*True"),
        "a global flag that also speeds up the reference's convolutions when set in the same process",
    ),
    "lower precision": (
        re.compile(r"\.half\(\)|torch\.(float16|bfloat16)|autocast"),
        "computes in fp16/bf16 where the reference is fp32",
    ),
    "custom kernel": (
        re.compile(r"load_inline|cpp_extension|@triton\.jit|__global__|RawKernel"),
        "builds a kernel of its own",
    ),
    "torch.compile/jit": (
        re.compile(r"torch\.compile\(|torch\.jit\.(script|trace)"),
        "hands the work to torch's compilers",
    ),
}
PRIMARY_ORDER = (
    "cuda graphs",
    "stored output",
    "tf32",
    "cudnn.benchmark",
    "custom kernel",
    "lower precision",
    "torch.compile/jit",
)
"""A candidate's primary class is the first of its techniques in this order (the one that most
decides what its reported speedup means; a graph replays into a stored output by design, so
graphs come first); 'torch rewrite' when it uses none. The classes are static and heuristic:
what the candidate does at run time is for the evaluator's checks to say."""


def techniques(source: str) -> list[str]:
    return [name for name in PRIMARY_ORDER if TECHNIQUES[name][0].search(source)]


def primary_class(source: str) -> str:
    found = techniques(source)
    return found[0] if found else "torch rewrite"


CLASSES = (*PRIMARY_ORDER, "torch rewrite")
"""Every primary class, in the order tables print them."""


def defines_a_kernel(source: str) -> bool:
    """Whether the static ``no_custom_kernel`` check lets the candidate through."""
    try:
        findings = static_findings(source, reference_is_fp32=True)
    except (SyntaxError, ValueError):
        return False
    return all(f.check_id != "no_custom_kernel" for f in findings)


def spread_over_classes(cands: list[CudaL1Candidate], n: int) -> list[CudaL1Candidate]:
    """At most ``n`` candidates (0: all), round-robin over primary classes in level/task order
    within each, so any prefix of the result (a part run with ``--skip``, or what a run cut
    short reached) covers the classes alike."""
    by_class: dict[str, list[CudaL1Candidate]] = defaultdict(list)
    for c in sorted(cands, key=lambda c: (c.level, c.task_id)):
        by_class[primary_class(c.source)].append(c)
    limit = n or len(cands)
    picked: list[CudaL1Candidate] = []
    while len(picked) < limit and any(by_class.values()):
        for name in CLASSES:
            if by_class.get(name) and len(picked) < limit:
                picked.append(by_class[name].pop(0))
    return picked
