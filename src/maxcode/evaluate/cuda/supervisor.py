"""Sandboxed execution: a zygote process per GPU forks one fresh process per candidate.

The zygote imports torch once but never touches CUDA, so every forked child starts with
a clean CUDA context; a crash, an illegal memory access, a hang or a
memory blow-up kills only that child, and the zygote reports it as the candidate's
result. The parent (``GpuWorker``) restarts a zygote that itself dies or stops
answering. Protocol: one JSON job per line on the zygote's stdin, one JSON reply per
line on its stdout; candidates' own output goes to a per-job log file.

Sandbox (``jail``, where the host allows it): the zygote is started by the sandbox launcher
with every mount read-only, only the job root writable, a private ``/tmp``, no network and
an allowlisted environment (no secrets); each child, right after ``fork`` (when it has one
thread, as ``unshare`` requires), gets its own mount namespace where only its job directory
and a fresh ``/tmp`` are writable, then drops to a dedicated uid (:func:`jail_child`). The
zygote reports the level in force (``full``, ``partial: ...``, ``none: ...``) in its hello.

Heavier modules (dynamo, inductor, the profiler) are worth preloading too: each child
would otherwise import them again, seconds per candidate. Whether an import leaves the
CUDA driver uninitialized depends on the torch build, so they are an *optional* preload:
the zygote forks a probe child that must use the GPU; if the probe fails, the worker
restarts the zygote with the required preload only and says why in its log.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import mmap
import os
import select
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from maxcode.evaluate.cuda.gpus import HostGpuLock
from maxcode.evaluate.sandbox import (
    JAIL_TMPFS_MB,
    Confinement,
    carried_paths,
    ensure_uvm_node,
    gpu_nodes_open_to_all,
    jail_child,
    say_once,
    signal_name,
    uid_slot,
)
from maxcode.evaluate.scrub import allowed_env

if TYPE_CHECKING:  # the evaluator's process imports this module, and never torch
    from maxcode.evaluate.cuda.trial_inputs import InputStore

POLL_S = 0.02
LOG_TAIL_CHARS = 1500
_protocol_fd: int | None = None  # the zygote's reply pipe: closed in every child
JAIL_FAILED_EXIT = 4  # a child whose sandbox could not be set up exits with this
# Shared caches a candidate must not write (it could plant compiled code for a later
# reference): each child gets an empty private tmpfs at their paths.
PRIVATE_CACHE_VARS = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")


class Gate:
    """The child's side of the GPU gate, held by the zygote (see :class:`Supervisor`).

    Several candidates' processes share one GPU for loading and checking, but a timing must
    have the GPU to itself. So every stretch of GPU work a child does is either *shared*
    (loading, correctness trials, checks: any number of children at once) or *exclusive*
    (timing: the zygote waits until no other child is inside a shared stretch, then stops
    every other child with SIGSTOP until the exclusive stretch ends). Work outside both
    (generating inputs on the CPU, compiling) runs freely and is frozen by an exclusive
    neighbour like everything else. One byte each way over a pipe pair made before the fork.
    """

    def __init__(self, request_fd: int, grant_fd: int):
        self.request_fd, self.grant_fd = request_fd, grant_fd
        self.mode = ""  # "", "shared" or "exclusive"

    def _ask(self, code: bytes) -> None:
        os.write(self.request_fd, code)
        if os.read(self.grant_fd, 1) != GRANT:
            raise RuntimeError("the GPU gate closed: the GPU worker is gone")

    def shared(self) -> contextlib.AbstractContextManager[None]:
        """GPU work that may run beside other children's (never beside a timing)."""
        return self._stretch("shared", ENTER_SHARED, LEAVE_SHARED)

    def exclusive(self) -> contextlib.AbstractContextManager[None]:
        """GPU work that must have the GPU, and the CPUs of the other children, to itself."""
        if self.mode == "shared":
            raise RuntimeError("an exclusive stretch cannot start inside a shared one")
        return self._stretch("exclusive", ENTER_EXCLUSIVE, LEAVE_EXCLUSIVE)

    @contextlib.contextmanager
    def _stretch(self, mode: str, enter: bytes, leave: bytes) -> Iterator[None]:
        if self.mode:  # already inside a stretch that covers it (exclusive covers shared)
            yield
            return
        self._ask(enter)
        self.mode = mode
        try:
            yield
        finally:
            self.mode = ""
            os.write(self.request_fd, leave)


class NoGate:
    """The gate of a process that has the GPU to itself (not started by a zygote)."""

    @contextlib.contextmanager
    def shared(self) -> Iterator[None]:
        yield

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        yield


ENTER_SHARED, LEAVE_SHARED, ENTER_EXCLUSIVE, LEAVE_EXCLUSIVE, GRANT = b"B", b"b", b"X", b"x", b"G"
_child_gate: Gate | None = None


def child_gate() -> Gate | NoGate:
    """The GPU gate of the evaluation this process runs (a no-op outside a zygote's child)."""
    return _child_gate or NoGate()


