"""``CudaEvaluator``: static checks, pooled compilation, sandboxed GPU runs, typed results.

Pipeline of ``evaluate_items``: static checks in this process (cheap, first); a thread
pool drives one compile subprocess per candidate on the CPUs (content-addressed build
cache: identical candidates never compile twice); as each build finishes its candidate
is queued to a GPU worker (one per GPU, a zygote forking a fresh process per
candidate), so compilation overlaps GPU evaluation. Several candidates share a GPU
(``gpu_concurrency`` slots, let in by their expected memory) for loading and checking,
while every timing has the GPU alone; the task's reference is timed, once, when its first
candidate is correct, and the speedups are computed here.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import math
import os
import resource
import select
import shutil
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from maxcode.errors import GpuUnavailable, SandboxUnavailable
from maxcode.evaluate.cuda.build import (
    COMPILE_NICENESS,
    NOT_CACHED,
    BuildCache,
    BuildOutcome,
    ExtensionSpec,
    detect_toolchain,
    wait_for_pch_builds,
)
from maxcode.evaluate.cuda.checks import static_findings
from maxcode.evaluate.cuda.config import CudaEvalConfig, default_cache_dir
from maxcode.evaluate.cuda.estimator import Estimator
from maxcode.evaluate.cuda.figures import (
    detect_cuda_arch,
    gpu_free_mb,
    host_gpu_facts,
    reference_fits,
    speedup_figures,
)
from maxcode.evaluate.cuda.gpus import (
    Admission,
    GpuMemoryLedger,
    GpuQueue,
    compile_pool_size,
    gpu_slots,
    host_lock_path,
    visible_gpus,
    with_multicast_off,
)
from maxcode.evaluate.cuda.loader import specs_written_out
from maxcode.evaluate.cuda.semantics import SEMANTICS
from maxcode.evaluate.cuda.supervisor import GpuWorker
from maxcode.evaluate.result import EvalResult, Status, TestVerdict, Timing
from maxcode.evaluate.sandbox import Confinement, confinement, uid_slot
from maxcode.evaluate.scrub import allowed_env, scrub_tree
from maxcode.records import atomic_write_json
from maxcode.tasks.model import Task

# 2: references' torch.compile works in the sandbox (figures cached by version 1 lack it).
# 3: the reference is timed when a candidate of the task is first correct; the GPU is shared.
# 4: the TF32 setting is part of the key (and of every figure set).
# 5: TF32 code with a 3xTF32 split passes the static precision check.
EVALUATOR_VERSION = "5"
# Imported by every candidate's process for torch.compile and the profiler; preloaded in the
# zygote when a forked probe shows the GPU still works after importing them.
FORK_SAFE_IF_PROBED = (
    "torch._dynamo",
    "torch._inductor.compile_fx",
    "torch._inductor.codegen.triton",
    "torch.profiler",
)


def _limit_compile_job(memory_bytes: int) -> None:
    """Runs in the compile job's child before exec: cap its memory, lower its priority."""
    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    os.nice(COMPILE_NICENESS)


@dataclass
class _Job:
    index: int
    task: Task
    source: str
    job_dir: Path
    figures: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    result: EvalResult | None = None
    prebuilt: dict[str, str] = field(default_factory=dict)  # spec digest -> build key
    gpu_memory_mb: float | None = None  # what its process is expected to need (compile job)
    reference_gpu_memory_mb: float | None = None  # what its task's reference process needs
    queued_at: float = 0.0  # when its build finished and it joined the GPU queue
    inputs_key: str | None = None  # its task's correctness inputs, made ahead (_InputsAhead)


