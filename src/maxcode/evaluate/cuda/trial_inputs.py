"""KernelBench's correctness inputs, bit for bit, for several trials at once.

KernelBench makes each trial's inputs with ``set_seed(trial_seed); get_inputs()`` on torch's
CPU generator, which is serial: the five trials of a level-1 problem with 2^31-element inputs
took 50-98 s in one candidate's process on the H100 host, most of its evaluation. The trials
are independent (each starts from its own seed), so each is made in a process forked for it,
several at once, and handed back through memory files (``memfd``): the same values, made in
parallel. How many are made ahead is bounded by the host memory they take.

A GPU worker's zygote also makes them ahead of the candidate (:class:`InputStore`): once per
task, while its candidates compile and wait for the GPU, held as sealed memory files and
handed to each candidate's process of the task at fork, so no candidate waits on the CPU
generator while it holds a GPU slot.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import importlib
import io
import mmap
import os
import pickle
import select
import signal
import socket
import struct
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

PARALLEL_MIN_BYTES = 256 << 20
"""Inputs smaller than this are made in the process itself: the CPU generator makes them in
well under a second, less than a fork and the hand-over cost."""
HOST_MEMORY_SHARE = 0.25
"""Of the host's available memory, the most one candidate's trials made ahead may hold (the
GPU worker runs up to four candidates' processes, and compile jobs run beside them). A third,
with six processes, was no faster on the H100 (docs/cuda-evaluator.md, run I)."""
HELPER_TIMEOUT_S = 600.0  # a helper that makes no inputs in this long is killed (then serial)
_PR_SET_PDEATHSIG = 1


@dataclass
class Sealed:
    """One trial's inputs as the maker sent them: memory files sealed against writes (no later
    process, the candidate's included, can change them) and the pickle that rebuilds the
    tensors over them."""

    sizes: list[int]
    body: bytes
    fds: list[int] = field(default_factory=list)

    @property
    def nbytes(self) -> int:
        return sum(self.sizes)

    def load(self) -> list[Any]:
        """The trial's tensors over copy-on-write mappings of the files (a write changes only
        this process's copy)."""
        storages = [_map(fd, size) for fd, size in zip(self.fds, self.sizes, strict=True)]
        return _TensorUnpickler(io.BytesIO(self.body), storages).load()

    def close(self) -> None:
        for fd in self.fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.fds = []


@dataclass
class Made:
    """One trial's inputs: the values, or why the helper could not make them."""

    inputs: list[Any] | None
    error: str = ""


def input_bytes(get_inputs: Callable[[], Sequence[Any]]) -> int | None:
    """Bytes of one call's tensors, from shapes on torch's ``meta`` device (no data made);
    None when ``get_inputs`` does not run there."""
    try:
        with torch.device("meta"):
            return tensor_bytes(get_inputs())
    except Exception:
        return None


def tensor_bytes(value: Any) -> int:
    """Bytes of the tensors in ``value`` (a tensor, or lists and tuples of them)."""
    if isinstance(value, torch.Tensor):
        return value.numel() * value.element_size()
    if isinstance(value, list | tuple):
        return sum(tensor_bytes(v) for v in value)
    return 0


def trials_ahead(bytes_per_trial: int | None, trials: int, available: int | None) -> int:
    """How many trials' inputs to make at once: all of them when they fit in this process's
    share of the host's available memory (counting a quarter more: a helper holds its trial
    twice while it copies it out), else fewer; one (made in-process) for small inputs."""
    if trials <= 1 or (bytes_per_trial is not None and bytes_per_trial < PARALLEL_MIN_BYTES):
        return 1
    if bytes_per_trial is None or available is None:
        return 2
    fits = int(available * HOST_MEMORY_SHARE // max(1, bytes_per_trial * 5 // 4))
    return max(1, min(trials, fits))


def available_host_bytes() -> int | None:
    """MemAvailable of /proc/meminfo (the kernel's estimate, not namespaced)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


class TrialHelpers:
    """One forked process per trial, each waiting to make that trial's inputs.

    They are forked before the candidate's module is imported and before CUDA starts, so they
    never hold candidate code or a CUDA context; each is its own process group, so it keeps
    working while a neighbour's timing stops the candidate's process (supervisor.Gate), and
    dies with that process (``PR_SET_PDEATHSIG``).
    """

    def __init__(self, make: Callable[[int], list[Any]], seeds: Sequence[int]):
        self._helpers = [_Helper.fork(make, seed) for seed in seeds]
        self._released = 0

    def go(self, upto: int) -> None:
        """Let the first ``upto`` helpers make their trials (those not told already)."""
        while self._released < min(upto, len(self._helpers)):
            self._helpers[self._released].go()
            self._released += 1

    def made(self, ahead: int) -> Iterator[Made]:
        """Each trial's inputs, in order, ``ahead`` trials made at once. A helper that fails
        leaves ``inputs`` None (the caller makes that trial itself, where any error is the
        candidate's verdict as before)."""
        for i, helper in enumerate(self._helpers):
            self.go(i + max(1, ahead))
            yield helper.collect()

    def close(self) -> None:
        """Kill the helpers not collected yet (a wrong answer ends the trials early)."""
        for helper in self._helpers:
            helper.kill()


class _Helper:
    """One forked process that makes one trial's inputs into memory files when told to."""

    def __init__(self, pid: int, sock: socket.socket):
        self.pid, self.sock = pid, sock
        self.done = False

    @classmethod
    def fork(cls, make: Callable[[int], list[Any]], seed: int) -> _Helper:
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        parent_pid = os.getpid()
        pid = os.fork()
        if pid == 0:  # the helper: wait, make, hand over, exit without running any cleanup
            code = 0
            try:
                _detach(parent_pid, keep=child.fileno())
                if child.recv(1) != GO:
                    os._exit(0)
                torch.set_num_threads(1)  # no OpenMP team in a forked process
                _send(child, make, seed)
            except BaseException as err:  # reported to the parent, not raised
                with contextlib.suppress(Exception):
                    _send_error(child, f"{type(err).__name__}: {err}")
                code = 1
            finally:
                os._exit(code)
        child.close()
        return cls(pid, parent)

    def go(self) -> None:
        with contextlib.suppress(OSError):  # a helper that died is reported by collect
            self.sock.sendall(GO)

    def collect(self) -> Made:
        try:
            return _receive(self.sock, time.monotonic() + HELPER_TIMEOUT_S)
        except Exception as err:  # the trial is then made in-process
            return Made(None, f"input helper failed: {type(err).__name__}: {err}")
        finally:
            self.kill()

    def kill(self) -> None:
        if self.done:
            return
        self.done = True
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.pid, 0)
        self.sock.close()


GO = b"g"


def kernelbench_trial_seeds(seed: int, trials: int) -> list[int]:
    """KernelBench's correctness-trial seeds (``run_and_check_correctness``), bit for bit, drawn
    from a generator of their own (the caller's global one is left as it was)."""
    generator = torch.Generator().manual_seed(seed)
    return [
        int(torch.randint(0, 2**32 - 1, (1,), generator=generator).item()) for _ in range(trials)
    ]


PREMADE_HOST_SHARE = 0.5
"""Of the host's available memory when a GPU worker starts, the most the inputs it makes ahead
may hold."""
SIZING_TIMEOUT_S = 30.0
"""A task whose size is not known this long after it was asked for is left to its candidates
(sets start in the order asked: one not sized holds the next back until then)."""


@dataclass
class Premade:
    """A task's first correctness trials made ahead, as a candidate's process gets them at
    fork (a prefix of its seeds: its own helpers make the rest)."""

    seeds: list[int]
    trials: list[Sealed]


_premade: Premade | None = None


def take_premade() -> Premade | None:
    """In a candidate's process: its task's inputs made ahead by the zygote, once."""
    global _premade
    taken, _premade = _premade, None
    return taken


class _Set:
    """One task's trials, made ahead by one forked maker per trial (see :class:`InputStore`):
    the first one sizes the task, the others are forked once it is known to be large."""

    def __init__(self, key: str, fork: Callable[[int], _Maker], trials: int, deadline: float):
        self.key, self.fork, self.trials_wanted, self.deadline = key, fork, trials, deadline
        self.sizing_deadline = time.monotonic() + SIZING_TIMEOUT_S
        self.makers = [fork(0)]
        self.state = "sizing"  # then "waiting" (for the budget), "making", "ready" or "dropped"
        self.bytes_per_trial: int | None = None
        self.min_bytes = 0  # trials below this are left to the candidates
        self.reserved = 0  # bytes of the store's budget it holds
        self.trials: dict[int, Sealed] = {}
        self.why = ""

    def drop(self, why: str) -> None:
        for maker in self.makers:
            maker.kill()
        for sealed in self.trials.values():
            sealed.close()
        self.trials, self.state, self.why, self.reserved = {}, "dropped", why, 0


class InputStore:
    """In a GPU worker's zygote: each large task's correctness inputs, made once, ahead of its
    candidates, held as sealed memory files and handed to each candidate's process at fork.

    The evaluator asks for a task when a candidate of it joins the GPU queue (``prepare``)
    and lets it go when the task's last candidate is done (``release``). Makers run the task's
    reference only (``set_seed(trial); get_inputs()``), each in a forked, sandboxed process of
    its own, while the candidate waits in the queue, not in a GPU slot. Sets start in the
    order asked, each with as many of its first trials as the budget has room for (the
    candidate's helpers make the rest); a candidate that starts while its set still waits for
    room makes its own, and the set is dropped.
    """

    def __init__(
        self,
        entry: str,
        jail: Callable[[Path], None],
        budget: int | None = None,
    ):
        """``entry`` (``module:function``) gives a maker the trial size and how to make one
        (worker.trial_input_maker); ``jail`` sandboxes a maker."""
        self.entry, self.jail = entry, jail
        if budget is None:
            budget = int((available_host_bytes() or 0) * PREMADE_HOST_SHARE)
        self.budget = budget
        self.sets: dict[str, _Set] = {}
        self.order: list[str] = []  # sets not started yet, in the order asked
        self._told: dict[str, bool] = {}  # what changes() last said of each task

    @property
    def reserved(self) -> int:
        return sum(s.reserved for s in self.sets.values())

    def prepare(
        self,
        key: str,
        job_dir: str,
        seed: int,
        trials: int,
        timeout_s: float,
        min_bytes: int,
    ) -> None:
        """Make ``key``'s trials ahead unless one is below ``min_bytes``. Asked again for each
        candidate that joins the queue, a set is made once: one left to the candidates (small,
        of unknown size, failed) stays so, without forking its makers again; one let go when
        a candidate started without it (:meth:`launching`) is made anew. Each ask is answered
        by :meth:`changes`, also for a task known already (another batch may be asking)."""
        self._told.pop(key, None)
        if key in self.sets or trials < 1:
            return

        def fork(index: int) -> _Maker:
            return _Maker.fork(self.entry, Path(job_dir), seed, trials, index, self.jail)

        self.sets[key] = _Set(key, fork, trials, time.monotonic() + timeout_s)
        self.sets[key].min_bytes = min_bytes
        self.order.append(key)

    def launching(self, key: str | None) -> None:
        """A candidate of ``key`` starts now: a set still waiting for room is of no use to it."""
        found = self.sets.get(key) if key else None
        if found is not None and found.state == "waiting":
            self.release(key)  # type: ignore[arg-type]

    def release(self, key: str) -> None:
        found = self.sets.pop(key, None)
        if found is not None:
            found.drop("released")
        if key in self.order:
            self.order.remove(key)
        self._start_waiting()

    def pending(self, key: str | None) -> bool:
        """Whether a candidate of ``key`` should wait for the set: it is being sized or made."""
        found = self.sets.get(key) if key else None
        return found is not None and found.state in ("sizing", "making")

    def changes(self) -> dict[str, bool]:
        """Each task whose :meth:`pending` changed since the last call (one let go: False),
        for the evaluator, which keeps a candidate in its GPU queue, not in a GPU slot, while
        its task's set is being made."""
        now = {key: self.pending(key) for key in self.sets}
        changed = {key: p for key, p in now.items() if self._told.get(key) != p}
        changed.update({key: False for key in self._told if key not in now and self._told[key]})
        self._told = now
        return changed

    def fds(self) -> list[int]:
        return [m.sock.fileno() for s in self.sets.values() for m in s.makers if not m.done]

    def step(self, readable: Iterable[int]) -> None:
        """Read what the makers sent; drop sets past their deadline; start waiting ones."""
        ready = set(readable)
        now = time.monotonic()
        for found in list(self.sets.values()):
            for maker in found.makers:
                if not maker.done and maker.sock.fileno() in ready:
                    self._read(found, maker)
            if found.state == "sizing" and now > found.sizing_deadline:
                found.drop("it was not sized in time")
            if found.state in ("sizing", "making") and now > found.deadline:
                found.drop("its makers did not finish in time")
        self._start_waiting()

    def enter_child(self, key: str | None) -> None:
        """In a candidate's freshly forked process: keep its task's set if ready (for
        :func:`take_premade`), close every other descriptor of the store (other tasks' files,
        the makers' sockets)."""
        global _premade
        _premade = self._keep_only(key)

    def _keep_only(self, key: str | None) -> Premade | None:
        mine = self.sets.get(key) if key else None
        for found in self.sets.values():
            for maker in found.makers:
                with contextlib.suppress(OSError):
                    maker.sock.close()
            if found is not mine or found.state != "ready":
                for sealed in found.trials.values():
                    for fd in sealed.fds:
                        with contextlib.suppress(OSError):
                            os.close(fd)
        if mine is None or mine.state != "ready":
            return None
        seeds = [maker.seed for maker in mine.makers]
        return Premade(seeds, [mine.trials[i] for i in range(len(seeds))])

    def _read(self, found: _Set, maker: _Maker) -> None:
        if maker.size is None:
            maker.read_size()
            if found.state == "sizing":
                self._sized(found, maker.size)
            return
        index = found.makers.index(maker)
        sealed = maker.collect(found.deadline)
        if isinstance(sealed, str):
            found.drop(sealed)
            return
        found.trials[index] = sealed
        if len(found.trials) == len(found.makers):
            found.state = "ready"
            found.reserved = sum(t.nbytes for t in found.trials.values())

    def _sized(self, found: _Set, size: int) -> None:
        if size < found.min_bytes:  # small (the candidate's helpers make it) or unknown
            found.drop("small" if size >= 0 else "its size is unknown")
            return
        found.bytes_per_trial = size
        if size * 5 // 4 > self.budget:
            found.drop("one trial is larger than the store's budget")
            return
        found.state = "waiting"

    def _start_waiting(self) -> None:
        """Start the waiting sets in the order asked, each with as many of its first trials as
        there is room for (a trial is reserved at 1.25x its size: a maker holds it twice while
        it copies it out); the next waits while the first is being sized or not one trial of
        it fits."""
        while self.order:
            found = self.sets[self.order[0]]
            if found.state == "sizing":
                return
            if found.state != "waiting":  # left to its candidates
                self.order.pop(0)
                continue
            per_trial = (found.bytes_per_trial or 0) * 5 // 4
            room = (self.budget - self.reserved) // max(1, per_trial)
            if room < 1:
                return
            self.order.pop(0)
            wanted = min(room, found.trials_wanted)  # later trials: the candidate's helpers
            found.makers += [found.fork(i) for i in range(len(found.makers), wanted)]
            found.state, found.reserved = "making", per_trial * len(found.makers)
            for maker in found.makers:
                maker.go()


class _Maker(_Helper):
    """A forked, sandboxed process that makes one trial's inputs for the store: it loads the
    task's reference, says how many bytes a trial takes (from shapes on ``meta``) and the
    trial's KernelBench seed, and makes the inputs into sealed memory files when told to.
    (The seeds are drawn here, not in the zygote, which never runs a torch op: an OpenMP team
    there would hang every process forked from it.)"""

    size: int | None = None
    seed: int | None = None

    @classmethod
    def fork(  # type: ignore[override]
        cls,
        entry: str,
        job_dir: Path,
        seed: int,
        trials: int,
        index: int,
        jail: Callable[[Path], None],
    ) -> _Maker:
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        parent_pid = os.getpid()
        pid = os.fork()
        if pid == 0:
            code, sized = 0, False
            try:
                _detach(parent_pid, child.fileno(), jail=lambda: jail(job_dir), quiet=True)
                os.chdir(job_dir)
                torch.set_num_threads(1)
                trial_seed = kernelbench_trial_seeds(seed, trials)[index]
                module_name, fn_name = entry.split(":")
                try:
                    size, make = getattr(importlib.import_module(module_name), fn_name)(job_dir)
                except Exception:
                    size, make = None, None
                child.sendall(struct.pack("!qQ", -1 if size is None else size, trial_seed))
                sized = True
                if make is None or child.recv(1) != GO:
                    os._exit(0)
                _send(child, make, trial_seed)
            except BaseException as err:
                with contextlib.suppress(Exception):
                    if sized:
                        _send_error(child, f"{type(err).__name__}: {err}")
                    else:  # the store then leaves the task to its candidates
                        child.sendall(struct.pack("!qQ", -1, 0))
                code = 1
            finally:
                os._exit(code)
        child.close()
        return cls(pid, parent)

    def read_size(self) -> None:
        try:
            self.size, self.seed = struct.unpack("!qQ", _read(self.sock, 16, time.monotonic() + 5))
        except Exception:
            self.kill()
            self.size = -1

    def collect(self, deadline: float) -> Sealed | str:  # type: ignore[override]
        try:
            return _receive_sealed(self.sock, deadline)
        except Exception as err:
            return f"input maker failed: {type(err).__name__}: {err}"
        finally:
            self.kill()


def _detach(
    parent_pid: int, keep: int, jail: Callable[[], None] = lambda: None, quiet: bool = False
) -> None:
    """In a new helper or maker: a session of its own (stopped, killed and timed apart from
    its parent: a neighbour's timing stops the candidate's group), every descriptor closed but
    ``keep`` and the standard three (the parent's GPU gate pipes, reply channel and other
    tasks' files are not its own), those three on /dev/null if ``quiet``, then ``jail``, then
    death with the parent (in that order: a change of user clears the parent-death signal)."""
    os.setsid()
    os.closerange(3, keep)
    os.closerange(keep + 1, _max_fd())
    if quiet:
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        if null > 2:
            os.close(null)
    jail()
    _die_with_parent()
    if os.getppid() != parent_pid:  # the parent died before the line above
        os._exit(0)


def _max_fd() -> int:
    try:
        return max(int(name) for name in os.listdir("/proc/self/fd")) + 1
    except (OSError, ValueError):
        return 65536


def _die_with_parent() -> None:
    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


class _TensorPickler(pickle.Pickler):
    """Pickles a value with each tensor's storage sent apart, once per storage (views of one
    storage stay views of one storage)."""

    def __init__(self, file: io.BytesIO):
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.storages: list[torch.UntypedStorage] = []
        self._index: dict[int, int] = {}

    def persistent_id(self, obj: Any) -> Any:
        if not isinstance(obj, torch.Tensor):
            return None
        if obj.layout != torch.strided or obj.device.type != "cpu" or obj.is_quantized:
            raise TypeError(f"cannot hand over a {obj.layout} tensor on {obj.device}")
        storage = obj.untyped_storage()
        key = storage.data_ptr()
        if key not in self._index:
            self._index[key] = len(self.storages)
            self.storages.append(storage)
        return (
            self._index[key],
            str(obj.dtype).removeprefix("torch."),
            tuple(obj.shape),
            obj.stride(),
            obj.storage_offset(),
            obj.requires_grad,
        )


class _TensorUnpickler(pickle.Unpickler):
    def __init__(self, file: io.BytesIO, storages: list[torch.Tensor]):
        super().__init__(file)
        self.storages = storages  # each a uint8 tensor over its memory file

    def persistent_load(self, pid: Any) -> torch.Tensor:
        index, dtype_name, shape, stride, offset, requires_grad = pid
        dtype = getattr(torch, dtype_name)
        raw = self.storages[index]
        typed = raw.view(dtype) if raw.numel() else torch.empty(0, dtype=dtype)
        t = torch.as_strided(typed, shape, stride, offset)
        return t.requires_grad_(requires_grad) if requires_grad else t


def _send(sock: socket.socket, make: Callable[[int], list[Any]], seed: int) -> None:
    buf = io.BytesIO()
    pickler = _TensorPickler(buf)
    pickler.dump(make(seed))
    pickler.clear_memo()  # the storages list now holds the only references to the data
    storages, pickler.storages = pickler.storages, []
    fds, sizes = [], []
    while storages:  # each storage's copy here goes as soon as it is in its memory file
        storage = storages.pop(0)
        fds.append(_to_memfd(storage))
        sizes.append(storage.nbytes())
        del storage
    header = pickle.dumps((sizes, buf.getvalue()), protocol=pickle.HIGHEST_PROTOCOL)
    sock.sendall(struct.pack("!Q", len(header)))
    if fds:
        socket.send_fds(sock, [header], fds)
    else:
        sock.sendall(header)
    sock.recv(1)  # the parent has the descriptors: this process may exit


SEALS = fcntl.F_SEAL_WRITE | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_SEAL


def _to_memfd(storage: torch.UntypedStorage) -> int:
    """The storage's bytes in a memory file, sealed: from here on nobody writes to it."""
    fd = os.memfd_create("maxcode-trial-input", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    view = memoryview(torch.empty(0, dtype=torch.uint8).set_(storage).numpy())
    written = 0
    while written < len(view):
        written += os.write(fd, view[written:])
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, SEALS)
    return fd


def _send_error(sock: socket.socket, message: str) -> None:
    header = pickle.dumps(message)
    sock.sendall(struct.pack("!Q", len(header)) + header)


def _receive(sock: socket.socket, deadline: float) -> Made:
    sealed = _receive_sealed(sock, deadline)
    if isinstance(sealed, str):
        return Made(None, f"input helper failed: {sealed}")
    try:
        return Made(sealed.load())
    finally:
        sealed.close()


def _receive_sealed(sock: socket.socket, deadline: float) -> Sealed | str:
    """One trial's sealed memory files (not mapped), or the helper's error message."""
    length = struct.unpack("!Q", _read(sock, 8, deadline))[0]
    _wait(sock, deadline)
    first, fds, _flags, _addr = socket.recv_fds(sock, length, 4096)
    header = first + _read(sock, length - len(first), deadline)
    payload = pickle.loads(header)
    if isinstance(payload, str):
        for fd in fds:
            os.close(fd)
        return payload
    sizes, body = payload
    sealed = Sealed(sizes, body, list(fds))
    if len(fds) != len(sizes) or any(not _sealed(fd) for fd in fds):
        sealed.close()
        return "the input helper sent memory files that are not sealed"
    with contextlib.suppress(OSError):
        sock.sendall(b"k")
    return sealed


def _sealed(fd: int) -> bool:
    try:
        return fcntl.fcntl(fd, fcntl.F_GET_SEALS) & SEALS == SEALS
    except OSError:
        return False


def _map(fd: int, size: int) -> torch.Tensor:
    """The memory file as a uint8 tensor over a copy-on-write mapping (it lives as long as
    the tensor; the file is sealed, so a shared writable mapping is refused)."""
    if size == 0:
        return torch.empty(0, dtype=torch.uint8)
    mm = mmap.mmap(fd, size, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    return torch.frombuffer(mm, dtype=torch.uint8)


def _wait(sock: socket.socket, deadline: float) -> None:
    left = deadline - time.monotonic()
    if left <= 0 or not select.select([sock], [], [], left)[0]:
        raise TimeoutError("the input helper made nothing in time")


def _read(sock: socket.socket, n: int, deadline: float) -> bytes:
    chunks = []
    while n > 0:
        _wait(sock, deadline)
        chunk = sock.recv(min(n, 1 << 20))
        if not chunk:
            raise EOFError("the input helper exited without its inputs")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)