@dataclass
class _Child:
    """One running evaluation, as the zygote sees it."""

    job: dict[str, Any]
    pid: int
    started: float
    watchdog: Watchdog
    requests: int  # read end of the child's gate requests (non-blocking)
    grants: int  # write end of the zygote's grants
    peak_kb: int = 0
    held: int = 0  # reasons its clocks stand still: stopped by a neighbour, waiting at the gate
    held_since: float = 0.0
    paused_s: float = 0.0  # seconds its clocks stood still so far
    stopped: bool = False
    verdict: dict[str, Any] | None = None
    inputs_wait_s: float = 0.0  # how long its launch waited for its task's inputs made ahead
    lock_refusals: int = 0  # the host lock's refusals when it started (another process's work)

    def hold(self, now: float) -> None:
        if self.held == 0:
            self.held_since = now
        self.held += 1

    def release(self, now: float) -> None:
        self.held -= 1
        if self.held == 0:
            paused = now - self.held_since
            self.paused_s += paused
            self.watchdog.extend(paused)  # an armed call gets the seconds it stood still

    def elapsed(self, now: float) -> float:
        """Seconds it has run, the seconds it stood still left out."""
        standing = now - self.held_since if self.held else 0.0
        return now - self.started - self.paused_s - standing


class Supervisor:
    """Runs evaluations in forked children side by side, and holds their GPU gate.

    Each child is supervised on its own (time limit, per-call watchdog, host memory) and its
    result is its own; while a neighbour has the GPU exclusively a child is stopped, and the
    seconds it stands still (stopped, or waiting at the gate) count against none of its
    limits, so sharing the GPU never turns into a timeout. Exclusive requests are served in
    order and before new shared ones, so a timing waits only for the shared stretches
    already running.
    """

    def __init__(
        self, store: InputStore | None = None, host_lock: HostGpuLock | None = None
    ) -> None:
        self.store = store  # tasks' correctness inputs made ahead (in the zygote)
        self.host_lock = host_lock  # the GPU's lock shared with other evaluator processes
        self.children: dict[int, _Child] = {}
        self.shared: set[int] = set()
        self.waiting_shared: list[int] = []
        self.waiting_exclusive: list[int] = []
        self.holder: int | None = None

    # -- children -------------------------------------------------------------------------
    def launch(self, job: dict[str, Any], inputs_wait_s: float = 0.0) -> _Child:
        """Fork a child that runs ``job['entry']`` (``module:function``) on the job."""
        job_dir = Path(job["job_dir"])
        (job_dir / "result.json").unlink(missing_ok=True)  # a job run again (alone) starts clean
        watchdog = Watchdog()
        req_r, req_w = os.pipe()
        grant_r, grant_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(req_r)
            os.close(grant_w)
            self._child_main(job, job_dir, watchdog, Gate(req_w, grant_r))  # never returns
        os.close(req_w)
        os.close(grant_r)
        os.set_blocking(req_r, False)
        child = _Child(job, pid, time.monotonic(), watchdog, req_r, grant_w)
        child.inputs_wait_s = inputs_wait_s
        if self.host_lock is not None:
            child.lock_refusals = self.host_lock.refusals
        self.children[pid] = child
        if self.holder is not None:  # a timing is running: the newcomer waits with the rest
            self._stop(child, time.monotonic())
        return child

    def _child_main(
        self, job: dict[str, Any], job_dir: Path, watchdog: Watchdog, gate: Gate
    ) -> None:
        global _child_watchdog, _child_gate
        if self.host_lock is not None:  # the host's GPU lock is the zygote's alone
            for fd in self.host_lock.fds():
                with contextlib.suppress(OSError):
                    os.close(fd)
        for other in self.children.values():  # a neighbour's watchdog and gate are not its own
            other.watchdog.close()
            for fd in (other.requests, other.grants):
                with contextlib.suppress(OSError):
                    os.close(fd)
        _child_watchdog, _child_gate = watchdog, gate
        if self.store is not None:  # its task's inputs made ahead, and no other task's
            self.store.enter_child(job.get("inputs_key"))
        os.setsid()  # own session, so grandchildren die (and stop) with it
        try:
            _jail_this_child(job_dir)
            # its own directory is the working one, as a build or a file a candidate writes
            # next to itself expects (the rest of the filesystem is read-only to it)
            os.chdir(job_dir)
        except BaseException:  # never let a forked child fall back into the zygote's loop
            traceback.print_exc()
            os._exit(JAIL_FAILED_EXIT)
        fd = os.open(job_dir / "output.log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        if _protocol_fd is not None:  # else the candidate could write a verdict line itself
            os.close(_protocol_fd)
        code = 0
        try:
            module_name, fn_name = job["entry"].split(":")
            result = getattr(importlib.import_module(module_name), fn_name)(job)
            result_path = job_dir / "result.json"
            tmp = result_path.with_suffix(".tmp")
            tmp.write_text(json.dumps(result))
            os.replace(tmp, result_path)
        except BaseException:
            traceback.print_exc()
            code = 3
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)

    def request_fds(self) -> list[int]:
        return [c.requests for c in self.children.values()]

    def step(self, readable: Iterable[int] = ()) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        """Serve the gate requests that arrived, check every child; (job, reply) of those done."""
        now = time.monotonic()
        by_fd = {c.requests: c for c in self.children.values()}
        for fd in readable:
            if fd in by_fd:
                self._serve(by_fd[fd], now)
        if self.host_lock is not None:  # what waits for another process's lock asks again
            self._advance(now)
        finished = []
        for child in list(self.children.values()):
            reply = self._check(child, now)
            if reply is not None:
                finished.append((child.job, reply))
        return finished

    def _check(self, child: _Child, now: float) -> dict[str, Any] | None:
        done, status = os.waitpid(child.pid, os.WNOHANG)
        if not done:
            rss = _rss_kb(child.pid)
            child.peak_kb = max(child.peak_kb, rss)
            timeout_s = float(child.job["timeout_s"])
            limit_kb = int(child.job["memory_limit_mb"]) * 1024
            if not child.held:  # standing still it runs no call, and its deadline moves on
                child.verdict = _watchdog_verdict(child.watchdog)
            if child.verdict is None and child.elapsed(now) > timeout_s:
                child.verdict = {
                    "status": "timeout",
                    "reason": f"evaluation exceeded {timeout_s:.0f} s and was killed",
                }
            elif child.verdict is None and rss > limit_kb:
                child.verdict = {
                    "status": "memory_limit",
                    "reason": f"host memory {rss // 1024} MB exceeded the {limit_kb // 1024} MB limit",
                }
            if child.verdict is None:
                return None
            _kill_group(child.pid)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(child.pid, 0)
        return self._finish(child, status if done else None, now)

    def _finish(self, child: _Child, status: int | None, now: float) -> dict[str, Any]:
        self._forget(child, now)
        job_dir = Path(child.job["job_dir"])
        result_path = job_dir / "result.json"
        verdict = child.verdict
        if verdict is None and result_path.is_file():
            verdict = json.loads(result_path.read_text())
        elif (
            verdict is None
            and status is not None
            and os.WIFEXITED(status)
            and (os.WEXITSTATUS(status) == JAIL_FAILED_EXIT)
        ):
            verdict = {
                "status": "runtime_error",
                "reason": "the sandbox could not be set up for this candidate (see the GPU worker's log)",
            }
        elif verdict is None:
            how = (
                signal_name(-os.waitstatus_to_exitcode(status))
                if status is not None and os.WIFSIGNALED(status)
                else f"exit code {os.waitstatus_to_exitcode(status) if status is not None else '?'}"
            )
            verdict = {
                "status": "runtime_error",
                "reason": f"evaluation process died ({how}) without a result",
            }
        _kill_group(child.pid)  # anything the candidate left running in its session
        child.watchdog.close()
        verdict.setdefault("figures", {})
        verdict["figures"]["process_seconds"] = round(now - child.started, 3)
        verdict["figures"]["paused_seconds"] = round(child.paused_s, 3)
        verdict["figures"]["peak_rss_mb"] = round(child.peak_kb / 1024, 1)
        if child.inputs_wait_s:
            verdict["figures"]["inputs_ready_wait_seconds"] = round(child.inputs_wait_s, 3)
        # set here, after the child's own figures: whether another evaluator process used the
        # GPU while this job ran (its hold of the host lock refused one of this zygote's)
        verdict["figures"]["other_evaluators_on_gpu"] = bool(
            self.host_lock is not None and self.host_lock.refusals > child.lock_refusals
        )
        verdict["output_tail"] = _tail(job_dir / "output.log")
        return verdict

    def kill_all(self) -> None:
        for child in list(self.children.values()):
            _kill_group(child.pid)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(child.pid, 0)
            self._forget(child, time.monotonic())

    # -- the gate -------------------------------------------------------------------------
    def _serve(self, child: _Child, now: float) -> None:
        try:
            codes = os.read(child.requests, 64)
        except (BlockingIOError, InterruptedError):
            return
        for code in codes:  # anything else a hostile child writes is ignored
            byte = bytes([code])
            asking = (
                child.pid in self.shared
                or child.pid in self.waiting_shared
                or child.pid in self.waiting_exclusive
                or child.pid == self.holder
            )  # a request out of turn (only a hostile child sends one) is ignored
            if byte == ENTER_SHARED and not asking:
                if self.holder is None and not self.waiting_exclusive and self._host_shared():
                    self._grant(child, shared=True)
                elif child.pid not in self.waiting_shared:
                    self.waiting_shared.append(child.pid)
                    child.hold(now)
            elif byte == LEAVE_SHARED and child.pid in self.shared:
                self.shared.discard(child.pid)
            elif byte == ENTER_EXCLUSIVE and not asking:
                self.waiting_exclusive.append(child.pid)
                child.hold(now)
            elif byte == LEAVE_EXCLUSIVE and self.holder == child.pid:
                self._end_exclusive(now)
        self._advance(now)

    def _grant(self, child: _Child, shared: bool) -> None:
        if shared:
            self.shared.add(child.pid)
        with contextlib.suppress(OSError):
            os.write(child.grants, GRANT)

    def _advance(self, now: float) -> None:
        """Grant what can be granted: the next timing once no shared stretch runs, else the
        shared stretches that waited."""
        if (
            self.holder is None
            and self.waiting_exclusive
            and not self.shared
            and (self.host_lock is None or self.host_lock.try_exclusive())
        ):
            pid = self.waiting_exclusive.pop(0)
            holder = self.children[pid]
            holder.release(now)
            self.holder = pid
            for other in self.children.values():
                if other.pid != pid:
                    self._stop(other, now)
            self._grant(holder, shared=False)
        if (
            self.holder is None
            and not self.waiting_exclusive
            and self.waiting_shared
            and self._host_shared()
        ):
            for pid in self.waiting_shared:
                waiting = self.children[pid]
                waiting.release(now)
                self._grant(waiting, shared=True)
            self.waiting_shared = []
        if self.host_lock is not None and self.holder is None and not self.shared:
            self.host_lock.release()  # nothing of ours on the GPU: other processes may time

    def _host_shared(self) -> bool:
        """Whether the host's GPU lock lets this process do shared GPU work now."""
        return self.host_lock is None or self.host_lock.try_shared()

    def _stop(self, child: _Child, now: float) -> None:
        if not child.stopped:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(child.pid, signal.SIGSTOP)
            child.stopped = True
            child.hold(now)

    def _end_exclusive(self, now: float) -> None:
        self.holder = None
        if self.host_lock is not None:
            self.host_lock.release()
        for other in self.children.values():
            if other.stopped:
                other.stopped = False
                other.release(now)  # its deadline moves while it cannot race the write
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(other.pid, signal.SIGCONT)

    def _forget(self, child: _Child, now: float) -> None:
        """A finished child leaves the gate; what it held or waited for is given up."""
        if self.children.pop(child.pid, None) is None:
            return
        self.shared.discard(child.pid)
        if child.pid in self.waiting_shared:
            self.waiting_shared.remove(child.pid)
        if child.pid in self.waiting_exclusive:
            self.waiting_exclusive.remove(child.pid)
        if self.holder == child.pid:
            self._end_exclusive(now)
        for fd in (child.requests, child.grants):
            with contextlib.suppress(OSError):
                os.close(fd)
        self._advance(now)