class CudaEvaluator:
    """Evaluator protocol for KernelBench-format CUDA tasks (``ModelNew`` candidates)."""

    def __init__(
        self,
        config: CudaEvalConfig | None = None,
        cache_dir: Path | None = None,
        gpus: list[int | str] | None = None,
    ):
        self.config = config or CudaEvalConfig()
        # absolute: workers and the sandbox run from other working directories
        self.cache_dir = (Path(cache_dir) if cache_dir else default_cache_dir()).resolve()
        self.gpus = gpus
        cfg_hash = hashlib.sha256(
            json.dumps(self.config.to_dict(), sort_keys=True, default=list).encode()
        ).hexdigest()[:8]
        self.name = f"maxcode-cuda/{EVALUATOR_VERSION}+{cfg_hash}"
        self._workers: list[GpuWorker] = []
        self._arch: str | None = None
        self._jail: Confinement | None = None
        self._references: dict[str, dict[str, Any]] = {}
        self._reference_locks: dict[str, threading.Lock] = {}
        self._reference_lock = threading.Lock()  # guards the two dicts above
        self._gpu_facts: dict[str | None, dict[str, Any]] = {}
        self._ledgers: dict[str | None, GpuMemoryLedger] = {}
        self._gpu_cond = threading.Condition()  # every GPU's ledger and the job queue
        self._observed_mb: dict[str, float] = {}  # peak GPU memory seen per task source
        self._pch_ahead: threading.Thread | None = None  # see _prepare_host_pch
        self.pch_ahead_seconds: float | None = None  # its wall time (0 when it was there)
        self.pch_first_seconds: float | None = None  # until the lightest header set was there
        self._estimates: dict[str, _TaskEstimate] = {}  # per reference source, see _compile
        self._estimate_lock = threading.Lock()
        self._estimator: Estimator | None = None  # started with the first task's estimate
        self._pch_lock = threading.Lock()

    @property
    def jail(self) -> Confinement:
        """How candidate code is confined on this host (probed once)."""
        if self._jail is None:
            jail = confinement(self.cache_dir)
            self._refuse_below_full(jail.level)
            self._jail = jail
        return self._jail

    def _refuse_below_full(self, level: str) -> None:
        if self.config.require_full_sandbox and level != "full":
            raise SandboxUnavailable(
                f"evaluation.cuda.require_full_sandbox: candidate code would run with sandbox "
                f"'{level}'; run as root on a host that allows namespaces, or set it to false "
                "to evaluate with that level recorded in every result"
            )

    # -- public API -----------------------------------------------------------------------
    def evaluate(self, task: Task, source: str) -> EvalResult:
        return self.evaluate_items([(task, source)])[0]

    def evaluate_many(
        self, task: Task, sources: Sequence[str], progress: bool = False
    ) -> list[EvalResult]:
        """The Evaluator protocol's batch call: several candidates of one task."""
        return self.evaluate_items([(task, s) for s in sources])

    def evaluate_items(
        self,
        items: Sequence[tuple[Task, str]],
        on_result: Callable[[int, EvalResult], None] | None = None,
    ) -> list[EvalResult]:
        """Results in input order; compilation of later candidates overlaps GPU runs of earlier ones.

        ``on_result(index, result)`` is called as each candidate finishes (from worker
        threads), so long batches can report progress.
        """
        done = on_result or (lambda index, result: None)
        jobs = []
        for i, (task, source) in enumerate(items):
            if task.language != "cuda":
                raise ValueError(
                    f"task {task.task_id}: language is {task.language!r}; CudaEvaluator takes 'cuda' tasks"
                )
            job = _Job(i, task, source, self.cache_dir / "runs" / uuid.uuid4().hex)
            job.result = self._static(job)
            if job.result is not None:
                done(i, job.result)
            jobs.append(job)
        pending = [j for j in jobs if j.result is None]
        if pending:
            self._ensure_workers()
            ahead = _InputsAhead(self, pending)
            gpu_queue = GpuQueue(self._gpu_cond, held=ahead.holds)
            errors: list[BaseException] = []
            threads = [
                threading.Thread(
                    target=self._gpu_loop,
                    args=(w, gpu_queue, ahead, errors, done),
                    daemon=True,
                )
                for w in self._workers
                for _ in range(self._ledger(w).slots)
            ]
            for t in threads:
                t.start()
            try:
                pool_size = compile_pool_size(self.config.compile_workers, len(self._workers))
                with ThreadPoolExecutor(pool_size) as pool:
                    futures = {pool.submit(self._compile, job): job for job in pending}
                    for fut in as_completed(futures):
                        job = futures[fut]
                        if fut.result():
                            job.queued_at = time.monotonic()
                            ahead.queued(job)
                            gpu_queue.put(job, self._need_mb(job))
                        else:
                            ahead.done(job)
                            done(job.index, job.result)
            finally:
                gpu_queue.close()
                for t in threads:
                    t.join()
                ahead.close()
            if errors:
                raise RuntimeError(
                    f"a GPU worker failed; the evaluator cannot continue: {errors[0]}"
                ) from errors[0]
        for job in jobs:
            shutil.rmtree(job.job_dir, ignore_errors=True)
        return [j.result for j in jobs]  # type: ignore[misc]

    def close(self) -> None:
        for w in self._workers:
            w.close()
        self._workers = []
        if self._estimator is not None:
            self._estimator.close()
        if self._pch_ahead is not None:
            self._pch_ahead.join()  # its compiler must not outlive the evaluator
        wait_for_pch_builds()  # nor those that builds started

    def __enter__(self) -> CudaEvaluator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def gpu_slot_count(self) -> int:
        """Candidates' processes that can run at once over all GPU workers (0 before any ran)."""
        return sum(self._ledger(w).slots for w in self._workers)

    @property
    def cuda_arch(self) -> str:
        if self._arch is None:
            self._arch = self.config.cuda_arch or detect_cuda_arch()
            if not self._arch:
                raise GpuUnavailable(
                    "no NVIDIA GPU found by nvidia-smi; set CudaEvalConfig.cuda_arch (e.g. '9.0') to compile without one"
                )
        return self._arch

    # -- stages ---------------------------------------------------------------------------
    def _static(self, job: _Job) -> EvalResult | None:
        # half-precision code is a downgrade only where the reference runs at fp32
        reference_is_fp32 = (
            self.config.precision == "fp32" and job.task.metadata.get("precision", "fp32") == "fp32"
        )
        try:
            findings = static_findings(job.source, reference_is_fp32=reference_is_fp32)
        except (SyntaxError, ValueError) as err:
            line = getattr(err, "lineno", None)
            return self._result(
                Status.COMPILE_ERROR,
                f"candidate is not valid Python (line {line}): {getattr(err, 'msg', err)}",
            )
        for f in findings:
            severity = self.config.severity(f.check_id)
            if severity == "error":
                return self._result(
                    Status.REJECTED,
                    f"{f.check_id}: {f.message}",
                    figures={"failed_check": f.check_id},
                )
            if severity == "warn":
                job.warnings.append(f"{f.check_id}: {f.message}")
        return None

    def candidate_key(self, source: str, reference_source: str) -> str:
        """The builds a candidate needs depend on its source, the task's init inputs and the toolchain."""
        toolchain = detect_toolchain(self.cuda_arch)
        payload = [
            source,
            reference_source,
            toolchain.fingerprint(),
            self.config.host_pch,
            self.config.light_cuda_headers,
            *([True] if self.config.split_host_functions else []),  # earlier keys stay valid
            *(["light host"] if self.config.light_host_headers else []),
            EVALUATOR_VERSION,
        ]
        return hashlib.sha256(json.dumps(payload).encode()).hexdigest()[:24]

    def _compile(self, job: _Job) -> bool:
        """Build the candidate's extensions; False (with job.result set) when it does not compile."""
        index = (
            self.cache_dir
            / "candidates"
            / f"{self.candidate_key(job.source, job.task.reference_source)}.json"
        )
        job.job_dir.mkdir(parents=True, exist_ok=True)
        (job.job_dir / "candidate.py").write_text(job.source)
        (job.job_dir / "reference.py").write_text(job.task.reference_source)
        if index.is_file():
            reply = json.loads(index.read_text())
            job.figures["build_cached"] = True
        else:
            reply = self._run_compile_job(job)
            deterministic = (
                all(b["failed_step"] not in NOT_CACHED for b in reply["builds"])
                and reply.get("import_error") is None
            )
            if deterministic:
                kept = {
                    "builds": reply["builds"],
                    "prebuilt": reply.get("prebuilt", {}),
                    "gpu_memory_mb": reply.get("gpu_memory_mb"),
                    "reference_gpu_memory_mb": reply.get("reference_gpu_memory_mb"),
                }
                atomic_write_json(index, {**kept, "import_error": None})
            job.figures["build_cached"] = False
        job.prebuilt = reply.get("prebuilt", {})
        # the estimate came before candidate code ran (_TaskEstimate); still only a number
        job.gpu_memory_mb = _megabytes(reply.get("gpu_memory_mb"))
        job.reference_gpu_memory_mb = _megabytes(reply.get("reference_gpu_memory_mb"))
        reply = scrub_tree(reply)  # compiler output can quote anything the candidate printed
        builds = reply["builds"]
        job.figures["compile_seconds"] = round(sum(b["seconds"] for b in builds), 3)
        job.figures["compile_wall_seconds"] = reply.get("wall_seconds", 0.0)
        if "seconds" in reply:
            job.figures["compile_job_seconds"] = reply["seconds"]
        job.figures["builds"] = [
            {k: b[k] for k in ("name", "key", "ok", "seconds", "steps", "cuda_headers", "cached")}
            | {"host_split": b.get("host_split", "")}  # why its host functions were not moved
            | {"host_headers": b.get("host_headers", "")}
            for b in builds
        ]
        failed = next((b for b in builds if not b["ok"]), None)
        if failed is None:
            return True
        status = Status.TIMEOUT if failed["failed_step"] == "timeout" else Status.COMPILE_ERROR
        job.result = self._result(
            status,
            f"extension '{failed['name']}' failed to build ({failed['failed_step']}): {failed['first_error']}",
            compile_log=failed["log"],
            figures=job.figures,
        )
        job.result.sandbox = self.jail.level
        return False

    def _estimate_key(self, task: Task) -> str:
        """The estimate depends on the reference, torch's meta kernels and our formula."""
        torch_version = detect_toolchain(self.cuda_arch).torch_version
        payload = [task.reference_source, torch_version, EVALUATOR_VERSION]
        return hashlib.sha256(json.dumps(payload).encode()).hexdigest()[:24]

    def _task_estimate(self, task: Task) -> _TaskEstimate:
        """The task's memory estimate: kept on disk, else asked of the estimator once (the
        task's candidates wait for the same one)."""
        key = self._estimate_key(task)
        with self._estimate_lock:
            estimate = self._estimates.get(key)
            if estimate is None:
                path = self.cache_dir / "estimates" / f"{key}.json"
                estimate = self._estimates[key] = _TaskEstimate(path)
                if not estimate.known:
                    if self._estimator is None:
                        limit = self.config.memory_limit_mb * 1024 * 1024
                        self._estimator = Estimator(
                            self.jail,
                            _cpu_job_env(),
                            self.cache_dir / "estimates" / "estimator.log",
                            lambda: resource.setrlimit(resource.RLIMIT_AS, (limit, limit)),
                        )
                    self._estimator.ask(task.reference_source, estimate.set)
            return estimate

    def _prepare_host_pch(self, cache: BuildCache) -> None:
        """Starts building the precompiled headers, once: from ``prepare_build_cache`` or else
        with the first compile job (the jobs of the first wave spend their first seconds
        starting Python and running the candidate's code before they ask for a build; each
        one waits for the header)."""
        with self._pch_lock:
            if self._pch_ahead is not None:
                return

            def build() -> None:
                t0 = time.monotonic()

                def first_ready() -> None:
                    self.pch_first_seconds = round(time.monotonic() - t0, 3)

                with contextlib.suppress(Exception):  # a build that needs it says why it failed
                    cache.prepare_host_pch(self.config.compile_timeout_s, first_ready)
                self.pch_ahead_seconds = round(time.monotonic() - t0, 3)

            self._pch_ahead = threading.Thread(target=build, name="maxcode-pch", daemon=True)
            self._pch_ahead.start()

    def prepare_build_cache(self, wait: bool = False) -> float | None:
        """Start building this machine's precompiled headers now, before any candidate: a
        rollout and ``optimize`` call it as they build the evaluator, so the headers build
        while the LLM writes the first candidates instead of holding up every build of the
        first wave. ``wait``: return once they are built, with the seconds that took. Without
        a GPU or a sandbox it does nothing; the first evaluation says what is missing."""
        try:
            cache = self._build_cache()
        except (RuntimeError, SandboxUnavailable):
            return None
        self._prepare_host_pch(cache)
        if not wait or self._pch_ahead is None:
            return None
        self._pch_ahead.join()
        return self.pch_ahead_seconds

    def _build_cache(self) -> BuildCache:
        return BuildCache(
            self.cache_dir / "build",
            self.cuda_arch,
            self.config.host_pch,
            self.config.light_cuda_headers,
            jail=self.jail,
            split_host=self.config.split_host_functions,
            light_host_headers=self.config.light_host_headers,
        )

    def _run_compile_job(self, job: _Job) -> dict[str, Any]:
        """The compile job runs the candidate's code, so it runs sandboxed (``self.jail``), the
        build cache read-only to it: it sends each spec here and this process builds it."""
        cache = self._build_cache()
        self._prepare_host_pch(cache)
        written = specs_written_out(job.source) if self.config.build_ahead else None
        specs = written.specs if written else []
        estimate = self._task_estimate(job.task)
        builders = ThreadPoolExecutor(max(1, len(specs)), thread_name_prefix="maxcode-ahead")
        timeout_s = self.config.compile_timeout_s
        ahead = {s.digest(): builders.submit(cache.build, s, timeout_s) for s in specs}
        try:
            if written and written.complete and specs:
                return self._written_out_builds(ahead, estimate)
            return self._compile_job_beside(job, cache, ahead, estimate)
        finally:
            builders.shutdown(wait=True)  # a build the job never asked for ends here too

    def _written_out_builds(
        self, ahead: dict[str, Future[BuildOutcome]], estimate: _TaskEstimate
    ) -> dict[str, Any]:
        """The reply of a compile job that is not run: the candidate's source shows every
        build it can ask for (``WrittenOut.complete``), so a sandboxed Python importing torch
        and the candidate would add nothing. A build it asks for at run time all the same is
        made by the GPU process, as any build the compile job did not see."""
        t0 = time.monotonic()
        builds = {digest: started.result() for digest, started in ahead.items()}
        t1 = time.monotonic()
        told = estimate.wait(max(1.0, self.config.compile_timeout_s))
        t2 = time.monotonic()
        return {
            "builds": [b.to_dict() for b in builds.values()],
            "import_error": None,
            "prebuilt": {digest: b.key for digest, b in builds.items() if b.ok},
            "gpu_memory_mb": (told or (None, None))[0],
            "reference_gpu_memory_mb": (told or (None, None))[1],
            "wall_seconds": round(t2 - t0, 3),
            "seconds": {"builds": round(t1 - t0, 3), "estimate": round(t2 - t1, 3)},  # no job
        }

    def _compile_job_beside(
        self,
        job: _Job,
        cache: BuildCache,
        ahead: dict[str, Future[BuildOutcome]],
        estimate: _TaskEstimate,
    ) -> dict[str, Any]:
        """Runs the compile job and serves its builds; ``ahead``: the builds already started."""
        request_r, request_w = os.pipe()
        reply_r, reply_w = os.pipe()
        payload = {
            "cuda_arch": self.cuda_arch,
            "timeout_s": self.config.compile_timeout_s,
            "candidate_path": str(job.job_dir / "candidate.py"),
            "reference_path": str(job.job_dir / "reference.py"),
            "request_fd": request_w,
            "reply_fd": reply_r,
        }
        (job.job_dir / "compile_job.json").write_text(json.dumps(payload))
        limit = self.config.memory_limit_mb * 1024 * 1024
        env = _cpu_job_env()
        argv = [sys.executable, "-m", "maxcode.evaluate.cuda.compile_job"]
        t0 = time.monotonic()
        deadline = t0 + self.config.compile_timeout_s + 120
        timed_out = False
        with (
            uid_slot() as uid,
            open(job.job_dir / "compile_job.json") as stdin,
            open(job.job_dir / "compile_job.out", "w+") as stdout,
            open(job.job_dir / "compile_job.err", "w+") as stderr,
        ):
            proc = subprocess.Popen(
                self.jail.wrap(argv, keep=(job.job_dir, self.cache_dir / "build"), uid=uid),
                stdin=stdin,
                stdout=stdout,
                stderr=stderr,
                env=env,
                cwd=job.job_dir,
                pass_fds=(request_w, reply_r),
                preexec_fn=lambda: _limit_compile_job(limit),
                start_new_session=True,
            )
            os.close(request_w)
            os.close(reply_r)
            prebuilt: dict[str, str] = {}
            with os.fdopen(request_r) as requests, os.fdopen(reply_w, "w") as replies:
                timed_out = not _serve_builds(
                    cache, requests, replies, deadline, self.config, prebuilt, ahead
                )
            if timed_out:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, 9)
            try:
                proc.wait(timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, 9)
                proc.wait()
                timed_out = True
            stdout.seek(0)
            stderr.seek(0)
            out, err = stdout.read(), stderr.read()
        if timed_out:
            return {
                "builds": [
                    {
                        "name": "?",
                        "key": "",
                        "ok": False,
                        "failed_step": "timeout",
                        "first_error": "compile job exceeded its time limit",
                        "log": "",
                        "seconds": self.config.compile_timeout_s,
                        "steps": {},
                        "cuda_headers": "",
                        "cached": False,
                    }
                ],
                "import_error": None,
            }
        ended = time.monotonic()
        try:
            reply = json.loads(out)
        except json.JSONDecodeError:
            reply = {
                "builds": [],
                "import_error": f"compile job crashed (exit {proc.returncode}): {err.strip()[-300:]}",
            }
        reply["prebuilt"] = prebuilt
        told = estimate.wait(max(1.0, deadline - time.monotonic()))
        reply["gpu_memory_mb"], reply["reference_gpu_memory_mb"] = told or (None, None)
        reply["wall_seconds"] = round(time.monotonic() - t0, 3)
        waited = round(time.monotonic() - ended, 3)  # for the estimate, after the job
        seconds = reply.get("seconds")  # the candidate's process wrote it: figures only
        if isinstance(seconds, dict) and all(type(v) in (int, float) for v in seconds.values()):
            start = round(ended - t0 - sum(seconds.values()), 3)
            reply["seconds"] = {"start": start, **seconds, "estimate": waited}
        else:
            reply.pop("seconds", None)
        return reply

    def _ensure_workers(self) -> None:
        if self._workers:
            return
        gpus = [str(g) for g in self.gpus] if self.gpus is not None else visible_gpus()
        if not gpus:
            raise GpuUnavailable(
                "no NVIDIA GPU visible (nvidia-smi lists none, or CUDA_VISIBLE_DEVICES hides them): "
                "a CUDA candidate can only be compiled and statically checked here; run it on a "
                "machine with a GPU"
            )
        # A CUDA driver initialized before fork breaks every child. torch and the worker leave it
        # alone; the compiler stack is kept only if a forked probe can still use the GPU after it
        # (torch.cuda.is_available() checks through NVML, not the driver, with the variable below).
        env = with_multicast_off(
            {
                "TORCHINDUCTOR_CACHE_DIR": str(self.cache_dir / "inductor"),
                "TRITON_CACHE_DIR": str(self.cache_dir / "triton"),
                "TORCHINDUCTOR_COMPILE_THREADS": "1",
                "PYTORCH_NVML_BASED_CUDA_CHECK": "1",
                "PYTHONPATH": _pythonpath(),
            }
        )
        for sub in ("logs", "runs", "build"):  # the zygote's jail carries only what exists
            (self.cache_dir / sub).mkdir(parents=True, exist_ok=True)
        locks = {g: host_lock_path(self._facts(g).get("pci.bus_id", "")) for g in gpus}
        self._workers = [
            GpuWorker(
                g,
                ("torch", "maxcode.evaluate.cuda.worker"),
                {**env, "MAXCODE_GPU_LOCK": str(locks[g])} if locks[g] else env,
                self.cache_dir / "logs" / f"gpu{g}.log",
                optional_preload=FORK_SAFE_IF_PROBED,
                probe="maxcode.evaluate.cuda.worker:gpu_probe",
            )
            for g in gpus
        ]
        for w in self._workers:
            w.jail = self.jail
            w.job_root = self.cache_dir / "runs"
            lock = locks[w.gpu]  # the zygote opens the GPU's lock file read-only in its jail
            w.keep = (self.cache_dir / "build", *((lock.parent,) if lock else ()))
            w.sandbox = self.jail.level
            w.start()
        try:
            for w in self._workers:  # a GPU the jail cannot reach lowers the level at start
                self._refuse_below_full(w.sandbox)
        except SandboxUnavailable:
            self.close()
            raise

    def _gpu_loop(
        self,
        worker: GpuWorker,
        jobs: GpuQueue,
        ahead: _InputsAhead,
        errors: list[BaseException],
        done: Callable[[int, EvalResult], None],
    ) -> None:
        try:
            self._gpu_jobs(worker, jobs, ahead, done)
        except BaseException as err:
            errors.append(err)

    def reference_key(self, task: Task, gpu: str | None) -> str:
        """Reference figures are reused per task source, semantics, precision, timing and GPU model."""
        cfg = self.config
        payload = [
            task.reference_source,
            cfg.semantics,
            cfg.precision,
            cfg.tf32,
            cfg.seed,
            [cfg.warmup, cfg.timing_trials, cfg.timing_seconds, cfg.timing_max_trials],
            [cfg.flush_l2, cfg.hold_us, cfg.hold_max_us, cfg.time_compiled_reference],
            self._gpu_name(gpu),
            EVALUATOR_VERSION,
        ]
        return hashlib.sha256(json.dumps(payload).encode()).hexdigest()[:24]

    def _facts(self, gpu: str | None) -> dict[str, Any]:
        """nvidia-smi's and NVML's view of a GPU, read here once (not in the sandbox)."""
        if gpu not in self._gpu_facts:
            self._gpu_facts[gpu] = host_gpu_facts(gpu or "0")
        return self._gpu_facts[gpu]

    def _gpu_name(self, gpu: str | None) -> str:
        return self._facts(gpu).get("name", "")

    def reference_figures(self, task: Task) -> dict[str, Any]:
        """The figures every candidate of ``task`` divides by (eager and torch.compile timings),
        measured as for a candidate (once, in a process no candidate enters) without one.

        ``{"reference": figures}`` or ``{"reference": None, "reference_error": why}``.
        """
        self._ensure_workers()
        return self._reference_for(self._workers[0], task)

    def _reference_for(
        self, worker: GpuWorker, task: Task, need_mb: float | None = None
    ) -> dict[str, Any]:
        """The task's reference figures, measured once in a process no candidate code enters
        (admitted at ``need_mb``, the task's estimate, else at its candidates' peak).

        ``{"reference": figures}`` or ``{"reference": None, "reference_error": why}``; figures
        are kept in memory and under ``<cache>/references/`` for later batches. Tasks are
        measured side by side; two candidates of one task wait for the same measurement.
        """
        key = self.reference_key(task, worker.gpu)
        path = self.cache_dir / "references" / f"{key}.json"
        with self._reference_lock:
            lock = self._reference_locks.setdefault(key, threading.Lock())
        with lock:
            if key not in self._references:
                if path.is_file():
                    self._references[key] = {"reference": json.loads(path.read_text())}
                else:
                    self._references[key] = self._measure_reference(worker, task, path, need_mb)
            return self._references[key]

    def _known_reference(self, task: Task, gpu: str | None) -> dict[str, Any] | None:
        """The task's reference figures if they were measured already (never measures)."""
        key = self.reference_key(task, gpu)
        known = self._references.get(key, {}).get("reference")
        path = self.cache_dir / "references" / f"{key}.json"
        if known is None and path.is_file():
            known = json.loads(path.read_text())
        return known

    def _measure_reference(
        self, worker: GpuWorker, task: Task, path: Path, need_mb: float | None
    ) -> dict[str, Any]:
        job_dir = self.cache_dir / "runs" / f"reference-{uuid.uuid4().hex}"
        job_dir.mkdir(parents=True, exist_ok=True)
        (job_dir / "reference.py").write_text(task.reference_source)
        try:
            reply = self._run_admitted(
                worker,
                {
                    "entry": "maxcode.evaluate.cuda.worker:run_reference",
                    "gpu_facts": self._facts(worker.gpu),
                    "job_dir": str(job_dir),
                    "config": self._job_config(),
                    "timeout_s": self.config.run_timeout_s,
                    "memory_limit_mb": self.config.memory_limit_mb,
                },
                need_mb or self._observed_mb.get(task.reference_source),
                urgent=True,  # correct candidates wait for it, each holding a GPU slot
            )
        finally:
            shutil.rmtree(job_dir, ignore_errors=True)
        if reply.get("status") == "ok":
            if "compiled_reference_error" not in reply["reference"]:  # a failure is tried again
                atomic_write_json(path, reply["reference"])
            figures = reply.get("figures") or {}
            stages = dict(figures.get("stage_seconds") or {})
            if "gpu_admission_seconds" in figures:  # absent after a run again alone
                stages["admission"] = figures["gpu_admission_seconds"]
            return {
                "reference": reply["reference"],
                **({"stage_seconds": stages} if stages else {}),
            }
        return {
            "reference": None,
            "reference_error": f"{reply.get('status')}: {reply.get('reason', '')}",
        }

    def _ledger(self, worker: GpuWorker) -> GpuMemoryLedger:
        """Admission to ``worker``'s GPU: its slots and memory (from nvidia-smi, less a margin
        for what CUDA and the driver keep)."""
        if worker.gpu not in self._ledgers:
            total = _number(self._facts(worker.gpu).get("memory.total"))
            budget = total * GPU_MEMORY_USABLE if total else None
            self._ledgers[worker.gpu] = GpuMemoryLedger(
                budget,
                gpu_slots(self.config.gpu_concurrency),
                self._gpu_cond,
                free_mb=lambda: gpu_free_mb(worker.gpu or "0"),
            )
        return self._ledgers[worker.gpu]

    def _run_admitted(
        self,
        worker: GpuWorker,
        payload: dict[str, Any],
        need_mb: float | None,
        admission: Admission | None = None,
        urgent: bool = False,
    ) -> dict[str, Any]:
        """Run a job on ``worker``'s GPU once there is room for it (or with the ``admission``
        it was taken with); run it again with the GPU to itself when it ran out of memory or
        time beside other jobs, so that sharing the GPU decides no verdict
        (``figures.run_alone_after`` says why it was run again)."""
        ledger = self._ledger(worker)
        admitted_here, t0 = admission is None, time.monotonic()
        with contextlib.ExitStack() as held:
            if admission is None:
                admission = held.enter_context(ledger.admit(need_mb, urgent=urgent))
            else:
                held.callback(ledger.leave, admission)
            waited = time.monotonic() - t0
            reply = worker.run(payload)
        if admitted_here and isinstance(reply.get("figures", {}), dict):
            reply.setdefault("figures", {})["gpu_admission_seconds"] = round(waited, 3)
        if _sharing_may_explain(reply) and (
            admission.shared or _others_held_memory(reply) or _other_evaluators(reply)
        ):
            first = f"{reply.get('status')}: {str(reply.get('reason', ''))[:200]}"
            with ledger.admit(need_mb, alone=True, urgent=urgent):
                reply = worker.run(payload)
            reply.setdefault("figures", {})["run_alone_after"] = first
            if reply.get("status") == "timeout" and _other_evaluators(reply):
                reply["reason"] += (
                    "; another evaluator process used this GPU meanwhile (outside the timed "
                    "calls), so the verdict may be theirs"
                )
        return reply

    def _job_config(self) -> dict[str, Any]:
        return {
            k: (list(v) if isinstance(v, tuple) else v) for k, v in self.config.to_dict().items()
        }

    def _gpu_jobs(
        self,
        worker: GpuWorker,
        jobs: GpuQueue,
        ahead: _InputsAhead,
        done: Callable[[int, EvalResult], None],
    ) -> None:
        while (taken := jobs.take(self._ledger(worker))) is not None:
            job, admission = taken
            taken_at = time.monotonic()
            job.figures["gpu_queue_seconds"] = round(taken_at - job.queued_at, 3)
            if (held := ahead.held_seconds(job, taken_at)) is not None:
                job.figures["inputs_ahead_queue_seconds"] = round(held, 3)
            known = self._known_reference(job.task, worker.gpu)
            inputs_key = ahead.key_on(job, worker)
            reply = self._run_admitted(
                worker,
                {
                    **({"reference": known} if known else {}),
                    **({"inputs_key": inputs_key} if inputs_key else {}),
                    "entry": "maxcode.evaluate.cuda.worker:run_job",
                    "gpu_facts": self._facts(worker.gpu),
                    "job_dir": str(job.job_dir),
                    "cache_root": str(self.cache_dir / "build"),
                    "cuda_arch": self.cuda_arch,
                    "config": self._job_config(),
                    "task_metadata": job.task.metadata,
                    "prebuilt": job.prebuilt,
                    "timeout_s": self.config.run_timeout_s,
                    "memory_limit_mb": self.config.memory_limit_mb,
                },
                self._need_mb(job),
                admission,
            )
            ahead.done(job)
            reply = scrub_tree(reply)
            self._observe_memory(job.task, reply)
            if reply.get("status") in ("ok", "memory_limit"):
                t0 = time.monotonic()
                reference = self._reference_for(worker, job.task, job.reference_gpu_memory_mb)
                job.figures["reference_wait_seconds"] = round(time.monotonic() - t0, 3)
                if known is None and "stage_seconds" in reference:  # its wait: this measurement
                    job.figures["reference_stage_seconds"] = reference["stage_seconds"]
                reply = self._against_reference(reply, reference)
            # the slot's whole share: process start, the run (again alone), the reference wait
            job.figures["gpu_slot_seconds"] = round(time.monotonic() - taken_at, 3)
            job.result = self._to_result(job, reply)
            job.result.sandbox = worker.sandbox
            _record_device(job.result, worker)
            done(job.index, job.result)

    def _need_mb(self, job: _Job) -> float | None:
        """GPU memory a candidate's process is expected to need: the estimate of its compile
        job (shapes of the task's inputs, outputs and weights), or what an earlier candidate
        of the task peaked at, whichever is larger; None when neither is known."""
        seen = self._observed_mb.get(job.task.reference_source)
        known = [m for m in (job.gpu_memory_mb, seen) if m]
        return max(known) if known else None

    def _observe_memory(self, task: Task, reply: dict[str, Any]) -> None:
        peak = (reply.get("figures") or {}).get("peak_gpu_reserved_mb")
        if peak:
            need = float(peak) * 1.1 + CUDA_CONTEXT_MB
            key = task.reference_source
            self._observed_mb[key] = max(self._observed_mb.get(key, 0.0), need)

    def _against_reference(self, reply: dict[str, Any], ref: dict[str, Any]) -> dict[str, Any]:
        """A candidate's reply completed with the task's reference figures: the speedups for a
        correct one, whether the reference alone fits for one that ran out of memory."""
        figures = reply.setdefault("figures", {})
        figures.setdefault("warnings", [])
        reference = ref.get("reference")
        total_mb = (figures.get("env") or {}).get("memory_mb")
        if reply["status"] == "memory_limit":
            if reference is None:
                error = ref["reference_error"]
                clause = (
                    "the reference alone does not fit either"
                    if error.startswith("memory_limit")
                    else f"the reference could not be measured ({error})"
                )
                figures["reference_fits"] = False
            else:
                clause, figures["reference_fits"] = reference_fits(
                    reference.get("peak_gpu_mb"), total_mb
                )
            if _others_held_memory(reply):  # measured again alone, and still not alone
                held = figures["gpu_other_processes_mb"] / 1024
                clause = f"other processes held {held:.1f} GiB of the GPU when it ran out ({figures.get('gpu_free_mb_at_oom', 0):.0f} MiB free), so the verdict may be theirs, not the candidate's"
                figures["memory_verdict_shared"] = True
            reply["reason"] += f"; {clause}"
            return reply
        if reference is None:
            status, _, why = ref["reference_error"].partition(": ")
            figures.update(harness_error=True, reference_fits=status != "memory_limit")
            return {
                **reply,
                "status": status if status in ("memory_limit", "timeout") else "runtime_error",
                "reason": f"the task's reference failed in its own process, so no candidate can be judged: {why}",
                "timing": None,
            }
        timing, speedups, warnings = speedup_figures(
            reply["timing"], reference, self.config.reference_drift_max
        )
        figures.update(speedups, reference_source="reference process")
        figures["warnings"] += warnings
        reply["timing"] = timing
        speedup = speedups["speedup_vs_eager"]
        severity = self.config.severity("excessive_speedup")
        if speedup > self.config.excessive_speedup and severity != "off":
            message = f"speedup {speedup:.1f}x over eager exceeds {self.config.excessive_speedup:g}x; review before trusting it"
            if severity == "error":
                figures["failed_check"] = "excessive_speedup"
                return {**reply, "status": "rejected", "reason": f"excessive_speedup: {message}"}
            figures["warnings"].append(f"excessive_speedup: {message}")
        return reply

    # -- results --------------------------------------------------------------------------
    def _result(
        self, status: Status, reason: str = "", compile_log: str = "", figures: dict | None = None
    ) -> EvalResult:
        return EvalResult(
            status=status,
            reason=reason,
            compile_log=compile_log,
            figures={**(figures or {}), "tf32": self.config.tf32},
            evaluator=self.name,
        )

    def _to_result(self, job: _Job, reply: dict[str, Any]) -> EvalResult:
        # the evaluator's own figures (compile, queue, slot and reference wait times) win over
        # a reply's: the reply is read from a directory the candidate's process could write
        figures = {**reply.get("figures", {}), **job.figures, "tf32": self.config.tf32}
        figures["warnings"] = job.warnings + figures.get("warnings", [])
        status = Status(reply["status"])
        if status is not Status.OK and reply.get("output_tail"):
            figures["output_tail"] = reply["output_tail"]
        builds = reply.get("builds") or []
        failed = next((b for b in builds if not b["ok"]), None)
        tests = [
            TestVerdict(t["index"], Status(t["status"]), None, t["reason"])
            for t in reply.get("tests") or []
        ]
        timing = None
        stats = reply.get("timing")
        if stats:
            cand, eager = stats["candidate"], stats["eager"]
            timing = Timing(
                mode="cuda_events",
                unit="ms",
                candidate=cand["median"],
                reference=eager["median"],
                candidate_spread=round(cand["iqr"] / cand["median"], 4) if cand["median"] else None,
                reference_spread=round(eager["iqr"] / eager["median"], 4)
                if eager["median"]
                else None,
                repeats=cand["n"],
            )
            figures["runtime_ms"] = stats
        return EvalResult(
            status=status,
            reason=reply.get("reason", ""),
            tests=tests,
            timing=timing if status is Status.OK else None,
            compile_log=failed["log"] if failed else "",
            figures=figures,
            profile=reply.get("profile") if status is Status.OK else None,
            evaluator=self.name,
        )


