"""The per-call watchdog (CPU): the parent's poll loop kills a call that outlives its limit,
within a poll of it, and leaves alone a process whose calls finish in time."""

from __future__ import annotations

import time

from maxcode.evaluate.cuda.supervisor import child_watchdog, run_in_child

ENTRY = __name__


def spin_in_a_call(job: dict) -> dict:
    child_watchdog().arm(1.0, "ModelNew.forward (timing)")
    while True:  # a Python spin inside forward
        pass


def calls_in_time(job: dict) -> dict:
    watchdog = child_watchdog()
    for _ in range(3):
        watchdog.arm(1.0, "ModelNew.forward (timing)")
        time.sleep(0.2)
        watchdog.disarm()
    time.sleep(1.5)  # unarmed work (loading, comparing) is bounded by timeout_s only
    return {"status": "ok", "reason": ""}


def job(tmp_path, entry: str) -> dict:
    return {
        "entry": f"{ENTRY}:{entry}",
        "job_dir": str(tmp_path),
        "timeout_s": 60,
        "memory_limit_mb": 4096,
    }


def test_a_spinning_call_is_killed_by_its_watchdog_not_the_outer_timeout(tmp_path):
    t0 = time.monotonic()
    result = run_in_child(job(tmp_path, "spin_in_a_call"))
    assert result["status"] == "timeout"
    assert (
        "ModelNew.forward (timing) ran longer than its watchdog limit of 1.0 s" in result["reason"]
    )
    assert result["figures"]["watchdog_s"] == 1.0
    assert time.monotonic() - t0 < 10


def test_calls_that_finish_in_time_are_not_killed(tmp_path):
    result = run_in_child(job(tmp_path, "calls_in_time"))
    assert result["status"] == "ok", result