def run_in_child(job: dict[str, Any]) -> dict[str, Any]:
    """Run one job in a forked, supervised child and wait for its verdict."""
    supervisor = Supervisor()
    supervisor.launch(job)
    while True:
        ready, _, _ = select.select(supervisor.request_fds(), [], [], POLL_S)
        for _, reply in supervisor.step(ready):
            return reply


def _jail_this_child(job_dir: Path) -> None:
    """The per-candidate sandbox steps, when the zygote runs confined (see module doc)."""
    if os.environ.get("MAXCODE_ZYGOTE_JAILED") != "1" or os.environ.get(NO_CHILD_JAIL):
        return
    uid = os.environ.get("MAXCODE_ZYGOTE_UID")
    keep = [p for p in os.environ.get("MAXCODE_ZYGOTE_KEEP", "").split(os.pathsep) if p]
    private = [os.environ[name] for name in PRIVATE_CACHE_VARS if os.environ.get(name)]
    tmpfs_mb = int(os.environ["MAXCODE_ZYGOTE_TMPFS_MB"])
    jail_child(int(uid) if uid else None, job_dir, keep, tmpfs_mb, private)


def sandbox_level() -> str:
    """What the zygote's children run under (for every result)."""
    if os.environ.get("MAXCODE_ZYGOTE_JAILED") != "1":
        return os.environ.get("MAXCODE_ZYGOTE_SANDBOX", "none: not started by the sandbox launcher")
    if os.environ.get(PARTIAL_WHY):
        return f"partial: {os.environ[PARTIAL_WHY]}"
    if not os.environ.get("MAXCODE_ZYGOTE_UID"):
        return (
            "partial: candidates run as root inside their namespaces (the GPU device nodes "
            "are not open to other users, so no dedicated uid)"
        )
    return "full"