GPU_MEMORY_USABLE = 0.92  # of the GPU's memory, for jobs' own use (the rest: contexts, driver)
CUDA_CONTEXT_MB = 600.0  # what a process's CUDA context and torch's kernels take besides


INPUTS_AHEAD_MIN_BYTES = 2 << 30
"""A task's correctness trials are made ahead by the GPU worker only from this size on: the wait
that saves is in the multi-GB level-1 problems (in runs Q and S, made ahead, mid-size tasks
held the room the large ones needed)."""


class _InputsAhead:
    """The tasks of one batch whose correctness inputs a GPU worker makes ahead of their
    candidates (trial_inputs.InputStore, in its zygote): asked for as each candidate joins
    the GPU queue, let go when the task's last candidate is done. While the store makes a
    task's set, its candidates wait in the GPU queue (:meth:`holds`), not in a GPU slot; the
    zygote says when (``inputs_pending``), and a hold ends after ``run_timeout_s`` whatever
    it says. With several GPUs each task's inputs are made by one worker, in turn; a
    candidate that runs on another makes its own, as it does when its worker's store left
    them out."""

    def __init__(self, evaluator: CudaEvaluator, jobs: Sequence[_Job]):
        cfg = evaluator.config
        self._config = cfg
        self._runs = evaluator.cache_dir / "runs"
        self._lock = threading.Lock()
        self._cond = evaluator._gpu_cond  # the GPU queue's: a hold that ends wakes its slots
        self._worker: dict[str, GpuWorker] = {}
        self._dirs: dict[str, Path] = {}
        self._left: dict[str, int] = {}
        self._sources: dict[str, str] = {}
        self._pending: dict[str, bool] = {}  # the store is making the task's set (last told)
        self._asked_at: dict[str, float] = {}
        self._settled_at: dict[str, float] = {}  # when it last stopped being made
        self._workers = evaluator._workers
        self._listeners: list[tuple[GpuWorker, Callable[[dict[str, bool] | None], None]]] = []
        if cfg.fast_inputs or not SEMANTICS[cfg.semantics].inputs_on_cpu or not self._workers:
            return  # made on the GPU, or in no store
        self._listeners = [(w, functools.partial(self._told, w)) for w in self._workers]
        for worker, listener in self._listeners:
            worker.inputs_listeners.append(listener)
        for job in jobs:
            key = hashlib.sha256(
                json.dumps([job.task.reference_source, cfg.seed, cfg.correctness_trials]).encode()
            ).hexdigest()[:24]
            job.inputs_key = key
            self._left[key] = self._left.get(key, 0) + 1
            self._sources[key] = job.task.reference_source
            if key not in self._worker:
                self._worker[key] = self._workers[len(self._worker) % len(self._workers)]

    def key_on(self, job: _Job, worker: GpuWorker) -> str | None:
        """The key a candidate's job carries to ``worker``: its task's, if that worker makes them."""
        key = job.inputs_key
        return key if key is not None and self._worker.get(key) is worker else None

    def holds(self, job: _Job) -> bool:
        """Whether ``job`` waits in the GPU queue: its task's set is being made (called by
        the queue, under its condition)."""
        key = job.inputs_key
        return (
            key is not None
            and self._pending.get(key, False)
            and time.monotonic() < self._asked_at[key] + self._config.run_timeout_s
        )

    def held_seconds(self, job: _Job, taken_at: float) -> float | None:
        """Of ``job``'s time in the GPU queue, how long its task's set was being made; None
        for a task the store was not asked to make."""
        key = job.inputs_key
        with self._cond:
            if key is None or key not in self._asked_at:
                return None
            settled = self._settled_at.get(key, 0.0)
            if self._pending.get(key, False):
                settled = taken_at  # taken at the end of its hold
            return max(0.0, min(settled, taken_at) - job.queued_at)

    def queued(self, job: _Job) -> None:
        """A candidate joined the GPU queue: its task's inputs are made while it waits there."""
        key = job.inputs_key
        if key is None or key not in self._worker:
            return
        if job.gpu_memory_mb is not None and job.gpu_memory_mb * 2**20 < 3 * INPUTS_AHEAD_MIN_BYTES:
            return  # small: the task's estimate counts three input sets (not asked)
        with self._cond:  # held until the zygote says otherwise (a task it knows says at once)
            if key not in self._pending:
                self._pending[key], self._asked_at[key] = True, time.monotonic()
        with self._lock:
            if key not in self._dirs:
                job_dir = self._dirs[key] = self._runs / f"inputs-{uuid.uuid4().hex}"
                job_dir.mkdir(parents=True)
                (job_dir / "reference.py").write_text(self._sources[key])
            job_dir = self._dirs[key]
        ask = {
            "key": key,
            "job_dir": str(job_dir),
            "seed": self._config.seed,
            "trials": self._config.correctness_trials,
            "timeout_s": self._config.run_timeout_s,
            "min_bytes": INPUTS_AHEAD_MIN_BYTES,
        }
        if not self._worker[key].tell({"prepare": ask}):  # a zygote that is down makes nothing
            self._told(self._worker[key], {key: False})

    def done(self, job: _Job) -> None:
        key = job.inputs_key
        with self._lock:
            if key not in self._left:
                return
            self._left[key] -= 1
            if self._left[key] > 0:
                return
            del self._left[key]
        self._release(key)

    def close(self) -> None:
        with self._lock:
            keys, self._left = list(self._left), {}
        for key in keys:
            self._release(key)
        for worker, listener in self._listeners:
            worker.inputs_listeners.remove(listener)

    def _told(self, worker: GpuWorker, changes: dict[str, bool] | None) -> None:
        """The zygote's word on its store's sets (None: it died, and its store with it)."""
        now = time.monotonic()
        with self._cond:
            mine = [k for k, w in self._worker.items() if w is worker]
            for key in mine if changes is None else [k for k in changes if k in self._worker]:
                pending = bool(changes and changes[key])
                if self._pending.get(key) and not pending:
                    self._settled_at[key] = now
                if key in self._pending or pending:
                    self._pending[key] = pending
                    self._asked_at.setdefault(key, now)
            self._cond.notify_all()

    def _release(self, key: str) -> None:
        with self._lock:
            job_dir = self._dirs.pop(key, None)
        if job_dir is not None:  # asked for: a candidate of the task was queued
            self._worker[key].tell({"release": key})
            shutil.rmtree(job_dir, ignore_errors=True)


