"""Sandbox supervision with CPU-only stand-ins: timeouts, crashes, memory limit, restarts."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from maxcode.evaluate.cuda.supervisor import GpuWorker

HERE = Path(__file__).parent
SRC = HERE.parents[2] / "src"


@pytest.fixture(scope="module")
def worker(tmp_path_factory):
    w = GpuWorker(
        gpu=None,
        preload=(),
        extra_env={"PYTHONPATH": f"{SRC}{os.pathsep}{HERE}"},
        log_path=tmp_path_factory.mktemp("log") / "zygote.log",
    )
    w.start()
    yield w
    w.stop()


def job(
    tmp_path: Path, entry: str, timeout_s: float = 20, memory_limit_mb: int = 4096, name: str = ""
) -> dict:
    d = tmp_path / (name or entry)
    d.mkdir()
    return {
        "entry": f"cuda_standins:{entry}",
        "job_dir": str(d),
        "timeout_s": timeout_s,
        "memory_limit_mb": memory_limit_mb,
    }


def test_each_job_runs_in_a_fresh_process(worker, tmp_path):
    first = worker.run(job(tmp_path, "answer"))
    second = worker.run(job(tmp_path, "answer", name="again"))
    assert first["status"] == second["status"] == "ok"
    assert first["figures"]["pid"] != second["figures"]["pid"]
    assert worker.proc.pid not in (first["figures"]["pid"], second["figures"]["pid"])


def test_hang_is_killed_at_the_time_limit(worker, tmp_path):
    t0 = time.monotonic()
    reply = worker.run(job(tmp_path, "sleep_forever", timeout_s=1.5))
    assert reply["status"] == "timeout"
    assert "1.5" in reply["reason"] or "2 s" in reply["reason"]
    assert time.monotonic() - t0 < 10


def test_crash_is_reported_and_the_next_job_runs(worker, tmp_path):
    reply = worker.run(job(tmp_path, "segfault"))
    assert reply["status"] == "runtime_error"
    assert "SIGSEGV" in reply["reason"]
    assert worker.run(job(tmp_path, "answer", name="after"))["status"] == "ok"


def test_memory_limit_kills_the_job(worker, tmp_path):
    reply = worker.run(job(tmp_path, "hog_memory", timeout_s=30, memory_limit_mb=300))
    assert reply["status"] == "memory_limit"
    assert "300 MB" in reply["reason"]


def test_candidate_output_cannot_forge_the_verdict(worker, tmp_path):
    reply = worker.run(job(tmp_path, "chatty"))
    assert reply["status"] == "wrong_answer"
    assert "forged" in reply["output_tail"]


def test_processes_left_behind_are_killed(worker, tmp_path):
    j = job(tmp_path, "spawn_orphan")
    assert worker.run(j)["status"] == "ok"
    orphan = int((Path(j["job_dir"]) / "orphan.pid").read_text())
    time.sleep(0.2)
    state = Path(f"/proc/{orphan}/stat")
    assert not state.exists() or state.read_text().split()[2] == "Z"


def test_dead_zygote_is_restarted(worker, tmp_path):
    os.kill(worker.proc.pid, 9)
    worker.proc.wait()
    reply = worker.run(job(tmp_path, "answer"))
    assert reply["status"] == "ok"
    assert worker.restarts >= 1


@pytest.mark.parametrize(
    ("probe", "kept"), [("probe_passes", True), ("probe_fails", False), ("probe_hangs", False)]
)
def test_optional_preload_is_kept_only_when_the_forked_probe_passes(tmp_path, probe, kept):
    w = GpuWorker(
        gpu=None,
        preload=(),
        extra_env={"PYTHONPATH": f"{SRC}{os.pathsep}{HERE}"},
        log_path=tmp_path / "zygote.log",
        optional_preload=("xml.dom.minidom",),
        probe=f"cuda_standins:{probe}",
        probe_timeout_s=2.0,
    )
    w.start()
    try:
        reply = w.run(job(tmp_path, "preloaded"))
    finally:
        w.stop()
    assert reply["status"] == "ok" and reply["figures"]["has_minidom"] is kept
    assert (w.probe_error is None) is kept
    if not kept:
        assert "without the optional preload" in (tmp_path / "zygote.log").read_text()


def test_candidate_cannot_write_into_the_reply_pipe(worker, tmp_path):
    reply = worker.run(job(tmp_path, "forge_protocol"))
    assert reply["status"] == "wrong_answer" and reply["reason"] == "real verdict"
    assert worker.run(job(tmp_path, "answer", name="next"))["status"] == "ok"
