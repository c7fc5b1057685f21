"""The order of operations around each timed call (CPU: the CUDA calls are recorded, not run)."""

from __future__ import annotations

import pytest

from maxcode.evaluate.cuda import worker


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
    assert times == {"candidate": [1.0, 1.0], "eager": [1.0, 1.0]}
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
        calls, [], warmup=0, trials=1, flush_l2=True, l2_bytes=1024, hold_cycles=200_000
    )
    assert trace[-7:] == ["sync", "hold 200000", "flush", "start", "candidate", "end", "sync"]
