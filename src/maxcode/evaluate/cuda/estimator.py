"""The tasks' GPU memory estimates, from shapes, made in one long-lived sandboxed process.

An estimate runs the task's reference on torch's ``meta`` device. Made in the task's first
compile job, it cost that job a torch import and the first ``meta`` run's lazy imports
(5.2 s median with 16 builds in flight on the H100, 2026-11-28), and it kept a compile job
running for a candidate whose source shows every build it can ask for. Here torch is
imported and warmed once; each reference then runs in a fresh fork (milliseconds), so one
cannot change another's estimate, and one that hangs is stopped by its alarm. Candidate code
never runs in this process.

Run as ``python -m maxcode.evaluate.cuda.estimator`` (:class:`Estimator` starts it, confined).
Protocol: ``{"id": n, "reference_source": s}`` lines on stdin; ``{"id": n, "estimate":
[candidate MB, reference MB] | null}`` lines on stdout, in the order the forks finish.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from maxcode.evaluate.cuda.loader import load_module
from maxcode.evaluate.sandbox import Confinement, uid_slot

# Seconds one reference may take on ``meta``: its fork is stopped after this, and the
# evaluator gives up on an answer a little later (an estimate only sizes the GPU's sharing).
REFERENCE_TIMEOUT_S = 30
# Seconds the process may sit with nothing pending before it is stopped.
IDLE_STOP_S = 5.0
# What an evaluation process holds besides the task's tensors: a CUDA context, torch's and
# cuBLAS's kernels and workspaces, the L2 flush buffer.
PROCESS_OVERHEAD_MB = 1500.0


def gpu_memory_estimates_mb(reference_path: Path) -> tuple[float | None, float | None]:
    """GPU memory a candidate's evaluation of this task, and the task's reference process,
    are expected to need, from shapes alone: ``(candidate, reference)`` in MB.

    The reference is built and run on torch's ``meta`` device (no data, no GPU): an
    evaluation holds the reference's and the candidate's weights, three input sets (a
    correctness trial's, the timing set and its swap partner) and two outputs (the
    reference's and the candidate's), plus the process's own overhead. On the H100 the peaks
    of real level-1 candidates were 3.8x their input for an elementwise problem (input and
    output of one size; this gives 5x) and 2.9x for a reduction (3x). Four outputs, as
    before, made an elementwise problem's estimate 7x its input (46 GB for a 6.4 GB input):
    the admission then held small jobs back behind it (2026-11-27). The reference process
    (``worker.run_reference``) holds the weights once, one input set and two outputs (the
    eager and the compiled call's): 19.9 GB for a 6 GB elementwise task, which was counted at
    its candidate's peak instead (at least 28 GB from a 25.3 GB peak) until 2026-11-27.
    ``(None, None)`` when the reference does not run on ``meta`` (the evaluator then assumes
    an even share of the GPU, and a job that runs out beside others is run again alone).
    """
    import torch

    from maxcode.evaluate.cuda.trial_inputs import tensor_bytes

    try:
        reference = load_module(reference_path, "maxcode_reference_shapes")
        with torch.device("meta"):
            model = reference.Model(*reference.get_init_inputs())
            inputs = reference.get_inputs()
            outputs = model(*inputs)
    except Exception:
        return None, None
    weights = sum(t.numel() * t.element_size() for t in (*model.parameters(), *model.buffers()))
    inputs_b, outputs_b = tensor_bytes(inputs), tensor_bytes(outputs)
    candidate = 2 * weights + 3 * inputs_b + 2 * outputs_b
    alone = weights + inputs_b + 2 * outputs_b
    return (
        round(candidate / 2**20 + PROCESS_OVERHEAD_MB, 1),
        round(alone / 2**20 + PROCESS_OVERHEAD_MB, 1),
    )


def _warm_up() -> None:
    """The first ``meta`` run imports torch's meta kernels and decompositions (seconds); done
    here once, not in every fork."""
    import torch

    with torch.device("meta"):
        x = torch.nn.Conv2d(3, 8, 3)(torch.randn(2, 3, 16, 16))
        torch.nn.functional.relu(torch.nn.Linear(14, 4)(x)).softmax(-1).sum()


def _estimate_in_a_fork(request: Mapping[str, Any], out_fd: int, timeout_s: int) -> None:
    """The child's whole life: one reference, one reply line (one ``write``, so replies of
    concurrent forks never interleave), then ``_exit``."""
    reply: dict[str, Any] = {"id": request.get("id"), "estimate": None}
    try:
        signal.signal(signal.SIGALRM, _out_of_time)
        signal.alarm(timeout_s)
        fd, path = tempfile.mkstemp(suffix=".py")
        with os.fdopen(fd, "w") as f:
            f.write(str(request["reference_source"]))
        estimate = gpu_memory_estimates_mb(Path(path))
        if None not in estimate:
            reply["estimate"] = list(estimate)
    except BaseException:
        pass
    finally:
        with contextlib.suppress(OSError):
            os.write(out_fd, (json.dumps(reply) + "\n").encode())
        os._exit(0)


def _out_of_time(signum: int, frame: object) -> None:
    raise TimeoutError("the reference took too long on meta")


def main() -> None:
    timeout_s = int(sys.argv[1])
    out_fd = os.dup(1)
    os.dup2(2, 1)  # a reference's prints must not corrupt the replies
    _warm_up()
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernel reaps the forks
    for line in sys.stdin:
        try:
            request = json.loads(line)
        except ValueError:
            continue
        if os.fork() == 0:
            _estimate_in_a_fork(request, out_fd, timeout_s)


class Estimator:
    """The evaluator's side: starts the process on the first request, confined like a compile
    job (no GPU, no network, nothing writable but a private ``/tmp``), and hands each answer
    to the request's callback; a request not answered within ``reference_timeout_s`` and a
    margin for the process's start, or pending when the process dies, is answered ``None``
    (the process is started again for the next request)."""

    def __init__(
        self,
        jail: Confinement,
        env: Mapping[str, str],
        log_path: Path,
        preexec_fn: Callable[[], None] | None = None,
        reference_timeout_s: int = REFERENCE_TIMEOUT_S,
    ) -> None:
        self._jail, self._env, self._log_path = jail, dict(env), log_path
        self._preexec_fn = preexec_fn
        self._timeout_s = reference_timeout_s
        self._lock = threading.Lock()
        self._proc: subprocess.Popen | None = None
        self._uid: contextlib.ExitStack | None = None
        # The running process's requests and its input queue (``_start`` makes both).
        self._pending: dict[int, tuple[float, Callable[[Any], None]]] = {}
        self._lines: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        self._next_id = 0

    def ask(self, reference_source: str, answer: Callable[[Any], None]) -> None:
        with self._lock:
            if self._proc is None or self._proc.poll() is not None:
                self._start()
            self._next_id += 1
            deadline = time.monotonic() + self._timeout_s + 60  # its start is in there
            self._pending[self._next_id] = (deadline, answer)
            line = json.dumps({"id": self._next_id, "reference_source": reference_source})
            self._lines.put((line + "\n").encode())  # never blocks the evaluator's thread

    def _start(self) -> None:
        self._stop_locked()
        self._uid = contextlib.ExitStack()
        uid = self._uid.enter_context(uid_slot())
        self._log_path.parent.mkdir(parents=True, exist_ok=True)
        argv = [sys.executable, "-m", "maxcode.evaluate.cuda.estimator", str(self._timeout_s)]
        with open(self._log_path, "a") as log:
            proc = subprocess.Popen(
                self._jail.wrap(argv, uid=uid),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                env=self._env,
                preexec_fn=self._preexec_fn,
                start_new_session=True,
            )
        self._proc, self._pending, self._lines = proc, {}, queue.SimpleQueue()
        threading.Thread(
            target=self._read, args=(proc, self._pending), name="maxcode-estimator", daemon=True
        ).start()
        threading.Thread(
            target=_write, args=(proc, self._lines), name="maxcode-estimator-in", daemon=True
        ).start()

    def _read(
        self, proc: subprocess.Popen, pending: dict[int, tuple[float, Callable[[Any], None]]]
    ) -> None:
        """Answers ``pending`` (``proc``'s requests) as replies come, late ones ``None``, and
        stops the process once nothing has been pending for ``IDLE_STOP_S`` (the next request
        starts another): an idle sandboxed process does not outlive its work."""
        assert proc.stdout is not None
        fd = proc.stdout.fileno()  # read raw: a buffered reader could hold a line select misses
        partial = b""
        idle_since: float | None = None
        while True:
            ready, _, _ = select.select([fd], [], [], 1.0)
            chunk = os.read(fd, 1 << 16) if ready else None
            if chunk == b"":  # the process ended
                break
            *lines, partial = (partial + (chunk or b"")).split(b"\n")
            answers = []
            with self._lock:
                for line in lines:
                    with contextlib.suppress(ValueError, TypeError, AttributeError, KeyError):
                        reply = json.loads(line)
                        answers.append((pending.pop(reply["id"])[1], reply["estimate"]))
                now = time.monotonic()
                late = [i for i, (deadline, _) in pending.items() if deadline < now]
                answers += [(pending.pop(i)[1], None) for i in late]
                if pending:
                    idle_since = None
                elif idle_since is None:
                    idle_since = now
                elif now - idle_since >= IDLE_STOP_S and self._proc is proc:
                    self._stop_locked()  # under the lock: an ask now starts a new one
            for answer, value in answers:
                answer(value)
        proc.wait()
        proc.stdout.close()
        with self._lock:
            left = [answer for _, answer in pending.values()]
            pending.clear()
        for answer in left:
            answer(None)

    def close(self) -> None:
        with self._lock:
            self._stop_locked()

    def _stop_locked(self) -> None:
        if self._proc is not None:
            self._lines.put(None)  # the writer closes the process's stdin
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._proc.pid, signal.SIGKILL)
            self._proc.wait()
            self._proc = None
        if self._uid is not None:
            self._uid.close()
            self._uid = None


def _write(proc: subprocess.Popen, lines: queue.SimpleQueue[bytes | None]) -> None:
    """Feeds the process its requests: a process that does not read (slow to start, or hung)
    blocks this thread, never the evaluator's; its requests are answered at their deadline."""
    assert proc.stdin is not None
    with contextlib.suppress(OSError):
        for line in iter(lines.get, None):
            proc.stdin.write(line)
            proc.stdin.flush()
    with contextlib.suppress(OSError):
        proc.stdin.close()


if __name__ == "__main__":
    main()
