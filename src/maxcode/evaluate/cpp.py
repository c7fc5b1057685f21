"""Evaluate C++ candidates on PIE-format tasks: PIE's semantics, measured cheaply and safely.

Fixed order, first failure ends the evaluation: compile -> run every test in the sandbox ->
correctness exactly as PIE (line by line, a line that is not equal must parse as a float
within the tolerance, 100% of tests) -> timing against the task's reference program,
measured the same way in the same run -> optional execution profile (Effi-Learner).

Timing modes: ``wall`` (candidate and reference repeats interleaved, median and relative
IQR, pinned to a CPU), ``instructions`` (valgrind instruction count: identical on every run
with the same binary and input) and ``cachegrind`` (instructions plus simulated cache misses
of a fixed Skylake-like hierarchy, combined into estimated cycles: a cheap stand-in for
PIE's gem5). Deterministic modes measure a task's reference once and cache it on disk.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import shutil
import statistics
import subprocess
import tempfile
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

from maxcode.evaluate.compile import PIE_FLAGS, CompileOutcome, Compiler
from maxcode.evaluate.result import EvalResult, Status, TestVerdict, Timing
from maxcode.evaluate.sandbox import Limits, RunOutcome, Sandbox, cpu_slot, signal_name
from maxcode.loader import load
from maxcode.records import atomic_write_json
from maxcode.tasks.model import Task, TestCase

EVALUATOR_VERSION = "cpp-eval/1"
TIMING_MODES = ("wall", "instructions", "cachegrind")
# Fixed cache hierarchy (Skylake client: 32 KiB 8-way L1s, 8 MiB 16-way LL, 64 B lines) so
# cachegrind counts do not depend on the host's caches.
CACHE_SIM_ARGS = ("--I1=32768,8,64", "--D1=32768,8,64", "--LL=8388608,16,64")
# Estimated cycles = Ir + 10 * L1 misses + 100 * LL misses (the KCachegrind "CEst" weights).
L1_MISS_CYCLES, LL_MISS_CYCLES = 10, 100
PROFILE_TOP_FUNCTIONS = 12
DEBUG_INFO = (Path("/usr/lib/debug"),)
RESULT_NEUTRAL = ("workers",)  # config fields that never change a result


class EvaluatorError(RuntimeError):
    """The evaluator cannot judge candidates for this task (not a candidate failure)."""


@dataclass
class CppEvalConfig:
    """Settings of the C++ evaluator; all but ``workers`` are part of the evaluation-cache key."""

    compiler: str = field(default="g++", metadata={"help": "C++ compiler on PATH"})
    flags: tuple[str, ...] = field(
        default=PIE_FLAGS, metadata={"help": "compiler flags; PIE uses --std=c++17 -O3"}
    )
    timing: str = field(
        default="instructions",
        metadata={
            "help": "how runtime is measured; instructions is exact and repeatable, wall "
            "needs a quiet machine",
            "choices": list(TIMING_MODES),
        },
    )
    repeats: int = field(
        default=5, metadata={"help": "timed runs per test and program in wall mode", "min": 1}
    )
    time_limit_s: float = field(
        default=10.0,
        metadata={"help": "wall-clock limit per native run (PIE: 10 s)", "exclusive_min": 0},
    )
    memory_mb: int = field(
        default=500, metadata={"help": "address-space limit per run in MiB (PIE: 500)", "min": 1}
    )
    output_limit_bytes: int = field(
        default=16 << 20, metadata={"help": "stdout cap per run; beyond it: output_limit", "min": 1}
    )
    max_processes: int = field(
        default=16, metadata={"help": "processes+threads a candidate may have at once"}
    )
    float_tolerance: float = field(
        default=1e-3, metadata={"help": "absolute tolerance for float lines (PIE: 1e-3)", "min": 0}
    )
    check_exit_status: bool = field(
        default=True,
        metadata={
            "help": "a non-zero exit or a signal is a runtime error; PIE ignores the exit "
            "status (set false to reproduce it exactly)"
        },
    )
    valgrind_slowdown: float = field(
        default=60.0,
        metadata={
            "help": "time-limit factor for runs under valgrind (instructions, profile)",
            "min": 1,
        },
    )
    workers: int = field(
        default=0,
        metadata={"help": "parallel evaluations in evaluate_many; 0 = all CPUs", "min": 0},
    )
    pin_cpus: bool = field(
        default=True, metadata={"help": "pin each concurrent evaluation to its own CPU"}
    )
    profile: bool = field(
        default=False,
        metadata={"help": "add a callgrind per-function profile and peak memory (Effi-Learner)"},
    )
    hide_paths: tuple[str, ...] = field(
        default=(),
        metadata={"help": "extra directories hidden from candidates (tests are always hidden)"},
    )

    def __post_init__(self) -> None:
        self.flags = tuple(self.flags)
        self.hide_paths = tuple(self.hide_paths)
        if self.timing not in TIMING_MODES:
            raise ValueError(
                f"CppEvalConfig.timing={self.timing!r} is not a timing mode; "
                f"choose one of {list(TIMING_MODES)}"
            )
        if self.repeats < 1:
            raise ValueError(f"CppEvalConfig.repeats={self.repeats} must be >= 1")
        if self.time_limit_s <= 0 or self.memory_mb <= 0 or self.output_limit_bytes <= 0:
            raise ValueError(
                "CppEvalConfig limits time_limit_s, memory_mb, output_limit_bytes must be > 0"
            )
        if self.float_tolerance < 0:
            raise ValueError(f"CppEvalConfig.float_tolerance={self.float_tolerance} must be >= 0")
        if self.workers < 0:
            raise ValueError(f"CppEvalConfig.workers={self.workers}: use 0 for all CPUs or > 0")
        if self.valgrind_slowdown < 1:
            raise ValueError(
                f"CppEvalConfig.valgrind_slowdown={self.valgrind_slowdown} must be >= 1"
            )

    @classmethod
    def from_dict(cls, d: dict | None, where: str = "evaluation.cpp") -> CppEvalConfig:
        """Through the one strict loader: a bad key or value names its key path."""
        return load(cls, d, where)

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["flags"], d["hide_paths"] = list(self.flags), list(self.hide_paths)
        return d

    def hash(self) -> str:
        """Part of every evaluation-cache key: all fields that can change a result."""
        d = {k: v for k, v in self.to_dict().items() if k not in RESULT_NEUTRAL}
        return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:16]

    def limits(self, valgrind: bool = False) -> Limits:
        """Native limits, or the looser ones of a run under valgrind (which needs time and
        address space of its own; the program already passed the native limits)."""
        slowdown = self.valgrind_slowdown if valgrind else 1.0
        return Limits(
            wall_s=self.time_limit_s * slowdown,
            cpu_s=max(1, int(self.time_limit_s * slowdown + 0.999)),
            memory_mb=self.memory_mb * 2 + 1024 if valgrind else self.memory_mb,
            output_bytes=self.output_limit_bytes,
            processes=self.max_processes,
        )


def compare_outputs(expected: str, got: str, tolerance: float) -> str:
    """PIE's check; returns "" when correct, else the first mismatch as a one-line reason.

    Like PIE: both sides are stripped and split into lines, lines are paired in order, a
    line matches when equal or when both parse as floats within ``tolerance``, and every
    expected line must match (extra trailing output lines are not checked, as in PIE).
    """
    want, have = expected.strip().splitlines(), got.strip().splitlines()
    for i, line in enumerate(want):
        if i >= len(have):
            return f"line {i + 1}: expected {_clip(line)} got end of output ({len(have)} lines)"
        if have[i] == line:
            continue
        try:
            if abs(float(have[i]) - float(line)) < tolerance:
                continue
        except ValueError:
            pass
        return f"line {i + 1}: expected {_clip(line)} got {_clip(have[i])}"
    return ""


def _clip(s: str, n: int = 80) -> str:
    return repr(s if len(s) <= n else s[:n] + "...")


class _FlakyCandidate(Exception):
    """The candidate passed a test once but failed a later timed run of it."""

    def __init__(self, status: Status, reason: str):
        super().__init__(reason)
        self.status, self.reason = status, reason


@dataclass
class _TestRun:
    case: TestCase
    verdict: TestVerdict
    outcome: RunOutcome


class CppEvaluator:
    """Implements the Evaluator protocol for C++ tasks; thread-safe, shares caches on disk."""

    def __init__(self, config: CppEvalConfig, cache_dir: Path):
        self.config = config
        self.cache_dir = Path(cache_dir)
        self.name = f"{EVALUATOR_VERSION}[{config.timing}]"
        self.compiler = Compiler(self.cache_dir, config.compiler, config.flags)
        hide = [self.cache_dir, *config.hide_paths]
        if Path.cwd() != Path("/"):
            hide.append(Path.cwd())  # the project: sources, data, other tasks' outputs
        self.sandbox = Sandbox(self.cache_dir, hide=hide)
        self.isolation = self.sandbox.isolation
        self._valgrind = shutil.which("valgrind")
        if self._valgrind is None and (config.timing != "wall" or config.profile):
            raise EvaluatorError(
                f"timing={config.timing!r} / profile need valgrind on PATH; install valgrind "
                "or use timing='wall' without profile"
            )
        self._cpus = sorted(os.sched_getaffinity(0))
        self._checked_refs: set[str] = set()
        self._lock = threading.Lock()

    # -- protocol -------------------------------------------------------------------------
    def evaluate(self, task: Task, source: str) -> EvalResult:
        if task.language != "cpp":
            raise EvaluatorError(f"task {task.task_id}: language {task.language!r} is not cpp")
        cases = task.tests()
        if not cases:
            raise EvaluatorError(f"task {task.task_id}: has no tests_dir; C++ tasks need tests")
        with self._cpu() as cpu:
            return self._evaluate(task, source, cases, cpu)

    def evaluate_many(
        self, task: Task, sources: Sequence[str], progress: bool = False
    ) -> list[EvalResult]:
        """Evaluate several candidates in parallel (bounded queue), results in input order."""
        workers = self.config.workers or len(os.sched_getaffinity(0))
        slots = threading.BoundedSemaphore(2 * workers)  # bounded queue of pending work
        with (
            ThreadPoolExecutor(max_workers=workers) as pool,
            _progress(progress, len(sources)) as tick,
        ):
            futures: list[Future] = []
            for src in sources:
                slots.acquire()
                fut = pool.submit(self.evaluate, task, src)
                fut.add_done_callback(lambda _f: (slots.release(), tick()))
                futures.append(fut)
            return [f.result() for f in futures]

    def run_program(
        self, source: str, stdin_path: Path, time_limit_s: float | None = None
    ) -> tuple[CompileOutcome, RunOutcome | None]:
        """Build ``source`` as candidates are built (same flags, same binary cache) and run
        it once natively in the same sandbox on one input; no run when it does not compile.

        For programs outside a task's tests: outputs made from the user's program, and
        timings on inputs larger than the tests (``time_limit_s`` raises the limit). The
        run is scheduled as the user's own would be, on any core."""
        build = self.compiler.compile(source)
        if not build.ok:
            return build, None
        limits = self.config.limits()
        if time_limit_s is not None:
            limits = replace(limits, wall_s=time_limit_s, cpu_s=max(1, int(time_limit_s + 0.999)))
        out = self.sandbox.run(
            [Sandbox.PROGRAM],
            limits,
            stdin_path=stdin_path,
            hide=[stdin_path.parent],
            cpu=None,  # not pinned: on a busy machine a pinned core adds its queue to the time
            copy_program=build.binary,
        )
        return build, out

    # -- stages ---------------------------------------------------------------------------
    def _evaluate(
        self, task: Task, source: str, cases: list[TestCase], cpu: int | None
    ) -> EvalResult:
        figures: dict = {"isolation": self.isolation, "timing_mode": self.config.timing}
        figures["cpu_pinned"] = cpu is not None
        build = self.compiler.compile(source)
        figures["compile_s"] = round(build.seconds, 4)
        if not build.ok:
            return self._result(
                Status.COMPILE_ERROR,
                f"compile error: {build.first_error}",
                [],
                figures,
                compile_log=build.log,
            )
        ref = self.compiler.compile(task.reference_source)
        if not ref.ok:
            raise EvaluatorError(
                f"task {task.task_id}: the reference program does not compile with "
                f"{self.config.compiler} {' '.join(self.config.flags)}: {ref.first_error}"
            )
        self._check_reference(task, ref.binary, cases, cpu)
        runs = self._run_tests(build.binary, cases, cpu)
        verdicts = [r.verdict for r in runs]
        figures["peak_rss_kb"] = max(r.outcome.maxrss_kb for r in runs)
        figures["tests"] = [
            {
                "index": r.case.index,
                "input_bytes": r.case.input_path.stat().st_size,
                "wall_s": round(r.outcome.wall_s, 6),
                "cpu_s": round(r.outcome.cpu_s, 6),
            }
            for r in runs
        ]
        failed = next((v for v in verdicts if v.status is not Status.OK), None)
        if failed is not None:
            passed = sum(v.status is Status.OK for v in verdicts)
            reason = (
                f"test {failed.index}: {failed.status.value}: {failed.reason} "
                f"({passed}/{len(cases)} tests passed)"
            )
            return self._result(failed.status, reason, verdicts, figures, compile_log=build.log)
        try:
            timing = self._time(task, build.binary, ref.binary, cases, cpu, verdicts, figures)
        except _FlakyCandidate as err:
            return self._result(err.status, err.reason, verdicts, figures, compile_log=build.log)
        profile = self._profile(build.binary, cases, cpu, figures) if self.config.profile else None
        return self._result(Status.OK, "", verdicts, figures, build.log, timing, profile)

    def _result(
        self,
        status: Status,
        reason: str,
        verdicts: list[TestVerdict],
        figures: dict,
        compile_log: str = "",
        timing: Timing | None = None,
        profile: dict | None = None,
    ) -> EvalResult:
        return EvalResult(
            status=status,
            reason=reason,
            tests=verdicts,
            timing=timing,
            compile_log=compile_log,
            profile=profile,
            figures=figures,
            evaluator=self.name,
            sandbox=self.sandbox.level,
        )

    def _run_tests(self, binary: Path, cases: list[TestCase], cpu: int | None) -> list[_TestRun]:
        """Every test once natively; stop after a timeout or memory limit (they are costly)."""
        runs = []
        for case in cases:
            out = self._run(binary, case, cpu)
            verdict = self._verdict(case, out)
            runs.append(_TestRun(case, verdict, out))
            if verdict.status in (Status.TIMEOUT, Status.MEMORY_LIMIT):
                break
        return runs

    def _run(
        self,
        binary: Path,
        case: TestCase,
        cpu: int | None,
        argv_prefix: Sequence[str] = (),
        valgrind: bool = False,
        pass_fds: Sequence[int] = (),
        hide: Sequence[Path] = (),
    ) -> RunOutcome:
        """One sandboxed run; the test's directory and its parent (the suite's tests) hidden."""
        tests = case.input_path.parent
        return self.sandbox.run(
            [*argv_prefix, Sandbox.PROGRAM],
            self.config.limits(valgrind),
            stdin_path=case.input_path,
            hide=[tests, tests.parent, *hide],
            cpu=cpu,
            copy_program=binary,
            pass_fds=pass_fds,
        )

    def _verdict(self, case: TestCase, out: RunOutcome) -> TestVerdict:
        cfg = self.config
        status, reason = Status.OK, ""
        if out.output_limited:
            status, reason = Status.OUTPUT_LIMIT, f"stdout exceeded {cfg.output_limit_bytes} bytes"
        elif (
            out.timed_out
            or out.signal == 24
            or (out.signal == 9 and out.cpu_s >= cfg.limits().cpu_s)
        ):
            status, reason = Status.TIMEOUT, f"exceeded the {cfg.time_limit_s:g} s limit"
        elif out.memory_exceeded(cfg.memory_mb):
            status, reason = (
                Status.MEMORY_LIMIT,
                f"allocation failed under the {cfg.memory_mb} MiB limit",
            )
        elif cfg.check_exit_status and (out.signal is not None or out.exit_code != 0):
            status, reason = Status.RUNTIME_ERROR, _crash_reason(out)
        else:
            expected = case.output_path.read_text(errors="replace")
            mismatch = compare_outputs(
                expected, out.stdout.decode(errors="replace"), cfg.float_tolerance
            )
            if mismatch:
                status, reason = Status.WRONG_ANSWER, mismatch
        runtime = out.wall_s if status is Status.OK else None
        return TestVerdict(case.index, status, runtime, reason)

    def _check_reference(
        self, task: Task, binary: Path, cases: list[TestCase], cpu: int | None
    ) -> None:
        """The reference must pass its own tests once per process; a broken task is an error."""
        key = f"{task.tests_dir}:{binary.name}"
        with self._lock:
            if key in self._checked_refs:
                return
        for case in cases:
            v = self._verdict(case, self._run(binary, case, cpu))
            if v.status is not Status.OK:
                raise EvaluatorError(
                    f"task {task.task_id}: the reference program fails test {case.index} "
                    f"({case.input_path}): {v.status.value}: {v.reason}; fix the task's "
                    "reference_source or its expected outputs"
                )
        with self._lock:
            self._checked_refs.add(key)

    # -- timing ---------------------------------------------------------------------------
    def _time(self, task, cand: Path, ref: Path, cases, cpu, verdicts, figures) -> Timing:
        if self.config.timing == "wall":
            return self._time_wall(task, cand, ref, cases, cpu, verdicts, figures)
        cand_costs = [self._count(cand, c, cpu, "candidate", task) for c in cases]
        ref_costs = self._reference_counts(task, ref, cases, cpu)
        unit = "instructions" if self.config.timing == "instructions" else "cycles"
        for row, cost in zip(figures["tests"], cand_costs, strict=True):
            row[unit] = cost  # every test ran and passed, in order
        figures["reference_tests"] = ref_costs
        return Timing(self.config.timing, unit, float(sum(cand_costs)), float(sum(ref_costs)))

    def _time_wall(self, task, cand, ref, cases, cpu, verdicts, figures) -> Timing:
        """Interleave reference and candidate repeats (alternating order) so drift hits both."""
        n = self.config.repeats
        binaries = {"candidate": cand, "reference": ref}
        wall = {role: [[0.0] * n for _ in cases] for role in binaries}  # [test][repeat]
        cpu_s = {role: [0.0] * n for role in binaries}  # all tests, per repeat
        for r in range(n):
            for i, case in enumerate(cases):
                for role in ("candidate", "reference") if r % 2 else ("reference", "candidate"):
                    out = self._run(binaries[role], case, cpu)
                    v = self._verdict(case, out)  # every timed run is checked, as in PIE
                    if v.status is not Status.OK and role == "candidate":
                        raise _FlakyCandidate(
                            v.status, f"test {case.index}, timed run {r + 1}: {v.reason}"
                        )
                    if v.status is not Status.OK:
                        raise EvaluatorError(
                            f"task {task.task_id}: the reference failed timed run {r + 1} of test "
                            f"{case.index} after passing it: {v.status.value}: {v.reason}"
                        )
                    wall[role][i][r] = out.wall_s
                    cpu_s[role][r] += out.cpu_s
        cand_t, ref_t = wall["candidate"], wall["reference"]
        for v, times in zip(verdicts, cand_t, strict=True):
            v.runtime_s = statistics.median(times)
        cand_tot = [sum(t[r] for t in cand_t) for r in range(n)]
        ref_tot = [sum(t[r] for t in ref_t) for r in range(n)]
        figures["reference_tests"] = [statistics.median(t) for t in ref_t]
        # user+sys time of the same runs: less sensitive to load than elapsed time
        figures["cpu_time_s"] = {role: statistics.median(v) for role, v in cpu_s.items()}
        return Timing(
            "wall",
            "s",
            statistics.median(cand_tot),
            statistics.median(ref_tot),
            _rel_iqr(cand_tot),
            _rel_iqr(ref_tot),
            n,
        )

    def _reference_counts(self, task: Task, ref: Path, cases, cpu) -> list[float]:
        """Deterministic modes: measure the reference once per (task, binary, mode), on disk."""
        key = hashlib.sha256(
            json.dumps(
                [
                    task.content_hash(),
                    ref.name,
                    self.config.timing,
                    self._valgrind_version(),
                    CACHE_SIM_ARGS,
                    EVALUATOR_VERSION,
                ]
            ).encode()
        ).hexdigest()[:24]
        path = self.cache_dir / "reference" / f"{key}.json"
        if path.is_file():
            return json.loads(path.read_text())["costs"]
        costs = [self._count(ref, c, cpu, "reference", task) for c in cases]
        atomic_write_json(
            path, {"task_id": task.task_id, "mode": self.config.timing, "costs": costs}
        )
        return costs

    def _count(self, binary: Path, case: TestCase, cpu: int | None, role: str, task: Task) -> float:
        """Instructions (or estimated cycles) of one run under cachegrind.

        Valgrind logs to a file of its own (not the program's stderr, which the program
        controls), and only the summary of the main process is read.
        """
        sim = self.config.timing == "cachegrind"
        with tempfile.TemporaryFile() as log:
            prefix = [
                self._valgrind,
                "--tool=cachegrind",
                "--vgdb=no",
                f"--log-fd={log.fileno()}",
                "--cachegrind-out-file=/dev/null",
                f"--cache-sim={'yes' if sim else 'no'}",
                *(CACHE_SIM_ARGS if sim else ()),
            ]
            # Hiding separate debug info halves valgrind's start-up; counts are unchanged.
            out = self._run(binary, case, cpu, prefix, True, (log.fileno(),), DEBUG_INFO)
            log.seek(0)
            text = log.read().decode(errors="replace")
        stats = _parse_cachegrind(text)
        if out.timed_out or "I   refs" not in stats:
            why = f"{_crash_reason(out)}; valgrind log: {text.strip()[-300:]}"
            if role == "candidate":
                raise _FlakyCandidate(
                    Status.RUNTIME_ERROR, f"test {case.index}: failed under valgrind ({why})"
                )
            raise EvaluatorError(
                f"task {task.task_id}: valgrind could not measure the reference on test "
                f"{case.index} ({why})"
            )
        if not sim:
            return float(stats["I   refs"])
        l1 = stats["I1  misses"] + stats["D1  misses"]
        ll = stats["LLi misses"] + stats["LLd misses"]
        return float(stats["I   refs"] + L1_MISS_CYCLES * l1 + LL_MISS_CYCLES * ll)

    def _valgrind_version(self) -> str:
        if self._valgrind is None:
            return ""
        return subprocess.run(
            [self._valgrind, "--version"], capture_output=True, text=True
        ).stdout.strip()

    # -- profile --------------------------------------------------------------------------
    def _profile(self, binary: Path, cases, cpu, figures) -> dict:
        """Per-function instruction costs (callgrind, largest test) and peak memory."""
        case = max(cases, key=lambda c: c.input_path.stat().st_size)
        with tempfile.NamedTemporaryFile(prefix="callgrind-", suffix=".out") as f:
            os.chmod(f.name, 0o666)  # written by the sandboxed uid through the inherited fd
            fd = f.fileno()
            prefix = [
                self._valgrind,
                "--tool=callgrind",
                f"--callgrind-out-file=/proc/self/fd/{fd}",
                "--dump-instr=no",
            ]
            out = self._run(binary, case, cpu, prefix, True, (fd,))
            if out.exit_code != 0:
                return {
                    "error": f"callgrind failed: {_crash_reason(out)}",
                    "peak_rss_kb": figures["peak_rss_kb"],
                }
            annotated = subprocess.run(
                ["callgrind_annotate", "--inclusive=no", f.name], capture_output=True, text=True
            ).stdout
        total, functions = _parse_annotate(annotated)
        return {
            "tool": "callgrind",
            "test": case.index,
            "total_instructions": total,
            "functions": functions[:PROFILE_TOP_FUNCTIONS],
            "peak_rss_kb": figures["peak_rss_kb"],
        }

    @contextmanager
    def _cpu(self) -> Iterator[int | None]:
        """A CPU of its own for this evaluation (machine-wide; waits while all are taken)."""
        if not self.config.pin_cpus:
            yield None
            return
        with cpu_slot(self._cpus) as cpu:
            yield cpu


