"""torch.rand/torch.randn in several threads: torch's serial values and end state, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from maxcode.evaluate.cuda import parallel_rand
from maxcode.evaluate.cuda.parallel_rand import ParallelCpuRand, fill_in_chunks


def bits(t: torch.Tensor) -> torch.Tensor:
    return t.view(torch.int32)


def generator_at(seed: int, drawn: int) -> torch.Generator:
    generator = torch.Generator().manual_seed(seed)
    if drawn:
        torch.rand(drawn, generator=generator)
    return generator


@pytest.fixture
def small_calls(monkeypatch):
    """Thresholds low enough that test-sized calls take the parallel path; counts its calls."""
    assert parallel_rand.agrees_with_torch()  # its own chunked fills are not counted
    monkeypatch.setattr(parallel_rand, "MIN_ELEMENTS", 1 << 12)
    monkeypatch.setattr(parallel_rand, "MIN_CHUNK", 1 << 10)
    chunked: list[int] = []

    def counted(flat, fill, source, threads):
        chunked.append(flat.numel())
        return fill_in_chunks(flat, fill, source, threads)

    monkeypatch.setattr(parallel_rand, "fill_in_chunks", counted)
    return chunked


@pytest.mark.parametrize("fill", ["uniform_", "normal_"])
@pytest.mark.parametrize("threads", [2, 3, 7])
@pytest.mark.parametrize("total", [7 * 2048, 7 * 2048 + 5, 3 * 624 * 16 + 11])
@pytest.mark.parametrize("drawn", [0, 1, 623, 624, 1000])  # fresh seed, inside a block, its end
def test_chunks_give_the_serial_values_and_leave_the_generator_in_the_serial_state(
    fill, threads, total, drawn
):
    generator = generator_at(1234, drawn)
    start = generator.get_state()
    serial = getattr(torch.empty(total), fill)(generator=generator)
    serial_end, serial_next = generator.get_state(), torch.rand(33, generator=generator)

    generator.set_state(start)
    chunked = torch.empty(total)
    fill_in_chunks(chunked, fill, generator, threads)

    assert torch.equal(bits(chunked), bits(serial))
    assert torch.equal(generator.get_state(), serial_end)  # the bytes, not only the stream
    assert torch.equal(torch.rand(33, generator=generator), serial_next)


@pytest.mark.parametrize("distance", [0, 1, 227, 624, 5000, 19937, 50000])
def test_a_jump_lands_where_running_the_recurrence_does(distance):
    window = parallel_rand._extend(np.arange(624, dtype=np.uint32) * 2654435761, 624)[624:]
    run = parallel_rand._extend(window, distance)[distance : distance + 624]
    assert np.array_equal(parallel_rand._jump(window, distance), run)


def kernelbench_get_inputs() -> list:
    """A KernelBench level-1 get_inputs, at a test's size."""
    return [torch.rand(16, 4096), torch.randn(3, 2048, 7), torch.rand(2) * 4]


def test_kernelbench_inputs_are_the_same_inside_and_outside(small_calls):
    torch.manual_seed(42)
    serial, serial_after = kernelbench_get_inputs(), torch.rand(5)
    torch.manual_seed(42)
    with ParallelCpuRand(4):
        made = kernelbench_get_inputs()
    after = torch.rand(5)
    assert small_calls == [16 * 4096, 3 * 2048 * 7]  # the two large calls, in threads
    for want, got in zip(serial, made, strict=True):
        assert torch.equal(bits(want), bits(got)) and want.shape == got.shape
    assert torch.equal(after, serial_after)
    with torch.device("meta"):  # torch's own device context as it was, after
        assert torch.rand(16, 4096).device.type == "meta"


def test_calls_it_cannot_make_are_torchs_own(small_calls):
    size = (64, 1024)
    with ParallelCpuRand(4):
        with torch.device("meta"):
            assert torch.rand(size).device.type == "meta"
        assert torch.rand(size, dtype=torch.float64).dtype == torch.float64
        assert torch.rand(size, requires_grad=True).requires_grad
        own = torch.Generator().manual_seed(7)
        from_own = torch.rand(size, generator=own)
        assert torch.equal(from_own, torch.rand(size, generator=torch.Generator().manual_seed(7)))
        out = torch.empty(size)
        assert torch.randn(size, out=out) is out
    assert small_calls == []


def test_a_torch_that_draws_otherwise_keeps_its_serial_calls(small_calls, monkeypatch):
    """The self-check turns the threads off where chunks would not give torch's values."""
    shifted = parallel_rand._extend

    def off_by_one(window, count):
        return shifted(window, count + 1)[1:]

    monkeypatch.setattr(parallel_rand, "_extend", off_by_one)
    parallel_rand.agrees_with_torch.cache_clear()
    try:
        assert not parallel_rand.agrees_with_torch()
        small_calls.clear()
        torch.manual_seed(3)
        want = torch.rand(16, 4096)
        torch.manual_seed(3)
        with ParallelCpuRand(4):
            got = torch.rand(16, 4096)
        assert torch.equal(got, want) and small_calls == []
    finally:
        parallel_rand.agrees_with_torch.cache_clear()


def test_threads_only_in_helpers_forked_before_the_candidates_import(small_calls):
    """After the candidate's import its process makes a trial serially: the threads run numpy
    code the torch tampering check does not watch. Its helpers, forked before, use them."""
    from types import SimpleNamespace

    from maxcode.evaluate.cuda.worker import _Run

    class Trials:
        ref = SimpleNamespace(get_inputs=kernelbench_get_inputs)
        cpu_inputs = _Run.cpu_inputs
        helper_inputs = _Run.helper_inputs

    in_process = Trials().cpu_inputs(42)
    assert small_calls == []
    in_helper = Trials().helper_inputs(42)
    assert small_calls == [16 * 4096, 3 * 2048 * 7]
    for want, got in zip(in_process, in_helper, strict=True):
        assert torch.equal(bits(want), bits(got))