# Set by the zygote when the GPU is unreachable under the full per-candidate jail (see
# ``_settle_gpu_jail``): why the jail is weaker, and whether children skip ``jail_child``.
PARTIAL_WHY = "MAXCODE_ZYGOTE_PARTIAL_WHY"
NO_CHILD_JAIL = "MAXCODE_ZYGOTE_NO_CHILD_JAIL"


def _gpu_reachable_in_child(with_uid: bool, child_jail: bool) -> str:
    """Whether a forked child, jailed as given, can use the GPU: "" if so, else what failed
    (the loader's own message for libcuda, which says *why* CUDA then reports no driver)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        why = ""
        try:
            if child_jail:
                if not with_uid:
                    os.environ.pop("MAXCODE_ZYGOTE_UID", None)
                job = Path(tempfile.mkdtemp(prefix="gpu-probe-", dir=os.environ.get("TMPDIR")))
                _jail_this_child(job)
            import ctypes

            try:
                ctypes.CDLL("libcuda.so.1")
            except OSError as err:
                why = f"libcuda.so.1: {err}; "
            import torch

            torch.zeros(1, device="cuda").add_(1).item()
            why = ""
        except BaseException as err:
            why += f"{type(err).__name__}: {str(err).strip()[:200]}"
        os.write(write, why.encode()[:4000])
        os._exit(0)
    os.close(write)
    chunks = []
    while chunk := os.read(read, 4096):
        chunks.append(chunk)
    os.close(read)
    os.waitpid(pid, 0)
    return b"".join(chunks).decode(errors="replace")


def _settle_gpu_jail() -> dict[str, str]:
    """Before any candidate: the strongest per-candidate jail under which the GPU still works.

    The full jail (own mount namespace, dedicated uid, no new privileges) can hide what a
    driver needs on some hosts (CUDA then says "Found no NVIDIA driver"). Rather than fail
    every candidate, the zygote steps down once, records why in the sandbox level of every
    result, and says so in its log: children keep the jail but run as root; then children
    run in the zygote's namespaces only; if even that fails, the parent restarts the zygote
    unconfined (``gpu_unreachable``).
    """
    tried: dict[str, str] = {}
    if os.environ.get("MAXCODE_ZYGOTE_UID"):
        tried["dedicated uid"] = _gpu_reachable_in_child(with_uid=True, child_jail=True)
        if not tried["dedicated uid"]:
            return {}
    tried["root in the child's namespaces"] = _gpu_reachable_in_child(False, child_jail=True)
    if not tried["root in the child's namespaces"]:
        os.environ.pop("MAXCODE_ZYGOTE_UID", None)
        os.environ[PARTIAL_WHY] = (
            "candidates run as root inside their namespaces: the GPU was unreachable as a "
            f"dedicated uid ({tried.get('dedicated uid', '')})"
        )
        return {}
    tried["the zygote's namespaces only"] = _gpu_reachable_in_child(False, child_jail=False)
    if not tried["the zygote's namespaces only"]:
        os.environ.pop("MAXCODE_ZYGOTE_UID", None)
        os.environ[NO_CHILD_JAIL] = "1"
        os.environ[PARTIAL_WHY] = (
            "no per-candidate mount namespace or uid (read-only root, private /tmp, no network "
            "and pid namespace of the zygote only): the GPU was unreachable under them ("
            + "; ".join(f"{k}: {v}" for k, v in tried.items() if v)
            + ")"
        )
        return {}
    return tried


class Watchdog:
    """A per-call deadline the candidate's process arms and the parent's poll loop enforces.

    The child cannot be trusted to stop itself: a kernel that never ends blocks it in a CUDA
    call, a Python spin never returns. So the child writes a deadline into memory shared
    with the parent (an anonymous shared mapping made before the fork) before each call it
    supervises and clears it after; the parent kills the process group once the deadline
    passes, within one poll of it.
    """

    _LAYOUT = struct.Struct("dd96s")  # deadline (time.monotonic), seconds allowed, what runs

    def __init__(self) -> None:
        self._shared = mmap.mmap(-1, self._LAYOUT.size)  # MAP_SHARED | MAP_ANONYMOUS

    def arm(self, seconds: float, what: str) -> None:
        self._LAYOUT.pack_into(
            self._shared, 0, time.monotonic() + seconds, seconds, what.encode()[:96]
        )

    def disarm(self) -> None:
        self._LAYOUT.pack_into(self._shared, 0, 0.0, 0.0, b"")

    def extend(self, seconds: float) -> None:
        """Move an armed deadline by ``seconds`` (the call stood still that long)."""
        deadline, allowed, what = self._LAYOUT.unpack_from(self._shared, 0)
        if deadline:
            self._LAYOUT.pack_into(self._shared, 0, deadline + seconds, allowed, what)

    def close(self) -> None:
        self._shared.close()

    def expired(self) -> tuple[float, str] | None:
        """(seconds allowed, what ran) once an armed deadline has passed, else None."""
        deadline, seconds, what = self._LAYOUT.unpack_from(self._shared, 0)
        if deadline and time.monotonic() > deadline:
            return seconds, what.rstrip(b"\0").decode(errors="replace")
        return None


_child_watchdog: Watchdog | None = None


def child_watchdog() -> Watchdog | None:
    """The watchdog of the evaluation this process runs, if a supervisor started it."""
    return _child_watchdog


def _watchdog_verdict(watchdog: Watchdog) -> dict[str, Any] | None:
    expired = watchdog.expired()
    if expired is None:
        return None
    seconds, what = expired
    return {
        "status": "timeout",
        "reason": f"{what or 'a supervised call'} ran longer than its watchdog limit of {seconds:.1f} s and was killed",
        "figures": {"watchdog_s": round(seconds, 3)},
    }


def _rss_kb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _tail(path: Path) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return text[-LOG_TAIL_CHARS:]


def serve() -> None:
    """Zygote main loop: warm imports once, then one forked child per job line."""
    global _protocol_fd
    out = os.fdopen(os.dup(1), "w")
    _protocol_fd = out.fileno()
    os.dup2(2, 1)  # stray prints in the zygote go to stderr, never into the protocol
    if os.environ.get("MAXCODE_ZYGOTE_JAILED") == "1" and not gpu_nodes_open_to_all():
        os.environ.pop("MAXCODE_ZYGOTE_UID", None)
    for name in _names("MAXCODE_ZYGOTE_PRELOAD"):
        importlib.import_module(name)
    if _cuda_initialized():
        raise RuntimeError(
            "CUDA was initialized in the zygote; forked children would inherit a broken context"
        )
    hello: dict[str, Any] = {"ready": True, "pid": os.getpid()}
    if os.environ.get("MAXCODE_ZYGOTE_JAILED") == "1" and os.environ.get("CUDA_VISIBLE_DEVICES"):
        unreachable = _settle_gpu_jail()
        if unreachable:
            hello["gpu_unreachable"] = "; ".join(f"{k}: {v}" for k, v in unreachable.items())
    hello["sandbox"] = sandbox_level()
    optional = _names("MAXCODE_ZYGOTE_PRELOAD_OPTIONAL")
    for name in optional:
        try:
            importlib.import_module(name)
        except ImportError as err:  # not in this torch build: its children import nothing either
            print(f"zygote: optional preload {name} not importable: {err}", file=sys.stderr)
    probe = os.environ.get("MAXCODE_ZYGOTE_PROBE", "")
    if optional and _cuda_initialized():
        hello["probe_error"] = f"the optional preload {optional} initialized CUDA in the zygote"
    elif optional and probe:
        hello["probe_error"] = _probe(probe, float(os.environ["MAXCODE_ZYGOTE_PROBE_TIMEOUT_S"]))
    out.write(json.dumps(hello) + "\n")
    out.flush()
    _serve_jobs(out)


HEARTBEAT_S = 5.0  # the zygote says it is alive this often while it runs children
SILENCE_S = 60.0  # a zygote silent this long while it has jobs is taken for hung


def _serve_jobs(out: Any) -> None:
    """Job lines in, forked children side by side, one reply line each (tagged with the
    job's ``id``) as they finish; a heartbeat line while children run. Lines without a job
    ask the input store to make a task's inputs ahead (``prepare``) or to let them go
    (``release``); a line ``inputs_pending`` tells the evaluator whose are being made (it
    keeps their candidates in its queue meanwhile), and a job whose task's inputs are being
    made when it comes all the same starts once they are ready."""
    from maxcode.evaluate.cuda.trial_inputs import InputStore  # torch: the zygote has it

    store = InputStore("maxcode.evaluate.cuda.worker:trial_input_maker", _jail_this_child)
    lock_path = os.environ.get("MAXCODE_GPU_LOCK", "")
    supervisor = Supervisor(store, HostGpuLock(Path(lock_path)) if lock_path else None)
    waiting: list[tuple[dict[str, Any], float]] = []  # jobs whose inputs are being made
    pending = b""
    last_said = time.monotonic()
    while True:
        makers = store.fds()
        fds = [*supervisor.request_fds(), *makers, 0]
        ready, _, _ = select.select(fds, [], [], POLL_S)
        if 0 in ready:
            chunk = os.read(0, 1 << 16)
            if not chunk:  # the parent went away: nothing is left to report to
                supervisor.kill_all()
                for key in list(store.sets):
                    store.release(key)
                return
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                if line.strip():
                    _take_line(json.loads(line), store, waiting)
        store.step(fd for fd in ready if fd in makers)
        now, still = time.monotonic(), []
        for job, since in waiting:
            if store.pending(job.get("inputs_key")):
                still.append((job, since))
            else:
                store.launching(job.get("inputs_key"))
                supervisor.launch(job, inputs_wait_s=now - since)
        waiting[:] = still
        replies = supervisor.step(fd for fd in ready if fd != 0)
        for job, reply in replies:
            out.write(json.dumps({**reply, "id": job.get("id")}) + "\n")
        if changed := store.changes():  # the evaluator holds their candidates in its queue
            out.write(json.dumps({"inputs_pending": changed}) + "\n")
            replies.append(({}, {}))
        busy = supervisor.children or waiting
        if busy and time.monotonic() - last_said > HEARTBEAT_S:
            out.write(json.dumps({"heartbeat": True}) + "\n")
            replies.append(({}, {}))
        if replies:
            out.flush()
            last_said = time.monotonic()


def _take_line(
    line: dict[str, Any],
    store: InputStore,
    waiting: list[tuple[dict[str, Any], float]],
) -> None:
    if "prepare" in line:
        ask = line["prepare"]
        store.prepare(
            str(ask["key"]),
            str(ask["job_dir"]),
            int(ask["seed"]),
            int(ask["trials"]),
            float(ask["timeout_s"]),
            int(ask["min_bytes"]),
        )
    elif "release" in line:
        store.release(str(line["release"]))
    else:
        waiting.append((line, time.monotonic()))


def _names(variable: str) -> list[str]:
    return [name for name in os.environ.get(variable, "").split(",") if name]


def _cuda_initialized() -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and torch.cuda.is_initialized()


def _probe(entry: str, timeout_s: float) -> str | None:
    """Run ``module:function`` in a forked child; None if it returned, else why it did not."""
    pid = os.fork()
    if pid == 0:
        os.setsid()  # its own group, so a hung probe is killed with everything it started
        code = 0
        try:
            module_name, fn_name = entry.split(":")
            getattr(importlib.import_module(module_name), fn_name)()
        except BaseException:
            traceback.print_exc()
            code = 3
        finally:
            os._exit(code)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            code = os.waitstatus_to_exitcode(status)
            return None if code == 0 else f"probe {entry} failed in a forked child (exit {code})"
        time.sleep(POLL_S)
    _kill_group(pid)
    os.waitpid(pid, 0)
    return f"probe {entry} did not finish in {timeout_s:.0f} s"


# Directories the launcher replaces with empty ones (see sandbox_helper.cpp).
JAIL_COVERED_ROOTS = (Path("/run"), Path("/tmp"), Path("/var/tmp"), Path("/dev/shm"))


def driver_dirs_the_jail_covers() -> list[Path]:
    """Where this host's CUDA driver library lives, when that is under a directory the jail
    covers (some hosts mount the driver under ``/run``): kept visible, read-only."""
    found: list[Path] = []
    try:
        listing = subprocess.run(
            ["ldconfig", "-p"], capture_output=True, text=True, timeout=30, check=False
        ).stdout
    except (OSError, subprocess.SubprocessError):
        listing = ""
    paths = [line.split("=>")[-1].strip() for line in listing.splitlines() if "libcuda.so" in line]
    paths += [d for d in os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep) if d]
    for raw in paths:
        for path in {Path(raw), Path(raw).resolve()}:
            folder = path if path.is_dir() else path.parent
            covered = any(folder.is_relative_to(r) for r in JAIL_COVERED_ROOTS)
            if covered and folder.is_dir() and folder not in found:
                found.append(folder)
    return found


class WorkerDied(RuntimeError):
    pass


@dataclass
class _Pending:
    """A job sent to the zygote, waiting for its reply."""

    id: int
    done: threading.Event = field(default_factory=threading.Event)
    reply: dict[str, Any] | None = None


class GpuWorker:
    """Parent-side handle of one zygote pinned to one GPU; restarts it when it dies."""

    def __init__(
        self,
        gpu: int | None,
        preload: tuple[str, ...] = ("torch",),
        extra_env: dict[str, str] | None = None,
        log_path: Path | None = None,
        optional_preload: tuple[str, ...] = (),
        probe: str = "",
        probe_timeout_s: float = 120.0,
        jail: Confinement | None = None,
        job_root: Path | None = None,
        keep: tuple[Path, ...] = (),
    ):
        """``optional_preload`` is kept only if ``probe`` (``module:function``) then succeeds in a fork.

        With ``jail`` the zygote runs confined, ``job_root`` (where job directories are made)
        its only writable directory and ``keep`` (e.g. the build cache) visible read-only;
        without it the zygote still gets only the allowlisted environment."""
        self.gpu = gpu
        self.preload = preload
        self.optional_preload = optional_preload
        self.probe = probe
        self.probe_timeout_s = probe_timeout_s
        self.probe_error: str | None = None
        self.extra_env = extra_env or {}
        self.log_path = log_path
        self.proc: subprocess.Popen | None = None
        self.restarts = 0
        self._buffer = b""
        self.jail = jail
        self.job_root = job_root
        self.keep = keep
        self.sandbox = jail.level if jail else "none: no sandbox requested"
        self._uid: contextlib.ExitStack | None = None
        self._uid_value = 0
        self._lock = threading.Lock()  # starts, restarts and job lines, one thread at a time
        self._replies: dict[int, _Pending] = {}
        self._next_id = 0
        self._reader: threading.Thread | None = None
        # each is told which tasks' inputs the store is making ({key: pending}); None: it is gone
        self.inputs_listeners: list[Callable[[dict[str, bool] | None], None]] = []

    def start(self) -> None:
        env = allowed_env(self.extra_env)
        env.update(
            MAXCODE_ZYGOTE_PRELOAD=",".join(self.preload),
            MAXCODE_ZYGOTE_PRELOAD_OPTIONAL=",".join(self.optional_preload),
            MAXCODE_ZYGOTE_PROBE=self.probe,
            MAXCODE_ZYGOTE_PROBE_TIMEOUT_S=str(self.probe_timeout_s),
            PYTHONUNBUFFERED="1",
            MAXCODE_ZYGOTE_SANDBOX=self.sandbox,
        )
        if self.gpu is not None:
            env["CUDA_VISIBLE_DEVICES"] = str(self.gpu)
        argv = [sys.executable, "-c", "from maxcode.evaluate.cuda.supervisor import serve; serve()"]
        if self.jail is not None and self.jail.helper is not None:
            if self._uid is None:  # one uid for this worker's children, held while it lives
                self._uid = contextlib.ExitStack()
                self._uid_value = self._uid.enter_context(uid_slot())
            writable = (self.job_root,) if self.job_root else ()
            missing_node = ensure_uvm_node() if self.gpu is not None else ""
            if missing_node and self.log_path:
                with open(self.log_path, "a") as log:
                    log.write(f"zygote: candidates may find no GPU: {missing_node}\n")
            for name in PRIVATE_CACHE_VARS:  # must exist: the zygote's root is read-only
                if env.get(name):
                    Path(env[name]).mkdir(parents=True, exist_ok=True)
            env.update(
                MAXCODE_ZYGOTE_JAILED="1",
                MAXCODE_ZYGOTE_UID=str(self._uid_value),
                MAXCODE_ZYGOTE_KEEP=os.pathsep.join(carried_paths((*writable, *self.keep))),
                MAXCODE_ZYGOTE_TMPFS_MB=str(JAIL_TMPFS_MB),
            )
            argv = self.jail.wrap(argv, writable, (*self.keep, *driver_dirs_the_jail_covers()))
        stderr = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL  # noqa: SIM115 - owned by the process
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            env=env,
            start_new_session=True,
        )
        self._buffer = b""
        line = self._read_line(timeout_s=600)
        hello = json.loads(line) if line else {}
        self.sandbox = hello.get("sandbox", self.sandbox)
        if hello.get("gpu_unreachable"):
            self.stop()
            self.jail = None
            self.sandbox = (
                f"none: the GPU is unreachable inside the sandbox ({hello['gpu_unreachable']})"
            )
            say_once(f"candidate code runs WITHOUT a sandbox: {self.sandbox[6:]}")
            self.start()
            return
        if self.jail is not None and self.sandbox != "full":
            say_once(f"GPU worker {self.gpu}: sandbox {self.sandbox}")
        if not hello.get("ready") and self.jail is not None and self.jail.helper is not None:
            self.stop()
            self.jail = None
            self.sandbox = "none: the sandboxed GPU worker did not start (see its log)"
            say_once(f"candidate code runs WITHOUT a sandbox: {self.sandbox[6:]} {self.log_path}")
            self.start()
            return
        if not hello.get("ready"):
            self.stop()
            raise WorkerDied(
                f"GPU worker for device {self.gpu} did not start (see {self.log_path or 'its stderr'})"
            )
        if hello.get("probe_error"):
            self.probe_error = hello["probe_error"]
            self.stop()
            if stderr is not subprocess.DEVNULL:
                stderr.write(
                    f"zygote: {self.probe_error}; restarting without the optional preload {self.optional_preload}\n".encode()
                )
                stderr.flush()
            self.optional_preload = ()
            self.start()
            return
        self._reader = threading.Thread(
            target=self._read_replies, args=(self.proc, SILENCE_S), daemon=True
        )
        self._reader.start()

    def run(self, job: dict[str, Any]) -> dict[str, Any]:
        """Run one job and wait for its reply; several threads may call this at once (the zygote
        runs their jobs side by side). A dead or silent zygote is restarted and the jobs it had
        are reported as runtime errors."""
        with self._lock:
            if self.proc is None:
                self.start()
            elif self.proc.poll() is not None:
                self._restart()
            assert self.proc is not None and self.proc.stdin is not None
            self._next_id += 1
            pending = _Pending(self._next_id)
            self._replies[pending.id] = pending
            try:
                self.proc.stdin.write((json.dumps({**job, "id": pending.id}) + "\n").encode())
                self.proc.stdin.flush()
            except BrokenPipeError:
                self._replies.pop(pending.id, None)
                self._restart()
                return {
                    "status": "runtime_error",
                    "reason": "GPU worker died before the job started; restarted",
                }
        pending.done.wait()
        assert pending.reply is not None
        return pending.reply

    def tell(self, message: dict[str, Any]) -> bool:
        """Send the zygote a line it answers nothing to (inputs to make ahead, or to let go);
        whether it was sent. A zygote that is down misses it: its candidates then make their
        own inputs."""
        with self._lock:
            if self.proc is None or self.proc.poll() is not None or self.proc.stdin is None:
                return False
            try:
                self.proc.stdin.write((json.dumps(message) + "\n").encode())
                self.proc.stdin.flush()
            except BrokenPipeError:
                return False
            return True

    def _read_replies(self, proc: subprocess.Popen, silence_s: float) -> None:
        """Hand each reply line to the thread that waits for it; when the zygote dies or says
        nothing for ``silence_s`` (it sends a heartbeat while it runs jobs), fail its jobs."""
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        buffer = self._buffer
        last = time.monotonic()
        why = "GPU worker died while running this job; restarted"
        while True:
            ready, _, _ = select.select([fd], [], [], 1.0)
            if not ready:
                if self._replies and time.monotonic() - last > silence_s:
                    why = "GPU worker stopped answering and was restarted"
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.killpg(proc.pid, signal.SIGKILL)
                    break
                if not self._replies:
                    last = time.monotonic()
                continue
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break
            last = time.monotonic()
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                reply = json.loads(line) if line.strip() else {}
                if "inputs_pending" in reply:
                    for told in list(self.inputs_listeners):  # a batch that ends leaves
                        told(reply["inputs_pending"])
                pending = self._replies.pop(reply.pop("id", None), None) if "id" in reply else None
                if pending is not None:
                    pending.reply = reply
                    pending.done.set()
        for told in list(self.inputs_listeners):  # its store went with it
            told(None)
        for pending in list(self._replies.values()):
            pending.reply = {"status": "runtime_error", "reason": why}
            pending.done.set()
        self._replies.clear()

    def _restart(self) -> None:
        self.stop()
        self.restarts += 1
        self.start()

    def _read_line(self, timeout_s: float) -> str | None:
        assert self.proc is not None and self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout_s
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([fd], [], [], min(left, 1.0))
            if ready:
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    return None
                self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line.decode()

    def stop(self) -> None:
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        if self._reader is not None and self._reader is not threading.current_thread():
            self._reader.join()
        self._reader = None
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream:
                stream.close()
        self.proc = None

    def close(self) -> None:
        """Stop the zygote and give its uid back."""
        self.stop()
        if self._uid is not None:
            self._uid.close()
            self._uid = None