def _crash_reason(out: RunOutcome) -> str:
    if out.signal is not None:
        head = f"killed by {signal_name(out.signal)}"
    else:
        head = f"exit code {out.exit_code}"
    tail = out.stderr.decode(errors="replace").strip().splitlines()[-3:]
    return head + (f"; stderr: {' | '.join(tail)[:300]}" if tail else "")


def _rel_iqr(xs: list[float]) -> float | None:
    if len(xs) < 4:
        return (
            (max(xs) - min(xs)) / statistics.median(xs)
            if len(xs) > 1 and statistics.median(xs)
            else None
        )
    q = statistics.quantiles(xs, n=4)
    med = statistics.median(xs)
    return (q[2] - q[0]) / med if med else None


_MAIN_RE = re.compile(r"^==(\d+)== Command: ", re.M)
_STAT_RE = re.compile(
    r"^==(\d+)== (I   refs|I1  misses|LLi misses|D1  misses|LLd misses):\s+([\d,]+)", re.M
)


def _parse_cachegrind(log: str) -> dict[str, int]:
    """Summary counts of the main process (the first one valgrind announces)."""
    main = _MAIN_RE.search(log)
    if main is None:
        return {}
    return {
        m.group(2): int(m.group(3).replace(",", ""))
        for m in _STAT_RE.finditer(log)
        if m.group(1) == main.group(1)
    }


