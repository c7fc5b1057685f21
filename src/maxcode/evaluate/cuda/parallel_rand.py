"""``torch.rand`` and ``torch.randn`` on the CPU in several threads, bit for bit torch's values.

KernelBench makes correctness inputs with ``torch.rand`` on torch's CPU generator, an MT19937
that torch runs serially: 7-12 ns an element, 10-20 s for each trial of the 1.6-2.1
billion-element inputs of some level-1 problems. MT19937 is linear over GF(2), so its state
``d`` words ahead is ``p(T)`` applied to the state now, where ``T`` is one step and ``p(x) =
x^d mod phi(x)`` with ``phi`` its characteristic polynomial (Haramoto et al., 2008, "Efficient
jump ahead for F2-linear random number generators"). A large call is cut into one chunk per
thread; each chunk's generator is jumped to where the serial call would be when it reached
that chunk, and torch's own kernel fills the chunk in its thread (torch releases the GIL). The
values and the generator's state afterwards are the serial call's. A self-check against
torch's serial kernel, once per process, keeps the serial call wherever they would differ
(another torch, a kernel that draws differently).
"""

from __future__ import annotations

import functools
import math
import os
import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from numpy.lib.stride_tricks import sliding_window_view
from torch.overrides import TorchFunctionMode

MIN_ELEMENTS = 1 << 25
"""Calls smaller than this stay serial: torch makes them in 0.2-0.4 s, and a process's first
call spends about 0.3 s finding the polynomials and checking itself against torch."""
MIN_CHUNK = 1 << 22  # elements per thread at least
MAX_THREADS = 8

_N, _M, _DEGREE = 624, 397, 19937  # MT19937: words of state, the twist's offset, state bits
_UPPER, _LOWER, _MATRIX_A = np.uint32(0x80000000), np.uint32(0x7FFFFFFF), np.uint32(0x9908B0DF)
# torch's CPUGeneratorImplState: uint64 seed, int32 left, int32 seeded, uint64 next,
# uint64 state[624], then the normal samples' cache (kept as it is).
_LEFT, _NEXT, _WORDS = slice(8, 12), slice(16, 24), slice(24, 24 + 8 * _N)

_FILLS = {torch.rand: "uniform_", torch.randn: "normal_"}


def generator_threads() -> int:
    """Threads for one call: the cores this process may use, at most ``MAX_THREADS``."""
    return max(1, min(MAX_THREADS, len(os.sched_getaffinity(0))))


