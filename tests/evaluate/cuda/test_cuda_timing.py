"""Around each timed call: the order of operations (CPU: the CUDA calls are recorded, not
run), what the host time covers, how long the GPU hold lasts, and on a GPU that the hold
keeps host latency untimed."""

from __future__ import annotations

import time

import pytest

from maxcode.evaluate.cuda import worker

from .cuda_fixtures import requires_gpu

HOLD_2GHZ = worker.GpuHold(min_us=100.0, max_us=1000.0, sm_clock_mhz=2000.0)


@pytest.fixture
def trace(monkeypatch):
    """Replace sync, events and the flush buffer with recorders of what the timer does."""
    steps: list[str] = []

    class Event:
        def __init__(self, enable_timing: bool) -> None:
            self.label = "start" if not any(s == "event" for s in steps) else "end"
            steps.append("event")

        def record(self) -> None:
            steps.append(self.label)

        def elapsed_time(self, other: Event) -> float:
            return 1.0

    class Flush:
        def zero_(self) -> None:
            steps.append("flush")

    monkeypatch.setattr(worker, "_synchronize", lambda: steps.append("sync"))
    monkeypatch.setattr(worker, "_hold_gpu", lambda cycles: steps.append(f"hold {cycles}"))
    monkeypatch.setattr(worker, "_Event", Event)
    monkeypatch.setattr(worker.torch, "empty", lambda *a, **k: Flush())
    return steps


def test_flush_is_queued_after_the_sync_so_the_launch_overlaps_it(trace):
    calls = {"candidate": lambda: trace.append("candidate"), "eager": lambda: trace.append("eager")}
    times = worker.time_interleaved(calls, [], warmup=0, trials=2, flush_l2=True, l2_bytes=1024)
    assert times.gpu_ms == {"candidate": [1.0, 1.0], "eager": [1.0, 1.0]}
    timed = trace[trace.index("event") + 2 :]  # after the two events are made
    expected = ["candidate", "eager", "eager", "candidate"]  # rotating order
    assert timed == [
        step for name in expected for step in ("sync", "flush", "start", name, "end", "sync")
    ]


def test_without_flush_each_call_is_still_synchronized_on_both_sides(trace):
    calls = {"candidate": lambda: trace.append("candidate")}
    worker.time_interleaved(calls, [], warmup=0, trials=1, flush_l2=False, l2_bytes=None)
    assert trace[-5:] == ["sync", "start", "candidate", "end", "sync"]


def test_a_hold_is_queued_before_the_flush_and_the_start_event(trace):
    calls = {"candidate": lambda: trace.append("candidate")}
    worker.time_interleaved(
        calls, [], warmup=0, trials=1, flush_l2=True, l2_bytes=1024, hold=HOLD_2GHZ
    )
    assert trace[-7:] == ["sync", "hold 200000", "flush", "start", "candidate", "end", "sync"]


def test_host_time_covers_the_call_and_nothing_around_it(trace, monkeypatch):
    clock = [0.0]
    monkeypatch.setattr(worker, "_perf_counter", lambda: clock[0])
    monkeypatch.setattr(worker, "_synchronize", lambda: clock.__setitem__(0, clock[0] + 1.0))
    monkeypatch.setattr(worker, "_hold_gpu", lambda cycles: clock.__setitem__(0, clock[0] + 1.0))

    def call():  # 2 ms of host work; each sync and hold around it costs the fake clock 1 s
        clock[0] += 0.002

    times = worker.time_interleaved({"candidate": call}, [], 0, 3, True, 1024, hold=HOLD_2GHZ)
    assert times.host_ms["candidate"] == pytest.approx([2.0, 2.0, 2.0])


def test_the_hold_outlasts_twice_the_p90_host_time_within_its_bounds():
    hold = worker.GpuHold(min_us=100.0, max_us=1000.0, sm_clock_mhz=1980.0)
    assert hold.microseconds([]) == 100.0  # nothing measured yet: the minimum
    assert hold.microseconds([0.01] * 20) == 100.0  # 2 x 10 us is under the minimum
    assert hold.microseconds([0.04] * 18 + [0.3, 0.3]) == 100.0  # p90 ignores the top 10%
    assert hold.microseconds([0.04] * 10 + [0.3] * 10) == pytest.approx(600.0)
    assert hold.microseconds([5.0]) == 1000.0  # capped
    assert hold.cycles(100.0) == 198_000  # at the max SM clock
    assert worker.GpuHold(100.0, 1000.0).cycles(100.0) == 200_000  # clock unknown: 2 GHz
    assert worker.GpuHold(0.0, 1000.0).microseconds([5.0]) == 0.0  # hold_us 0: no hold
    with pytest.raises(ValueError, match="min_us <= max_us"):
        worker.GpuHold(200.0, 100.0)