def _sharing_may_explain(reply: dict[str, Any]) -> bool:
    """Verdicts a neighbour on the GPU could have caused: out of memory, out of time."""
    status, reason = reply.get("status"), str(reply.get("reason", "")).lower()
    return status in ("memory_limit", "timeout") or (
        status == "runtime_error" and "out of memory" in reason
    )


OTHER_PROCESSES_MB = (
    1024.0  # other processes' GPU memory, past CUDA contexts, that may explain an OOM
)


def _other_evaluators(reply: dict[str, Any]) -> bool:
    """Whether another evaluator process used the GPU while the job ran (its zygote's word)."""
    return bool((reply.get("figures") or {}).get("other_evaluators_on_gpu"))


def _others_held_memory(reply: dict[str, Any]) -> bool:
    """Whether other processes (another evaluator on the host) held enough of the GPU when
    the candidate ran out of memory that they, not the candidate, may have caused it: not
    when the failed allocation would not have fit even in what they held."""
    figures = reply.get("figures") or {}
    held = _number(figures.get("gpu_other_processes_mb")) or 0.0
    request = _number(figures.get("gpu_oom_request_mb"))
    free = _number(figures.get("gpu_free_mb_at_oom")) or 0.0
    fits_without_them = request is None or request <= free + held
    return held > CUDA_CONTEXT_MB + OTHER_PROCESSES_MB and fits_without_them