class ParallelCpuRand(TorchFunctionMode):
    """Within it, large float32 ``torch.rand``/``torch.randn`` calls on the CPU's default
    generator are made in ``threads`` threads (default: :func:`generator_threads`), with the
    serial call's values and end state; every other call is torch's own. A function mode, as
    ``torch.device(...)`` is, so that torch's own functions stay as they are."""

    def __init__(self, threads: int | None = None):
        super().__init__()
        self.threads = threads or generator_threads()

    def __torch_function__(
        self, func: Callable[..., Any], types: Any, args: tuple = (), kwargs: dict | None = None
    ) -> Any:
        kwargs = kwargs or {}
        fill = _FILLS.get(func)
        size = _plain_call_size(args, kwargs) if fill else None
        elements = math.prod(size) if size is not None else 0
        count = min(self.threads, elements // MIN_CHUNK)
        if elements < MIN_ELEMENTS or count < 2 or not agrees_with_torch():
            return func(*args, **kwargs)
        out = torch.empty(size, dtype=torch.float32, device="cpu")
        try:
            fill_in_chunks(out.view(-1), fill, torch.default_generator, count)
        except Exception:  # the generator is moved only at the end: the serial call is exact
            del out
            return func(*args, **kwargs)
        return out


def _plain_call_size(args: tuple, kwargs: dict[str, Any]) -> tuple[int, ...] | None:
    """The size of a call made on the default generator into a new float32 CPU tensor; None
    for any other call (another generator, dtype, device or layout; ``out=``; gradients)."""
    if set(kwargs) - {"dtype", "device"} or kwargs.get("dtype") not in (None, torch.float32):
        return None
    device = kwargs.get("device")
    if device is not None and torch.device(device).type != "cpu":
        return None
    if torch.get_default_dtype() != torch.float32 or torch.get_default_device().type != "cpu":
        return None
    size = args[0] if len(args) == 1 and isinstance(args[0], tuple | list | torch.Size) else args
    if not all(type(n) is int and n >= 0 for n in size):
        return None
    return tuple(size)


def fill_in_chunks(flat: torch.Tensor, fill: str, source: torch.Generator, threads: int) -> None:
    """Fill a contiguous float32 vector as ``flat.<fill>(generator=source)`` would, one chunk
    per thread, and leave ``source`` where that call would (``fill``: ``uniform_`` or
    ``normal_``; both draw one word an element, ``normal_`` in blocks of 16 and 16 more for a
    ragged tail, so the chunks start at multiples of 16)."""
    total = flat.numel()
    chunk = total // threads // 16 * 16
    if threads < 2 or chunk < _N + 16:
        raise ValueError(f"{total} elements in {threads} chunks: at least 2 of 640 each")
    bounds = [(k * chunk, (k + 1) * chunk if k < threads - 1 else total) for k in range(threads)]
    state = source.get_state()
    errors: list[BaseException] = []

    def run(k: int, start_state: torch.Tensor) -> None:
        try:
            generator = torch.Generator()
            generator.set_state(start_state)
            getattr(flat[bounds[k][0] : bounds[k][1]], fill)(generator=generator)
        except BaseException as err:  # raised again in the calling thread
            errors.append(err)

    workers = [threading.Thread(target=run, args=(0, state), daemon=True)]
    workers[0].start()
    try:  # the jumps run while the chunks before are being filled
        # Offsets count words from the start of the block the generator holds now.
        first = _N + 1 - int(state.numpy()[_LEFT].view(np.int32)[0])  # torch: left counts down
        window = _jump(_window_from(state, first), chunk - _N)  # the 624 words before chunk 1
        for k in range(1, threads):
            if k > 1:
                window = _jump(window, chunk)
            worker = threading.Thread(target=run, args=(k, _at(state, window, _N)), daemon=True)
            workers.append(worker)
            worker.start()
        # Where the serial call leaves the generator: in the block of its last word, as torch
        # holds it (blocks renew lazily), so the state's bytes are the serial call's too.
        after = first + total + (16 if fill == "normal_" and total % 16 else 0)
        block = (after - 1) // _N * _N
        end = _at(state, _jump(window, block - (first + (threads - 1) * chunk - _N)), after - block)
    finally:
        for worker in workers:
            worker.join()
    if errors:
        raise errors[0]
    source.set_state(end)


@functools.cache
def agrees_with_torch() -> bool:
    """Whether chunked fills give this torch's serial values and end state, bit for bit
    (checked once per process on a few thousand elements, from a state inside a block)."""
    try:
        for fill in ("uniform_", "normal_"):
            generator = torch.Generator().manual_seed(20240917)
            torch.rand(5, generator=generator)
            start = generator.get_state()
            serial = getattr(torch.empty(3 * 2048 + 13), fill)(generator=generator)
            serial_end = generator.get_state()
            generator.set_state(start)
            chunked = torch.empty(serial.numel())
            fill_in_chunks(chunked, fill, generator, 3)
            if not (
                torch.equal(serial.view(torch.int32), chunked.view(torch.int32))
                and torch.equal(serial_end, generator.get_state())
            ):
                return False
        return True
    except Exception:  # any failure means: keep torch's serial calls
        return False


def _window_from(state: torch.Tensor, offset: int) -> np.ndarray:
    """The 624 raw (untempered) words ``offset`` words from the start of the state's block."""
    words = state.numpy()[_WORDS].view(np.uint64).astype(np.uint32)
    return _extend(words, offset)[offset : offset + _N]


def _at(state: torch.Tensor, block: np.ndarray, next_word: int) -> torch.Tensor:
    """``state`` holding ``block`` with ``next_word`` (1-624) its next output; 624: a new
    block is due."""
    new = state.clone()
    raw = new.numpy()
    raw[_LEFT] = np.array([_N + 1 - next_word], dtype=np.int32).view(np.uint8)
    raw[_NEXT] = np.array([next_word], dtype=np.uint64).view(np.uint8)
    raw[_WORDS] = block.astype(np.uint64).view(np.uint8)
    return new


def _extend(window: np.ndarray, count: int) -> np.ndarray:
    """``window`` (624 raw words) followed by the next ``count`` words of the recurrence
    ``x[k+624] = x[k+397] ^ twist(x[k], x[k+1])``, 227 at a time (vectorised)."""
    words = np.empty(_N + count, dtype=np.uint32)
    words[:_N] = window
    made = _N
    while made < _N + count:
        step = min(_N - _M, _N + count - made)
        k = made - _N
        low = words[k + 1 : k + 1 + step]
        mixed = (words[k : k + step] & _UPPER) | (low & _LOWER)
        words[made : made + step] = (
            words[k + _M : k + _M + step]
            ^ (mixed >> np.uint32(1))
            ^ ((low & np.uint32(1)) * _MATRIX_A)
        )
        made += step
    return words


def _jump(window: np.ndarray, distance: int) -> np.ndarray:
    """The 624 words ``distance`` words after ``window``'s first: sum over ``i`` in ``x^distance
    mod phi`` of the window ``i`` words on (every bit of the sequence obeys ``phi``)."""
    coefficients = np.frombuffer(_x_power(distance).to_bytes(_DEGREE // 8 + 1, "little"), np.uint8)
    terms = np.flatnonzero(np.unpackbits(coefficients, bitorder="little"))
    windows = sliding_window_view(_extend(window, _DEGREE), _N)
    total = np.zeros(_N, dtype=np.uint32)
    for first in range(0, len(terms), 1024):  # 2.5 MB gathers: cache-sized
        total ^= np.bitwise_xor.reduce(windows[terms[first : first + 1024]], axis=0)
    return total


@functools.lru_cache(maxsize=64)
def _x_power(exponent: int) -> int:
    """``x^exponent mod phi`` over GF(2), as an int (bit ``i``: the coefficient of ``x^i``)."""
    result = 1
    for bit in bin(exponent)[2:]:
        result = _reduce(_square(result))
        if bit == "1":
            result = _reduce(result << 1)
    return result


@functools.cache
def _characteristic_polynomial() -> int:
    """MT19937's ``phi`` (degree 19937), by Berlekamp-Massey on one bit of its output: phi is
    irreducible, so any bit's sequence has it as its minimal polynomial."""
    seeded = np.empty(_N, dtype=np.uint32)
    seeded[0] = 5489
    for j in range(1, _N):  # MT19937's reference seeding
        prev = int(seeded[j - 1])
        seeded[j] = (1812433253 * (prev ^ (prev >> 30)) + j) & 0xFFFFFFFF
    bits = (_extend(seeded, 2 * _DEGREE)[_N:] >> np.uint32(31)).tolist()
    connection, backup, length, gap, recent = 1, 1, 0, 1, 0
    for n, bit in enumerate(bits):
        recent = recent << 1 | bit  # bit i: the sequence's bit n - i
        if (connection & recent).bit_count() & 1:
            previous = connection
            connection ^= backup << gap
            if 2 * length <= n:
                length, backup, gap = n + 1 - length, previous, 1
                continue
        gap += 1
    if length != _DEGREE:
        raise RuntimeError(f"Berlekamp-Massey found degree {length}, not {_DEGREE}")
    return int(format(connection, f"0{length + 1}b")[::-1], 2)  # the reciprocal polynomial


_SPREAD = [sum((b >> i & 1) << (2 * i) for i in range(8)).to_bytes(2, "little") for b in range(256)]


def _square(a: int) -> int:
    """a(x)^2 over GF(2): each bit i moves to 2i."""
    raw = a.to_bytes((a.bit_length() + 7) // 8 or 1, "little")
    return int.from_bytes(b"".join(_SPREAD[b] for b in raw), "little")


@functools.cache
def _reduction_table() -> list[int]:
    """For each byte t: the multiple of phi whose bits 19937..19944 are t (clears them)."""
    phi = _characteristic_polynomial()
    table = []
    for top in range(256):
        remainder, multiple = top << _DEGREE, 0
        for i in range(7, -1, -1):
            if remainder >> (_DEGREE + i) & 1:
                remainder ^= phi << i
                multiple ^= phi << i
        table.append(multiple)
    return table


def _reduce(a: int) -> int:
    table = _reduction_table()
    while a.bit_length() > _DEGREE:
        shift = max(0, a.bit_length() - _DEGREE - 8)
        a ^= table[a >> (_DEGREE + shift)] << shift
    return a
