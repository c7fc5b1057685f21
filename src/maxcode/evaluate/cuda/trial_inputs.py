"""KernelBench's correctness inputs, bit for bit, for several trials at once.

KernelBench makes each trial's inputs with ``set_seed(trial_seed); get_inputs()`` on torch's
CPU generator, which is serial: the five trials of a level-1 problem with 2^31-element inputs
took 50-98 s in one candidate's process on the H100 host, most of its evaluation. The trials
are independent (each starts from its own seed), so each is made in a process forked for it,
several at once, and handed back through memory files (``memfd``): the same values, made in
parallel. How many are made ahead is bounded by the host memory they take.
"""

from __future__ import annotations

import contextlib
import ctypes
import io
import mmap
import os
import pickle
import select
import signal
import socket
import struct
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
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

    def made(self, ahead: int) -> Iterator[Made]:
        """Each trial's inputs, in order, ``ahead`` trials made at once. A helper that fails
        leaves ``inputs`` None (the caller makes that trial itself, where any error is the
        candidate's verdict as before)."""
        released = 0
        for i, helper in enumerate(self._helpers):
            while released < len(self._helpers) and released < i + max(1, ahead):
                self._helpers[released].go()
                released += 1
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


def _detach(parent_pid: int, keep: int) -> None:
    """In a new helper: die with the parent, leave its process group (a neighbour's timing
    stops that group), and close every descriptor but ``keep`` and the standard three (the
    parent's GPU gate pipes and reply channel are not the helper's)."""
    _die_with_parent()
    if os.getppid() != parent_pid:  # the parent died before the line above
        os._exit(0)
    os.setpgid(0, 0)
    os.closerange(3, keep)
    os.closerange(keep + 1, _max_fd())


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


def _to_memfd(storage: torch.UntypedStorage) -> int:
    fd = os.memfd_create("maxcode-trial-input")
    view = memoryview(torch.empty(0, dtype=torch.uint8).set_(storage).numpy())
    written = 0
    while written < len(view):
        written += os.write(fd, view[written:])
    return fd


def _send_error(sock: socket.socket, message: str) -> None:
    header = pickle.dumps(message)
    sock.sendall(struct.pack("!Q", len(header)) + header)


def _receive(sock: socket.socket, deadline: float) -> Made:
    length = struct.unpack("!Q", _read(sock, 8, deadline))[0]
    _wait(sock, deadline)
    first, fds, _flags, _addr = socket.recv_fds(sock, length, 4096)
    header = first + _read(sock, length - len(first), deadline)
    payload = pickle.loads(header)
    if isinstance(payload, str):
        return Made(None, f"input helper failed: {payload}")
    sizes, body = payload
    try:
        storages = [_map(fd, size) for fd, size in zip(fds, sizes, strict=True)]
    finally:
        for fd in fds:
            os.close(fd)
    with contextlib.suppress(OSError):
        sock.sendall(b"k")
    return Made(_TensorUnpickler(io.BytesIO(body), storages).load())


def _map(fd: int, size: int) -> torch.Tensor:
    """The memory file as a uint8 tensor (the mapping lives as long as the tensor)."""
    if size == 0:
        return torch.empty(0, dtype=torch.uint8)
    mm = mmap.mmap(fd, size, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ | mmap.PROT_WRITE)
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
