"""Sandbox supervision with CPU-only stand-ins: timeouts, crashes, memory limit, restarts."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
import torch

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


def side_by_side(worker: GpuWorker, jobs: list[dict]) -> list[dict]:
    """Send the jobs from one thread each, as the evaluator's GPU slots do."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(len(jobs)) as pool:
        return list(pool.map(worker.run, jobs))


def test_jobs_run_side_by_side(worker, tmp_path):
    jobs = [{**job(tmp_path, "nap", name=f"nap{i}"), "seconds": 1.5} for i in range(3)]
    t0 = time.monotonic()
    replies = side_by_side(worker, jobs)
    assert [r["status"] for r in replies] == ["ok"] * 3
    assert time.monotonic() - t0 < 3.0  # one after another: 4.5 s
    assert len({tuple(r["figures"]["span"]) for r in replies}) == 3


def test_an_exclusive_stretch_stops_its_neighbours_and_stops_their_clocks(worker, tmp_path):
    """While one child times (exclusive), the others do nothing at all (SIGSTOP), and the
    seconds they stand still count against no limit: the ticker runs 2 s of its own, stands
    still 1.5 s, and its 3 s limit is not hit."""
    ticking = {**job(tmp_path, "ticker", timeout_s=3.0), "seconds": 2.0}
    timing = {**job(tmp_path, "exclusive_nap"), "delay": 0.4, "seconds": 1.5}
    tick_reply, timing_reply = side_by_side(worker, [ticking, timing])
    assert tick_reply["status"] == "ok", tick_reply
    assert timing_reply["status"] == "ok", timing_reply
    start, end = timing_reply["figures"]["span"]
    inside = [t for t in tick_reply["figures"]["ticks"] if start + 0.05 < t < end - 0.05]
    assert inside == []
    assert tick_reply["figures"]["paused_seconds"] >= 1.3


def test_a_timing_waits_for_the_shared_stretches_already_running(worker, tmp_path):
    shared = {**job(tmp_path, "shared_nap"), "seconds": 1.2, "entered": str(tmp_path / "in")}
    timing = {**job(tmp_path, "exclusive_nap"), "after": str(tmp_path / "in"), "seconds": 0.2}
    shared_reply, timing_reply = side_by_side(worker, [shared, timing])
    assert timing_reply["figures"]["span"][0] >= shared_reply["figures"]["span"][1] - 0.01


def test_a_shared_stretch_waits_while_a_timing_runs(worker, tmp_path):
    timing = {**job(tmp_path, "exclusive_nap"), "seconds": 1.0, "entered": str(tmp_path / "in")}
    shared = {**job(tmp_path, "shared_nap"), "after": str(tmp_path / "in"), "seconds": 0.1}
    timing_reply, shared_reply = side_by_side(worker, [timing, shared])
    assert shared_reply["figures"]["span"][0] >= timing_reply["figures"]["span"][1] - 0.01


def test_a_child_that_dies_inside_its_timing_frees_the_gate(worker, tmp_path):
    dying = job(tmp_path, "exclusive_then_die")
    later = {**job(tmp_path, "exclusive_nap"), "delay": 0.3, "seconds": 0.1}
    died, ok = side_by_side(worker, [dying, later])
    assert died["status"] == "runtime_error" and "exit code 7" in died["reason"]
    assert ok["status"] == "ok"


def test_a_child_holds_no_pipe_and_no_watchdog_of_a_neighbour(worker, tmp_path):
    """A neighbour's gate pipes would let a candidate grant or stall another's timing, and its
    watchdog page would let it kill it: a child keeps only its own."""
    long = {**job(tmp_path, "nap"), "seconds": 1.5}
    probe = {**job(tmp_path, "pipes_held"), "delay": 0.0}

    def probe_later(j: dict) -> dict:
        time.sleep(0.3)
        return worker.run(j)

    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(2) as pool:
        first = pool.submit(worker.run, long)
        held = pool.submit(probe_later, probe).result()
        assert first.result()["status"] == "ok"
    assert held["figures"]["fifos"] == 2
    shared_pages = [
        line for line in held["figures"]["maps"].splitlines() if " rw-s " in line and "zero" in line
    ]
    assert len(shared_pages) == 1  # its own watchdog


def test_a_child_that_keeps_the_gpu_is_stopped_by_its_own_clock(worker, tmp_path):
    """Holding the GPU exclusively stops the neighbours' clocks, never the holder's: a child
    that never gives it back times out, and the neighbour it held up then finishes."""
    hog = job(tmp_path, "hog_the_gate", timeout_s=2.0)
    neighbour = {**job(tmp_path, "ticker", timeout_s=5.0), "seconds": 1.0}
    t0 = time.monotonic()
    hog_reply, neighbour_reply = side_by_side(worker, [hog, neighbour])
    assert hog_reply["status"] == "timeout"
    assert neighbour_reply["status"] == "ok", neighbour_reply
    assert time.monotonic() - t0 < 8


def test_a_child_works_in_its_own_job_directory(worker, tmp_path):
    """CUDA-L1's level 3 task 28 writes a file next to itself at import; on the H100 it got
    'Permission denied' in the zygote's (read-only) working directory."""
    j = job(tmp_path, "write_next_to_itself")
    reply = worker.run(j)
    assert reply["status"] == "ok" and reply["figures"]["cwd"] == j["job_dir"]
    assert (Path(j["job_dir"]) / "generated_kernel.cu").is_file()