def test_a_variant_with_a_slow_host_side_gets_a_longer_hold_and_the_others_do_not(
    trace, monkeypatch
):
    clock = [0.0]
    monkeypatch.setattr(worker, "_perf_counter", lambda: clock[0])

    def slow_host():  # 0.3 ms of host time per call
        clock[0] += 0.0003

    def quick_host():
        clock[0] += 0.00001

    calls = {"slow_host": slow_host, "quick_host": quick_host}
    times = worker.time_interleaved(calls, [], 0, 4, False, None, hold=HOLD_2GHZ)
    assert times.hold_us["slow_host"] == pytest.approx([100.0, 600.0, 600.0, 600.0])
    assert times.hold_us["quick_host"] == [100.0] * 4
    assert trace.count("hold 1200000") == 3  # 600 us at 2 GHz


def test_a_host_side_longer_than_the_longest_hold_is_reported_by_variant():
    summary = {"candidate": {"host_median": 0.25}, "eager": {"host_median": 0.02}}
    (warning,) = worker.host_latency_warnings(summary, worker.GpuHold(100.0, 200.0))
    assert "candidate call takes 0.250 ms" in warning and "hold_max_us" in warning
    assert worker.host_latency_warnings(summary, worker.GpuHold(100.0, 300.0)) == []
    no_hold = worker.GpuHold(0.0, 0.0)
    assert worker.host_latency_warnings(summary, no_hold) == []  # nothing hidden


@pytest.mark.gpu
@requires_gpu
def test_on_a_gpu_the_hold_keeps_host_work_before_the_launch_out_of_the_timed_window():
    import torch

    x = torch.zeros(1 << 20, device="cuda")

    def launch(x):
        return x + 1

    def host_work_then_launch(x):
        begin = time.perf_counter()
        while time.perf_counter() - begin < 200e-6:  # 200 us of host work
            pass
        return x + 1

    variants = {"plain": launch, "host_work": host_work_then_launch}

    def medians(hold_us: float) -> dict[str, float]:
        hold = worker.GpuHold(hold_us, hold_us)  # fixed; at 2 GHz: about hold_us on any GPU here
        times = worker.time_interleaved(variants, [x], 3, 50, False, None, hold=hold)
        return {name: worker.summarize(ms)["median"] for name, ms in times.gpu_ms.items()}

    held, unheld = medians(2000.0), medians(0.0)
    assert unheld["host_work"] - unheld["plain"] > 0.15, unheld  # the host work was timed
    assert abs(held["host_work"] - held["plain"]) < 0.02, held  # the hold hid it


@pytest.mark.gpu
@requires_gpu
def test_on_a_gpu_a_call_after_a_long_one_is_timed_as_when_it_runs_alone():
    """On the H100 the host took 0.2-0.4 ms to launch the call after a 27 ms one, and a
    fixed 100 us hold let that into the window; the hold sized to the host keeps it out."""
    import torch

    x = torch.zeros(16 << 20, device="cuda")

    def long_call(x):
        torch.cuda._sleep(27_000 * 2000)  # about 27 ms at 2 GHz, 14 at 1 GHz
        return x

    def short_call(x):
        return x * 0.75 + x

    def short_median(variants: dict, hold: worker.GpuHold) -> float:
        times = worker.time_interleaved(variants, [x], 3, 60, True, 100 << 20, hold=hold)
        return worker.summarize(times.gpu_ms["short"])["median"]

    sized = worker.GpuHold(100.0, 1000.0)
    alone = short_median({"short": short_call}, sized)
    after_long = short_median({"short": short_call, "long": long_call}, sized)
    fixed = short_median({"short": short_call, "long": long_call}, worker.GpuHold(100.0, 100.0))
    assert abs(after_long - alone) / alone < 0.03, (alone, after_long, fixed)


