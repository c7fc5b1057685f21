"""KernelBench's correctness inputs made in forked helpers: the same values, bit for bit."""

from __future__ import annotations

import os
import time

import pytest
import torch

from maxcode.evaluate.cuda.trial_inputs import (
    PARALLEL_MIN_BYTES,
    TrialHelpers,
    input_bytes,
    trials_ahead,
)

SEEDS = [1, 22, 333, 4444, 55555]


def get_inputs() -> list:
    """Every kind of value a KernelBench get_inputs returns, and a few it rarely does."""
    x = torch.rand(64, 256, 33)
    return [
        x,
        torch.randn(5, 7).t(),  # non-contiguous
        x[:, 3:9].transpose(0, 1),  # a view of another input: must stay a view of it
        torch.randint(0, 100, (17,), dtype=torch.int64),
        torch.rand(9) > 0.5,
        torch.empty(0),
        torch.randn(3, requires_grad=True),
        4096,
        [torch.randn(2, 2), 0.5],
    ]


def kernelbench_make(seed: int) -> list:
    torch.manual_seed(seed)
    return list(get_inputs())


def made_by_helpers(make, seeds, ahead) -> list:
    helpers = TrialHelpers(make, seeds)
    try:
        return list(helpers.made(ahead))
    finally:
        helpers.close()


def assert_identical(a, b) -> None:
    if isinstance(a, torch.Tensor):
        assert (a.dtype, a.shape, a.stride(), a.storage_offset(), a.requires_grad) == (
            b.dtype,
            b.shape,
            b.stride(),
            b.storage_offset(),
            b.requires_grad,
        )
        assert torch.equal(a.detach(), b.detach())
    elif isinstance(a, list):
        assert len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            assert_identical(x, y)
    else:
        assert a == b


@pytest.mark.parametrize("ahead", [1, 2, 5])
def test_helpers_make_kernelbenchs_inputs_bit_for_bit(ahead):
    serial = [kernelbench_make(s) for s in SEEDS]
    made = made_by_helpers(kernelbench_make, SEEDS, ahead)
    assert [m.error for m in made] == [""] * len(SEEDS)
    for want, got in zip(serial, made, strict=True):
        assert_identical(want, got.inputs)
    first = made[0].inputs
    assert first[2].untyped_storage().data_ptr() == first[0].untyped_storage().data_ptr()
    first[0].zero_()
    assert not first[2].any()  # still one storage, as get_inputs made it


def test_a_helper_that_fails_leaves_the_trial_to_the_caller():
    parent = os.getpid()

    def make(seed: int) -> list:
        if os.getpid() != parent and seed == SEEDS[1]:
            raise RuntimeError("Cannot re-initialize CUDA in forked subprocess")
        return kernelbench_make(seed)

    made = made_by_helpers(make, SEEDS, 3)
    assert made[1].inputs is None and "Cannot re-initialize CUDA" in made[1].error
    assert all(m.inputs is not None for i, m in enumerate(made) if i != 1)


def test_helpers_wait_for_their_turn_and_closing_kills_the_rest():
    started = time.monotonic()

    def slow(seed: int) -> list:
        if seed != SEEDS[0]:
            time.sleep(60)
        return [time.monotonic()]

    helpers = TrialHelpers(slow, SEEDS)
    pids = [h.pid for h in helpers._helpers]
    time.sleep(0.5)
    made = helpers.made(2)
    first = next(made).inputs[0]
    assert first - started > 0.5  # it waited for its go, it did not start at the fork
    helpers.close()  # trial 0 was a wrong answer: the rest are not needed
    assert time.monotonic() - started < 10
    for pid in pids:
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)  # reaped: nothing left running


def test_a_helper_keeps_no_descriptor_of_its_parent_and_its_own_process_group():
    read_end, write_end = os.pipe()  # as the candidate process's GPU gate pipes

    def is_open(fd: int) -> bool:
        try:
            os.fstat(fd)
        except OSError:
            return False
        return True

    def report(seed: int) -> list:
        return [[is_open(read_end), is_open(write_end)], os.getpgid(0)]

    try:
        (made,) = made_by_helpers(report, [7], 2)
    finally:
        os.close(read_end)
        os.close(write_end)
    still_open, group = made.inputs
    assert still_open == [False, False]
    assert group != os.getpgid(0)  # a neighbour's timing stops the parent's group, not it


def test_how_many_trials_are_made_at_once():
    big = 8 << 30  # 2^31 fp32 elements, KernelBench level 1's largest inputs
    assert trials_ahead(big, 5, available=256 << 30) == 5
    assert trials_ahead(big, 5, available=100 << 30) == 2  # a quarter of it, 1.25x per trial
    assert trials_ahead(big, 5, available=8 << 30) == 1
    assert trials_ahead(PARALLEL_MIN_BYTES - 1, 5, available=256 << 30) == 1  # small: in-process
    assert trials_ahead(None, 5, available=None) == 2
    assert trials_ahead(big, 1, available=256 << 30) == 1


def test_input_bytes_come_from_shapes_without_data():
    assert input_bytes(lambda: [torch.rand(1 << 20, 1 << 13), 3]) == 4 << 33
    assert input_bytes(lambda: [torch.tensor([1, 2]).tolist()]) is None  # needs data