def test_a_job_waits_for_its_tasks_inputs_made_ahead_and_gets_them(worker, tmp_path):
    """The zygote makes a task's inputs once (``prepare``), starts a candidate of the task
    when they are ready and hands them to its process; a job of a task it does not make
    starts at once, with none."""
    task = tmp_path / "inputs"
    task.mkdir()
    (task / "reference.py").write_text(
        "import time, torch\n"
        "def get_inputs():\n"
        "    time.sleep(1.5)\n"  # a slow CPU generator
        "    return [torch.rand(1 << 20)]\n"
    )
    ask = {"key": "k", "job_dir": str(task), "seed": 42, "trials": 3, "timeout_s": 60}
    ask["min_bytes"] = 1 << 20
    said: list = []
    worker.inputs_listeners.append(said.append)  # what the evaluator hears (it holds k's jobs)
    worker.tell({"prepare": ask})
    started = time.monotonic()
    first = worker.run({**job(tmp_path, "inputs_made_ahead", name="a"), "inputs_key": "k"})
    waited = time.monotonic() - started
    second = worker.run({**job(tmp_path, "inputs_made_ahead", name="b"), "inputs_key": "k"})
    other = worker.run({**job(tmp_path, "inputs_made_ahead", name="c"), "inputs_key": "none"})
    worker.tell({"release": "k"})
    again = worker.run({**job(tmp_path, "inputs_made_ahead", name="d"), "inputs_key": "k"})

    torch.manual_seed(42)
    seeds = [int(torch.randint(0, 2**32 - 1, (1,)).item()) for _ in range(3)]
    firsts = []
    for seed in seeds:
        torch.manual_seed(seed)
        firsts.append(float(torch.rand(1 << 20)[0]))
    made = first["figures"]["made_ahead"]
    assert made == {"seeds": seeds, "firsts": pytest.approx(firsts, abs=0)}
    assert second["figures"]["made_ahead"] == made  # made once, for every candidate
    assert 1.5 <= first["figures"]["inputs_ready_wait_seconds"] <= waited
    assert second["figures"].get("inputs_ready_wait_seconds", 0) < 0.5  # ready: no wait
    assert other["figures"]["made_ahead"] is None
    assert again["figures"]["made_ahead"] is None  # released
    assert said[:2] == [{"k": True}, {"k": False}]  # being made, then ready


@pytest.fixture
def two_evaluators(tmp_path):
    """Two zygotes, as two evaluator processes on one host would start them, sharing one GPU's
    lock file."""
    from maxcode.evaluate.cuda.gpus import host_lock_path

    os.environ["MAXCODE_GPU_LOCK_DIR"] = str(tmp_path / "locks")
    try:
        lock = host_lock_path("00000000:00:06.0")
    finally:
        del os.environ["MAXCODE_GPU_LOCK_DIR"]
    workers = [
        GpuWorker(
            gpu=None,
            preload=(),
            extra_env={"PYTHONPATH": f"{SRC}{os.pathsep}{HERE}", "MAXCODE_GPU_LOCK": str(lock)},
            log_path=tmp_path / f"zygote{i}.log",
        )
        for i in range(2)
    ]
    for w in workers:
        w.start()
    yield workers
    for w in workers:
        w.stop()


def in_two_evaluators(workers: list[GpuWorker], jobs: list[dict]) -> list[dict]:
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(2) as pool:
        return list(pool.map(lambda w, j: w.run(j), workers, jobs))


def test_a_timing_waits_for_another_evaluator_processs_timing(two_evaluators, tmp_path):
    first = {**job(tmp_path, "exclusive_nap"), "seconds": 1.0, "entered": str(tmp_path / "in")}
    second = {**job(tmp_path, "exclusive_nap", name="second"), "after": str(tmp_path / "in")}
    second["seconds"] = 0.2
    a, b = in_two_evaluators(two_evaluators, [first, second])
    assert a["status"] == b["status"] == "ok", (a, b)
    assert b["figures"]["span"][0] >= a["figures"]["span"][1] - 0.01
    assert b["figures"]["other_evaluators_on_gpu"] is True  # the evaluator may rerun it alone


def test_another_evaluator_processs_gpu_work_waits_while_one_times(two_evaluators, tmp_path):
    timing = {**job(tmp_path, "exclusive_nap"), "seconds": 1.0, "entered": str(tmp_path / "in")}
    shared = {**job(tmp_path, "shared_nap"), "after": str(tmp_path / "in"), "seconds": 0.1}
    a, b = in_two_evaluators(two_evaluators, [timing, shared])
    assert b["figures"]["span"][0] >= a["figures"]["span"][1] - 0.01
    shared = {**job(tmp_path, "shared_nap", name="shared2"), "seconds": 1.0}
    shared["entered"] = str(tmp_path / "in2")
    timing = {**job(tmp_path, "exclusive_nap", name="timing2"), "after": str(tmp_path / "in2")}
    timing["seconds"] = 0.1
    a, b = in_two_evaluators(two_evaluators, [shared, timing])
    assert b["figures"]["span"][0] >= a["figures"]["span"][1] - 0.01