@pytest.mark.parametrize(
    ("call_s", "warmups", "rounds"),
    [
        (0.5, 2, 10),  # a 500 ms call: warm-up stops at a quarter of the target, the floor rules
        (0.05, 5, 41),  # 50 ms: rounds fill the 2 s target
        (0.001, 5, 100),  # 1 ms: the ceiling
    ],
)
def test_rounds_adapt_to_the_cost_of_a_call(trace, monkeypatch, call_s, warmups, rounds):
    clock = [0.0]
    monkeypatch.setattr(worker, "_perf_counter", lambda: clock[0])
    calls = []

    def call():
        calls.append(1)
        clock[0] += call_s

    times = worker.time_interleaved(
        {"candidate": call}, [], 5, 10, False, None, min_seconds=2.0, max_trials=100
    )
    assert len(times.gpu_ms["candidate"]) == rounds
    assert len(calls) == warmups + rounds


def test_hooks_see_every_call_and_round_outside_the_timed_window(trace):
    class Hooks(worker.RoundHooks):
        def plan(self, trials):
            trace.append(f"plan {trials}")

        def round_start(self, t):
            trace.append(f"round {t}")

        def call_start(self, name):
            trace.append("arm")

        def call_end(self, name, t, out):
            trace.append(f"disarm {t} {out}")

        def round_end(self, t):
            trace.append(f"end {t}")

    calls = {"candidate": lambda: "out"}
    worker.time_interleaved(calls, [], 1, 2, False, None, hooks=Hooks())
    warm = trace.index("plan 2")
    assert trace[:warm] == ["sync", "arm", "sync", "disarm -1 out"]
    assert trace[warm + 1 : warm + 3] == ["event", "event"]
    assert trace[warm + 3 :] == [
        step
        for t in range(2)
        for step in (
            f"round {t}",
            "sync",
            "arm",
            "start",
            "end",
            "sync",
            f"disarm {t} out",
            f"end {t}",
        )
    ]


class _FakeRun:
    """What _TimedRounds needs from a run: the candidate's untimed outputs for both input
    sets, the comparison of two calls' outputs, the watchdog, seeds."""

    def __init__(self, untimed) -> None:
        import types

        self.cfg = types.SimpleNamespace(timed_output_checks=3)
        self.semantics = types.SimpleNamespace(tolerance=lambda precision: 0.0)
        self.precision = "fp32"
        self.untimed = untimed
        self.armed = 0

    def seed_for(self, label: str) -> int:
        return 7

    def arm(self, what: str) -> None:
        self.armed += 1

    def disarm(self) -> None:
        pass

    def check_patches(self, when: str) -> None:
        pass

    def repeat_difference(self, first, again):
        import torch

        same = all(torch.equal(a, b) for a, b in zip(first, again, strict=True))
        return "" if same else "output 0: differs"


def _timed_rounds(trace, candidate):
    import torch

    live, spare = [torch.arange(4.0)], [torch.arange(4.0) + 10]
    run = _FakeRun([[live[0] * 2], [spare[0] * 2]])  # the candidate's untimed outputs
    hooks = worker._TimedRounds(run, live, spare)
    worker.time_interleaved({"candidate": candidate}, live, 2, 12, False, None, hooks=hooks)
    hooks.restore()
    return hooks, run, live


def test_timed_rounds_swap_contents_and_check_the_last_two_and_sampled_rounds(trace):
    hooks, run, live = _timed_rounds(trace, lambda a: a * 2)
    assert {10, 11} <= hooks.sampled and len(hooks.sampled) <= 5
    assert hooks.checked == len(hooks.sampled) and hooks.found is None
    assert live[0].tolist() == [0.0, 1.0, 2.0, 3.0]  # the original contents are back
    assert run.armed == 2 + 12  # every call, warm-up included, ran under the watchdog


def test_a_cache_keyed_on_the_input_tensor_is_timed_result_reuse(trace):
    cache = {}

    def caching(a):
        if a.data_ptr() not in cache:
            cache[a.data_ptr()] = a * 2
        return cache[a.data_ptr()]

    hooks, _, _ = _timed_rounds(trace, caching)
    assert hooks.found[0] == "timed_result_reuse"
    assert "the candidate's result for the other timed input set" in hooks.found[1]


def test_a_timed_output_that_is_no_earlier_result_is_nondeterministic(trace):
    calls = []

    def drifting(a):  # right on its untimed calls, off once timed: no other set's result
        calls.append(1)
        return a * 2 + (1.0 if len(calls) > 4 else 0.0)

    hooks, _, _ = _timed_rounds(trace, drifting)
    assert hooks.found[0] == "nondeterministic"
    assert "from the candidate's untimed output for the same inputs" in hooks.found[1]
