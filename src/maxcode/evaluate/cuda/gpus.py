"""Which GPUs the CUDA evaluator and the rollouts use, and the environment of every process on them.

One GPU worker per visible device (``visible_gpus``); one compile pool shared by all of them,
sized so each GPU worker keeps a core (``compile_pool_size``); one GPU per rollout, taken
from a per-host slot lock (``gpu_slot``), so N rollouts on N GPUs never share one even
though Snakemake's ``--resources gpu=N`` only counts them. NVLink multicast stays off in
every process started here: the evaluator needs no NCCL, and multicast objects have been
seen to fail on the lent multi-GPU hosts.
"""

from __future__ import annotations

import fcntl
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from maxcode.errors import GpuUnavailable
from maxcode.evaluate.cuda.figures import nvidia_smi

MULTICAST_OFF = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}


def with_multicast_off(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` with NVLink multicast switched off for NCCL, torch symmetric memory and NVSHMEM."""
    return {**env, **MULTICAST_OFF}


def visible_gpus(environ: Mapping[str, str] | None = None) -> list[str]:
    """Device entries to start one GPU worker each on, as CUDA_VISIBLE_DEVICES names them.

    With CUDA_VISIBLE_DEVICES set, its entries in order (indices, ``GPU-<uuid>`` or
    ``MIG-<uuid>``), stopping where CUDA stops: at the first empty or invalid entry, so
    ``""`` and ``"-1"`` mean no GPU; a repeated entry gets one worker. Unset: every device
    nvidia-smi lists, by index.
    """
    env = os.environ if environ is None else environ
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        count = 0
        while nvidia_smi(count):
            count += 1
        return [str(i) for i in range(count)]
    out: list[str] = []
    for entry in (e.strip() for e in visible.split(",")):
        if not (entry.isdigit() or entry.startswith(("GPU-", "MIG-"))):
            break
        if entry not in out:
            out.append(entry)
    return out


def compile_pool_size(configured: int, gpu_workers: int, cpus: int | None = None) -> int:
    """Parallel compile jobs feeding all GPU workers of one evaluator.

    ``configured`` (CudaEvalConfig.compile_workers) wins when set. Otherwise every core but one
    per GPU worker: each worker's timed calls launch kernels from its host thread, and a
    compiler on that core delays the launches (compiles also run niced). One pool for all
    workers, not one per GPU, so a GPU whose candidates compile slowly does not leave cores
    idle while another GPU's queue is empty.
    """
    if configured:
        return configured
    cpus = cpus or os.cpu_count() or 1
    return max(1, cpus - gpu_workers)


def gpu_slots(configured: int, cpus: int | None = None) -> int:
    """Candidates' processes that share one GPU (CudaEvalConfig.gpu_concurrency).

    ``configured`` wins when set. Otherwise one per 4 cores, at most 4: what runs beside
    another candidate is mostly host work (KernelBench's CPU-generated inputs, torch.compile
    of a reference, Python), so the GPU stays busy while it runs, and 4 kept 16 cores busy
    with the compile pool beside them.
    """
    if configured:
        return configured
    cpus = cpus or os.cpu_count() or 1
    return max(1, min(4, cpus // 4))


@dataclass
class Admission:
    """One job's place on a GPU; ``shared`` turns true if another job ran beside it."""

    token: int
    need_mb: float
    alone: bool = False
    shared: bool = False


class GpuMemoryLedger:
    """Lets jobs onto one GPU by the memory they are expected to need.

    A job gets in when its estimate fits beside those running (or nothing runs); a job asked
    for ``alone`` waits for an empty GPU and keeps it. An estimate is only an estimate, so a
    job that ran out of memory or time while it shared the GPU is run again alone (the
    evaluator's ``_run_admitted``): sharing decides no verdict. Ledgers of several GPUs and
    their job queue may share one condition (``cond``), so a freed GPU wakes every waiter.
    """

    def __init__(
        self,
        budget_mb: float | None,
        slots: int,
        cond: threading.Condition | None = None,
        free_mb: Callable[[], float | None] | None = None,
    ):
        self.budget_mb = budget_mb  # None: the GPU's memory is unknown, count slots only
        self.slots = slots
        self.cond = cond or threading.Condition()
        # the GPU's free memory as read now, other processes' use included (other evaluators
        # on the host): a job waits until its estimate is free, at most FOREIGN_WAIT_S when
        # none of this ledger's jobs runs (then it goes in, and a verdict that memory could
        # explain says what other processes held)
        self.free_mb = free_mb
        self._short_since: float | None = None
        self._free_read: tuple[float, float | None] = (-1e9, None)
        self._running: dict[int, Admission] = {}
        self._used = 0.0
        self._tokens = 0
        self._urgent_waiting = 0  # jobs others wait behind (a reference candidates wait for)

    def need(self, need_mb: float | None, alone: bool = False) -> float:
        """The memory a job is counted for: its estimate, or an even share when unknown."""
        budget = self.budget_mb
        if alone and budget:
            return budget
        need = need_mb or (budget or 0.0) / self.slots
        return min(need, budget) if budget else need

    def fits(self, need_mb: float | None, alone: bool = False, urgent: bool = False) -> bool:
        """Whether the job could start now (call with ``cond`` held); while an urgent job
        waits, only urgent jobs may."""
        if self._urgent_waiting and not urgent:
            return False
        if self._running and (
            alone
            or len(self._running) >= self.slots
            or any(a.alone for a in self._running.values())
            or (self.budget_mb is not None and self._used + self.need(need_mb) > self.budget_mb)
        ):
            return False
        return self._free_for(self.need(need_mb))

    def _free_for(self, need: float) -> bool:
        """Whether the GPU's free memory (read at most once a FREE_RECHECK_S) holds ``need``;
        with none of this ledger's jobs running, a job waits for that FOREIGN_WAIT_S at most."""
        if self.free_mb is None:
            return True
        now = time.monotonic()
        if now - self._free_read[0] >= FREE_RECHECK_S:
            self._free_read = (now, self.free_mb())
        free = self._free_read[1]
        if free is None or need <= free:
            self._short_since = None
            return True
        if self._short_since is None:
            self._short_since = now
        return not self._running and now - self._short_since >= FOREIGN_WAIT_S

    def enter(self, need_mb: float | None, alone: bool = False) -> Admission:
        """Count a job in (call with ``cond`` held, after ``fits``)."""
        self._tokens += 1
        admission = Admission(self._tokens, self.need(need_mb, alone), alone=alone)
        if self._running:
            admission.shared = True
            for other in self._running.values():
                other.shared = True
        self._running[admission.token] = admission
        self._used += admission.need_mb
        return admission

    def leave(self, admission: Admission) -> None:
        with self.cond:
            del self._running[admission.token]
            self._used -= admission.need_mb
            self.cond.notify_all()

    @contextmanager
    def admit(
        self, need_mb: float | None, alone: bool = False, urgent: bool = False
    ) -> Iterator[Admission]:
        """Wait until the job fits, then hold its place. An ``urgent`` job (a task's reference,
        which the candidates already run wait for) gets in before any job that is not."""
        with self.cond:
            self._urgent_waiting += urgent
            try:
                while not self.fits(need_mb, alone, urgent):
                    self.cond.wait(FREE_RECHECK_S if self.free_mb else None)
            finally:
                self._urgent_waiting -= urgent
                self.cond.notify_all()
            admission = self.enter(need_mb, alone)
        try:
            yield admission
        finally:
            self.leave(admission)


FREE_RECHECK_S = 1.0  # the GPU's free memory is read again at most this often while jobs wait
FOREIGN_WAIT_S = 60.0  # a job waits this long at most for memory other processes hold

MAX_OVERTAKES = 8
"""How many later jobs may start before a waiting job that does not fit yet; then none may."""
HELD_RECHECK_S = 1.0  # a queue with held jobs looks again this often (a hold can expire)


class GpuQueue:
    """Compiled candidates waiting for a GPU, in the order their builds finished.

    A slot that frees up takes the oldest job that fits beside what runs: a small job may
    start before an older large one that waits for memory (backfill), but only
    ``MAX_OVERTAKES`` times, so the large one is never held back for good. (Strict oldest
    first took 491 s for 64 real candidates on the H100, 2026-11-26; that run recorded no
    queue times, so that slots stood idle behind a level-1 job waiting for memory is read
    from its result timeline, not measured. Largest first was worse: the multi-GB level-1 problems,
    whose correctness trials are bound by KernelBench's serial CPU generator, filled every
    slot and 48 of 64 were done after 423 s.)

    A job ``held`` says is held (its task's correctness inputs are being made ahead) is
    passed over, and not counted as overtaken: it waits here rather than in a GPU slot.
    """

    def __init__(self, cond: threading.Condition, held: Callable[[Any], bool] = lambda job: False):
        self.cond = cond
        self.held = held
        self._jobs: list[_Waiting] = []  # oldest first
        self._closed = False

    def put(self, job: Any, need_mb: float | None) -> None:
        """Queue a job with its memory estimate (None: unknown, an even share of the GPU)."""
        with self.cond:
            self._jobs.append(_Waiting(need_mb, job))
            self.cond.notify_all()

    def close(self) -> None:
        with self.cond:
            self._closed = True
            self.cond.notify_all()

    def take(self, ledger: GpuMemoryLedger) -> tuple[Any, Admission] | None:
        """The next job for ``ledger``'s GPU and its admission; None once closed and empty."""
        with self.cond:
            while True:
                if not self._jobs and self._closed:
                    return None
                index = self._first_fitting(ledger)
                if index is not None:
                    for passed in self._jobs[:index]:
                        if not self.held(passed.job):
                            passed.overtaken += 1
                    waiting = self._jobs.pop(index)
                    return waiting.job, ledger.enter(waiting.need_mb)
                holding = any(self.held(waiting.job) for waiting in self._jobs)
                recheck = HELD_RECHECK_S if holding else None
                if ledger.free_mb is not None and self._jobs:  # free memory is read, not told
                    recheck = min(recheck or FREE_RECHECK_S, FREE_RECHECK_S)
                self.cond.wait(recheck)

    def _first_fitting(self, ledger: GpuMemoryLedger) -> int | None:
        for i, waiting in enumerate(self._jobs):
            if self.held(waiting.job):
                continue
            if ledger.fits(waiting.need_mb):
                return i
            if waiting.overtaken >= MAX_OVERTAKES:
                return None  # its turn: nobody passes it any more
        return None


@dataclass
class _Waiting:
    need_mb: float | None
    job: Any
    overtaken: int = 0


@contextmanager
def gpu_slot(slots_dir: Path, devices: list[str], poll_s: float = 0.5) -> Iterator[str]:
    """Hold one of ``devices`` for the duration: an exclusive lock per device and host.

    A rollout job pins CUDA_VISIBLE_DEVICES to the device it holds. Locks are files under
    ``slots_dir/<host>/``, held by an open descriptor, so a killed job frees its GPU at once
    and a shared file system never makes two hosts wait for each other. When every device
    is held (more GPU jobs than GPUs), waits for the first to come free.
    """
    if not devices:
        raise GpuUnavailable(
            "no GPU visible to hold for this job; run CUDA rollouts on a machine with an NVIDIA GPU "
            "(or check CUDA_VISIBLE_DEVICES)"
        )
    folder = Path(slots_dir) / socket.gethostname()
    folder.mkdir(parents=True, exist_ok=True)
    while True:
        for device in devices:
            fd = os.open(folder / f"gpu-{device}.lock", os.O_CREAT | os.O_RDWR, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            try:
                yield device
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
                os.close(fd)
            return
        time.sleep(poll_s)


@contextmanager
def pinned_gpu(slots_dir: Path) -> Iterator[str | None]:
    """For one rollout job: hold one visible GPU and make it the only one this process sees.

    Snakemake's ``--resources gpu=N`` runs at most N GPU jobs at once but does not say which
    GPU each gets; the slot lock does, and CUDA_VISIBLE_DEVICES pins the job's evaluator to
    it. Yields the device entry (recorded in the rollout's records), or None when no GPU is
    visible (the evaluator then says so itself if it needs one).
    """
    devices = visible_gpus()
    if not devices:
        yield None
        return
    with gpu_slot(slots_dir, devices) as device:
        previous = os.environ.get("CUDA_VISIBLE_DEVICES")
        os.environ["CUDA_VISIBLE_DEVICES"] = device
        try:
            yield device
        finally:
            if previous is None:
                os.environ.pop("CUDA_VISIBLE_DEVICES", None)
            else:
                os.environ["CUDA_VISIBLE_DEVICES"] = previous


def host_lock_dir() -> Path:
    """Where every evaluator process on this host finds the GPUs' lock files."""
    return Path(os.environ.get("MAXCODE_GPU_LOCK_DIR", "/tmp/maxcode-gpu-locks"))


def host_lock_path(bus_id: str) -> Path | None:
    """The lock file of the GPU at PCI ``bus_id``, made if missing (None: no bus id, or no
    directory can be made): readable by every user, as evaluators of several users may share
    the GPU."""
    if not bus_id:
        return None
    directory = host_lock_dir()
    path = directory / f"{bus_id.replace(':', '_').lower()}.lock"
    try:
        directory.mkdir(mode=0o1777, parents=True, exist_ok=True)
        for file in (path, path.with_suffix(".turn")):
            if not file.exists():
                file.touch(mode=0o644)
    except OSError:
        return None
    return path


class HostGpuLock:
    """The advisory lock of one GPU that every evaluator process on the host honours: a
    process holds it shared while any of its candidates does shared GPU work and exclusively
    while one is timed, so no timing overlaps another process's timing or GPU work. A process
    waiting to time holds the turnstile file, and a process takes the lock shared only past
    the turnstile, so a stream of shared work elsewhere cannot hold a timing off for good.
    Every call is non-blocking: the caller (the zygote's poll loop) asks again."""

    def __init__(self, path: Path):
        self.main = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        self.turn = os.open(path.with_suffix(".turn"), os.O_RDONLY | os.O_CLOEXEC)
        self.mode = ""  # "", "shared" or "exclusive"
        self.in_turn = False
        self.refusals = 0  # tries another process's hold refused: it was using this GPU

    def fds(self) -> tuple[int, int]:
        return self.main, self.turn

    def _try(self, fd: int, how: int) -> bool:
        try:
            fcntl.flock(fd, how | fcntl.LOCK_NB)
        except BlockingIOError:
            self.refusals += 1
            return False
        return True

    def try_shared(self) -> bool:
        """Hold the lock shared (or more); False while another process times or waits to."""
        if self.in_turn:  # this process waits to time: no new shared work meanwhile
            return False
        if self.mode:
            return self._try(self.turn, fcntl.LOCK_SH) and self._pass_turn()
        if not self._try(self.turn, fcntl.LOCK_SH):
            return False
        got = self._try(self.main, fcntl.LOCK_SH)
        self._pass_turn()
        if got:
            self.mode = "shared"
        return got

    def _pass_turn(self) -> bool:
        fcntl.flock(self.turn, fcntl.LOCK_UN)
        return True

    def try_exclusive(self) -> bool:
        """Hold the lock exclusively, taking the turnstile first and keeping it until then."""
        if self.mode == "exclusive":
            return True
        if not self.in_turn:
            if not self._try(self.turn, fcntl.LOCK_EX):
                return False
            self.in_turn = True
        if self.mode == "shared":
            fcntl.flock(self.main, fcntl.LOCK_UN)
            self.mode = ""
        if not self._try(self.main, fcntl.LOCK_EX):
            return False
        self.mode = "exclusive"
        fcntl.flock(self.turn, fcntl.LOCK_UN)
        self.in_turn = False
        return True

    def release(self) -> None:
        """Let go of the lock (shared or exclusive); a turnstile held for a timing stays."""
        if self.mode:
            fcntl.flock(self.main, fcntl.LOCK_UN)
            self.mode = ""

    def close(self) -> None:
        for fd in self.fds():
            os.close(fd)