def _number(text: Any) -> float | None:
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def _megabytes(value: Any) -> float | None:
    """A memory estimate as the estimator answered it (it ran the task's reference, not a
    candidate, but an answer is only a number) or as kept on disk: a positive finite number,
    else None."""
    number = isinstance(value, int | float) and not isinstance(value, bool)
    return float(value) if number and math.isfinite(value) and value > 0 else None


def _record_device(result: EvalResult, worker: GpuWorker) -> None:
    """The device a candidate ran on, as CUDA_VISIBLE_DEVICES named it to its GPU worker."""
    result.figures["gpu_device"] = str(worker.gpu)


class _TaskEstimate:
    """A task's GPU memory estimate ``(candidate MB, reference MB)``, made once by the
    estimator; the task's candidates wait for it at the end of their compile (it comes within
    seconds, long before their builds end). Kept at ``path`` (written by the evaluator only),
    so that a later evaluator's candidates of the task do not wait for it again."""

    def __init__(self, path: Path) -> None:
        self._event = threading.Event()
        self._value: tuple[float | None, float | None] | None = None
        self._path = path
        with contextlib.suppress(OSError, ValueError):
            saved = json.loads(path.read_text())
            if isinstance(saved, list) and len(saved) == 2:
                self.set(saved, keep=False)

    def set(self, value: Any, keep: bool = True) -> None:
        if self._event.is_set():
            return
        if isinstance(value, list) and len(value) == 2:
            self._value = (_megabytes(value[0]), _megabytes(value[1]))
            if keep:
                with contextlib.suppress(OSError):
                    atomic_write_json(self._path, list(self._value))
        self._event.set()

    @property
    def known(self) -> bool:
        return self._event.is_set()

    def wait(self, timeout_s: float) -> tuple[float | None, float | None] | None:
        self._event.wait(timeout_s)
        return self._value