_FN_RE = re.compile(r"^\s*([\d,]+)\s+\(\s*([\d.]+)%\)\s+(\S.*)$")


def _parse_annotate(text: str) -> tuple[int, list[dict]]:
    total, functions = 0, []
    for line in text.splitlines():
        m = _FN_RE.match(line)
        if not m:
            continue
        cost, share, where = int(m.group(1).replace(",", "")), float(m.group(2)), m.group(3)
        if "PROGRAM TOTALS" in where:
            total = cost
            continue
        functions.append({"function": where.strip(), "instructions": cost, "share_pct": share})
    return total, functions


@contextmanager
def _progress(enabled: bool, total: int):
    """A rich progress bar (rate, ETA) for long evaluate_many calls; a no-op tick otherwise."""
    if not enabled:
        yield lambda: None
        return
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        ProgressColumn,
        TextColumn,
        TimeRemainingColumn,
    )
    from rich.text import Text

    class Rate(ProgressColumn):
        def render(self, task) -> Text:
            return Text(f"{task.speed * 60:.1f} eval/min" if task.speed else "-- eval/min")

    cols = (
        TextColumn("evaluating"),
        BarColumn(),
        MofNCompleteColumn(),
        Rate(),
        TimeRemainingColumn(),
    )
    with Progress(*cols, transient=True) as bar:
        tid = bar.add_task("eval", total=total)
        yield lambda: bar.advance(tid)
