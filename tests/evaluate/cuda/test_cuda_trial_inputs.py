"""KernelBench's correctness inputs made in forked helpers: the same values, bit for bit."""

from __future__ import annotations

import mmap
import os
import pickle
import select
import time

import pytest
import torch

from maxcode.evaluate.cuda import parallel_rand, trial_inputs
from maxcode.evaluate.cuda.trial_inputs import (
    PARALLEL_MIN_BYTES,
    InputStore,
    TrialHelpers,
    input_bytes,
    kernelbench_trial_seeds,
    take_premade,
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


def _is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def test_a_helper_keeps_no_descriptor_of_its_parent_and_its_own_process_group():
    read_end, write_end = os.pipe()  # as the candidate process's GPU gate pipes

    def report(seed: int) -> list:
        return [[_is_open(read_end), _is_open(write_end)], os.getpgid(0)]

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


# -- the GPU worker's store: a task's inputs made once, ahead of its candidates ----------------

MAKER = "maxcode.evaluate.cuda.worker:trial_input_maker"
REFERENCE = """
import torch

def get_inputs():
    x = torch.rand(64, 256, 33)
    return [x, x[:, 3:9].transpose(0, 1), torch.randint(0, 100, (17,)), 4096]
"""
TRIAL_BYTES = (64 * 256 * 33) * 4 + 17 * 8  # the view shares x's storage


def task_dir(tmp_path, name: str, source: str = REFERENCE):
    d = tmp_path / name
    d.mkdir()
    (d / "reference.py").write_text(source)
    return str(d)


def settle(store: InputStore, key: str, within_s: float = 60.0) -> None:
    """Run the zygote's side of the store until ``key`` is no longer being made."""
    deadline = time.monotonic() + within_s
    while store.pending(key) and time.monotonic() < deadline:
        fds = store.fds()
        ready, _, _ = select.select(fds, [], [], 0.05) if fds else ([], [], [])
        store.step(ready)


def in_child(store: InputStore, key: str | None, report):
    """What a candidate's process forked now would get: ``report(take_premade())``."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        try:
            torch.set_num_threads(1)  # no OpenMP team after a fork of this threaded process
            store.enter_child(key)
            out = report(take_premade())
        except BaseException as err:
            out = f"{type(err).__name__}: {err}"
        os.write(write_end, pickle.dumps(out))
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as f:
        data = f.read()
    os.waitpid(pid, 0)
    return pickle.loads(data)


def reserved_while_made(trials: int) -> int:
    """What a set of REFERENCE's trials reserves of the budget while it is made."""
    ns: dict = {}
    exec(REFERENCE, ns)
    return input_bytes(ns["get_inputs"]) * trials * 5 // 4


def store_for_tests(**kwargs) -> InputStore:
    return InputStore(MAKER, lambda job_dir: None, **kwargs)


@pytest.mark.parametrize("generator", ["serial", "threads"])
def test_the_store_makes_a_tasks_trials_once_bit_for_bit_for_its_candidates(
    tmp_path, monkeypatch, generator
):
    if generator == "threads":  # the maker's torch.rand in threads (parallel_rand), same values
        monkeypatch.setattr(parallel_rand, "MIN_ELEMENTS", 1 << 12)
        monkeypatch.setattr(parallel_rand, "MIN_CHUNK", 1 << 10)
    store = store_for_tests(budget=1 << 30)
    store.prepare("t", task_dir(tmp_path, "t"), seed=42, trials=5, timeout_s=60, min_bytes=1)
    assert store.pending("t")
    settle(store, "t")
    assert store.sets["t"].state == "ready" and not store.pending("t")
    assert store.reserved == 5 * TRIAL_BYTES
    ns: dict = {}
    exec(REFERENCE, ns)

    def serial(seed: int) -> list:  # KernelBench: set_seed(trial); get_inputs()
        torch.manual_seed(seed)
        return list(ns["get_inputs"]())

    def loaded(premade):
        return premade.seeds, [sealed.load() for sealed in premade.trials]

    for _ in range(2):  # every candidate of the task gets the same trials
        seeds, trials = in_child(store, "t", loaded)
        assert seeds == kernelbench_trial_seeds(42, 5)
        for seed, got in zip(seeds, trials, strict=True):
            assert_identical(serial(seed), got)
    assert in_child(store, "other", lambda premade: premade) is None
    store.release("t")
    assert store.reserved == 0 and "t" not in store.sets


def test_the_store_says_which_tasks_it_is_making(tmp_path):
    """What the evaluator is told (it keeps those tasks' candidates in its GPU queue): each
    change once, a task let go while made included."""
    store = store_for_tests(budget=1 << 30)
    assert store.changes() == {}
    store.prepare("t", task_dir(tmp_path, "t"), seed=42, trials=2, timeout_s=60, min_bytes=1)
    store.prepare("small", task_dir(tmp_path, "small"), 1, 2, 60, min_bytes=TRIAL_BYTES * 2)
    assert store.changes() == {"t": True, "small": True} and store.changes() == {}
    settle(store, "t")
    settle(store, "small")
    assert store.changes() == {"t": False, "small": False}
    store.prepare("small", task_dir(tmp_path, "small2"), 1, 2, 60, min_bytes=TRIAL_BYTES * 2)
    assert store.changes() == {"small": False}  # asked again (another batch): said again
    store.release("t")
    store.prepare("u", task_dir(tmp_path, "u"), seed=1, trials=2, timeout_s=60, min_bytes=1)
    assert store.changes() == {"u": True}
    store.release("u")
    assert store.changes() == {"u": False} and store.changes() == {}


def test_a_candidate_cannot_change_the_inputs_the_next_one_gets(tmp_path):
    store = store_for_tests(budget=1 << 30)
    store.prepare("t", task_dir(tmp_path, "t"), seed=42, trials=2, timeout_s=60, min_bytes=1)
    settle(store, "t")

    def tamper(premade):
        first = premade.trials[0]
        fd = first.fds[0]
        refused = []
        try:
            os.pwrite(fd, b"\0" * 8, 0)
        except PermissionError:
            refused.append("write")
        try:
            mmap.mmap(fd, first.sizes[0], flags=mmap.MAP_SHARED, prot=mmap.PROT_WRITE)
        except PermissionError:
            refused.append("shared writable mapping")
        try:
            os.ftruncate(fd, 0)
        except PermissionError:
            refused.append("truncate")
        first.load()[0].zero_()  # its own copy-on-write copy
        return refused

    assert in_child(store, "t", tamper) == ["write", "shared writable mapping", "truncate"]
    assert in_child(store, "t", lambda premade: bool(premade.trials[0].load()[0].all()))


def test_sets_start_in_order_with_as_many_first_trials_as_there_is_room_for(tmp_path):
    """The budget is never exceeded: a set gets the first trials that fit (its candidate's
    helpers make the rest), the next waits until one trial of it fits, and a candidate that
    starts while its set still waits makes its own (the set is dropped)."""
    per_trial = reserved_while_made(trials=1)
    store = store_for_tests(budget=3 * per_trial)
    for key in ("a", "b", "c"):
        store.prepare(key, task_dir(tmp_path, key), seed=1, trials=2, timeout_s=60, min_bytes=1)
    settle(store, "a")
    settle(store, "b")
    assert [len(store.sets[k].makers) for k in "ab"] == [2, 1]  # b: one of its two trials
    assert store.sets["c"].state == "waiting" and store.reserved <= store.budget
    seeds = in_child(store, "b", lambda premade: premade.seeds)
    assert seeds == kernelbench_trial_seeds(1, 2)[:1]  # a prefix of KernelBench's seeds
    store.launching("c")  # c's candidate starts without it
    assert "c" not in store.sets
    store.prepare("c", task_dir(tmp_path, "c2"), seed=1, trials=2, timeout_s=60, min_bytes=1)
    store.release("a")  # room for c now: asked again by its next candidate, it is made
    settle(store, "c")
    assert store.sets["c"].state == "ready" and store.reserved <= store.budget


def test_tasks_the_store_leaves_to_their_candidates(tmp_path):
    """Small inputs, inputs of unknown size, a reference that fails to load and makers that
    do not finish in time: the candidates make their own (where any error is a verdict)."""
    store = store_for_tests(budget=1 << 30)
    store.prepare("small", task_dir(tmp_path, "small"), 1, 5, 60, min_bytes=TRIAL_BYTES * 2)
    unknown = REFERENCE.replace("4096]", "4096, x.tolist()[:1]]")  # needs data: no meta size
    store.prepare("unknown", task_dir(tmp_path, "unknown", unknown), 1, 5, 60, min_bytes=1)
    store.prepare("broken", task_dir(tmp_path, "broken", "raise ImportError('x')"), 1, 5, 60, 1)
    slow = "import time\n" + REFERENCE.replace("    x = ", "    time.sleep(60)\n    x = ")
    late = store_for_tests(budget=1 << 30)
    late.prepare(
        "slow", task_dir(tmp_path, "slow", slow), seed=1, trials=2, timeout_s=1.0, min_bytes=1
    )
    started = time.monotonic()
    for key in ("small", "unknown", "broken"):
        settle(store, key)
    settle(late, "slow")
    assert time.monotonic() - started < 30
    assert [store.sets[k].why for k in ("small", "unknown", "broken")] == [
        "small",
        "its size is unknown",
        "its size is unknown",
    ]
    assert late.sets["slow"].why == "its makers did not finish in time"
    left = {k: store.sets[k] for k in ("small", "unknown", "broken")}
    assert [len(found.makers) for found in left.values()] == [1, 1, 1]  # the sizer alone
    for key, found in left.items():  # the task's next candidate: no makers forked again
        store.prepare(key, task_dir(tmp_path, f"{key}-again"), 1, 5, 60, min_bytes=1)
        assert store.sets[key] is found and found.state == "dropped"
    for s in (store, late):
        assert s.reserved == 0 and not s.fds()
        for found in s.sets.values():
            for maker in found.makers:
                with pytest.raises(ChildProcessError):
                    os.waitpid(maker.pid, os.WNOHANG)  # killed and reaped


def test_a_task_not_sized_in_time_does_not_hold_back_the_next(tmp_path, monkeypatch):
    """Sets start in the order asked; one whose size does not come back within
    SIZING_TIMEOUT_S is left to its candidates, and the next one starts."""
    monkeypatch.setattr(trial_inputs, "SIZING_TIMEOUT_S", 1.0)
    store = store_for_tests(budget=1 << 30)
    slow = "import time\n" + REFERENCE.replace("    x = ", "    time.sleep(60)\n    x = ")
    store.prepare("slow", task_dir(tmp_path, "slow", slow), 1, 2, timeout_s=60, min_bytes=1)
    store.prepare("next", task_dir(tmp_path, "next"), seed=1, trials=2, timeout_s=60, min_bytes=1)
    started = time.monotonic()
    settle(store, "slow")  # "next", sized meanwhile, waits behind it
    settle(store, "next")
    assert time.monotonic() - started < 30
    assert store.sets["slow"].why == "it was not sized in time"
    assert store.sets["next"].state == "ready"


def test_a_candidates_process_keeps_no_descriptor_of_other_tasks(tmp_path):
    store = store_for_tests(budget=2 * reserved_while_made(trials=2))  # "later" waits
    store.prepare("mine", task_dir(tmp_path, "mine"), seed=1, trials=2, timeout_s=60, min_bytes=1)
    store.prepare("other", task_dir(tmp_path, "other"), seed=2, trials=2, timeout_s=60, min_bytes=1)
    store.prepare("later", task_dir(tmp_path, "later"), seed=3, trials=2, timeout_s=60, min_bytes=1)
    settle(store, "mine")
    settle(store, "other")
    theirs = [fd for k in ("other",) for t in store.sets[k].trials.values() for fd in t.fds]
    sockets = store.fds()  # the makers of "later", still waiting for their go
    assert theirs and sockets

    def open_fds(premade) -> list[int]:
        mine = [fd for t in premade.trials for fd in t.fds]
        alive = [fd for fd in theirs + sockets + mine if _is_open(fd)]
        return [fd for fd in alive if fd not in mine], len(mine)

    leaked, mine = in_child(store, "mine", open_fds)
    assert leaked == [] and mine == 2 * 2  # two trials, two storages each