def _serve_builds(
    cache: BuildCache,
    requests: Any,
    replies: Any,
    deadline: float,
    config: CudaEvalConfig,
    prebuilt: dict[str, str],
    ahead: dict[str, Future[BuildOutcome]] | None = None,
) -> bool:
    """Build each spec a sandboxed compile job asks for, until it closes the channel; False
    when the deadline passed first. A malformed request is answered with a failed build.
    ``prebuilt`` gets each built spec's digest and key (the GPU process loads by them).
    ``ahead``: builds started before the job asked, by spec digest (``specs_written_out``)."""
    ahead = dict(ahead or {})
    fd = requests.fileno()
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        ready, _, _ = select.select([fd], [], [], min(left, 1.0))
        if not ready:
            continue
        line = requests.readline()
        if not line:
            return True
        try:
            spec = ExtensionSpec.from_dict(json.loads(line))
        except (ValueError, KeyError, TypeError) as err:
            outcome = {"key": "", "name": "?", "ok": False, "failed_step": "host",
                       "first_error": f"load_inline arguments rejected: {err}"}  # fmt: skip
        else:
            left = max(1.0, deadline - time.monotonic())
            started = ahead.pop(spec.digest(), None)
            built = (
                started.result()  # the build keeps its own time limit
                if started is not None
                else cache.build(spec, timeout_s=min(config.compile_timeout_s, left))
            )
            if built.ok:
                prebuilt[spec.digest()] = built.key
            outcome = built.to_dict()
        try:
            replies.write(json.dumps(outcome) + "\n")
            replies.flush()
        except BrokenPipeError:
            return True


def _cpu_job_env() -> dict[str, str]:
    """The environment of a sandboxed Python that must not see the GPU (compile job, estimator)."""
    return with_multicast_off(
        allowed_env({"CUDA_VISIBLE_DEVICES": "", "PYTHONPATH": _pythonpath()})
    )


def _pythonpath() -> str:
    """Subprocesses import maxcode from where this process did."""
    src = str(Path(__file__).resolve().parents[3])
    return os.pathsep.join(p for p in (src, os.environ.get("PYTHONPATH", "")) if p)
