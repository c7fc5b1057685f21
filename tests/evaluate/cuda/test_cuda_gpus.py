"""GPU assignment without a GPU: visible devices, one worker per device, the device in each result,
NVLink multicast off in every process the evaluator starts, compile pool size, per-GPU slots."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import ClassVar

import pytest
from cuda_candidates import candidate_source

import maxcode.evaluate.cuda.evaluator as evaluator_module
from maxcode.errors import GpuUnavailable
from maxcode.evaluate.cuda import CudaEvalConfig, CudaEvaluator
from maxcode.evaluate.cuda.gpus import (
    MULTICAST_OFF,
    compile_pool_size,
    gpu_slot,
    pinned_gpu,
    visible_gpus,
)
from maxcode.evaluate.result import Status


@pytest.mark.parametrize(
    ("visible", "expected"),
    [
        ("0,1", ["0", "1"]),
        (" 2 , 3 ", ["2", "3"]),
        ("", []),
        ("-1", []),
        ("1,-1,2", ["1"]),  # CUDA stops at the first invalid entry
        ("3,3", ["3"]),
        ("GPU-5d1c1a2e-aaaa,MIG-0b8e-bbbb", ["GPU-5d1c1a2e-aaaa", "MIG-0b8e-bbbb"]),
    ],
)
def test_visible_gpus_follow_cuda_visible_devices(visible, expected):
    assert visible_gpus({"CUDA_VISIBLE_DEVICES": visible}) == expected


def test_without_cuda_visible_devices_every_listed_gpu_is_used(monkeypatch):
    monkeypatch.setattr("maxcode.evaluate.cuda.gpus.nvidia_smi", lambda i: "H100" if i < 3 else "")
    assert visible_gpus({}) == ["0", "1", "2"]


def test_compile_pool_leaves_a_core_per_gpu_worker():
    assert compile_pool_size(0, gpu_workers=1, cpus=16) == 15
    assert compile_pool_size(0, gpu_workers=4, cpus=64) == 60
    assert compile_pool_size(0, gpu_workers=8, cpus=4) == 1
    assert compile_pool_size(6, gpu_workers=2, cpus=64) == 6  # configured wins


class FakeWorker:
    """Stands in for the GPU worker: answers at once, says which device answered."""

    started: ClassVar[list[FakeWorker]] = []

    def __init__(self, gpu, preload, env, log_path, **kwargs):
        self.gpu, self.env, self.jobs = gpu, env, 0
        self.told: list[dict] = []  # lines for the zygote: inputs to make ahead, to let go
        self.keys: list[str | None] = []  # the inputs key each candidate's job carried
        self.inputs_listeners: list = []

    def start(self) -> None:
        FakeWorker.started.append(self)

    def run(self, job: dict) -> dict:
        stats = {"median": 1.0, "iqr": 0.01, "n": 20}
        if job["entry"].endswith(":run_reference"):
            return {"status": "ok", "reference": {"eager": stats, "answered_by": self.gpu}}
        self.jobs += 1
        self.keys.append(job.get("inputs_key"))
        time.sleep(0.05)  # long enough that every worker gets jobs
        return {
            "status": "ok",
            "reason": "",
            "figures": {"answered_by": self.gpu},
            "timing": {"candidate": stats, "eager_this_process": stats},
        }

    def tell(self, message: dict) -> bool:
        self.told.append(message)
        if "prepare" in message:  # as a zygote whose store leaves the task to its candidates
            for told in self.inputs_listeners:
                told({message["prepare"]["key"]: False})
        return True

    def stop(self) -> None:
        pass

    def close(self) -> None:
        pass


@pytest.fixture
def two_gpu_evaluator(tmp_path, monkeypatch):
    FakeWorker.started = []
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    monkeypatch.setattr(evaluator_module, "GpuWorker", FakeWorker)
    monkeypatch.setattr(CudaEvaluator, "_compile", lambda self, job: True)
    with CudaEvaluator(CudaEvalConfig(cuda_arch="9.0"), tmp_path) as ev:
        yield ev


def test_one_worker_per_visible_gpu_and_each_result_names_its_device(two_gpu_evaluator, saxpy_task):
    source = candidate_source("1_Scaled_vector_add.py", "fast")
    results = two_gpu_evaluator.evaluate_items([(saxpy_task, source)] * 8)
    assert [w.gpu for w in FakeWorker.started] == ["0", "1"]
    assert all(w.jobs > 0 for w in FakeWorker.started)
    assert all(r.status is Status.OK for r in results)
    assert {r.figures["gpu_device"] for r in results} == {"0", "1"}
    assert all(r.figures["gpu_device"] == r.figures["answered_by"] for r in results)
    for worker in FakeWorker.started:
        assert MULTICAST_OFF.items() <= worker.env.items()
    # the task's correctness inputs are made ahead by one worker only, and only its jobs use them
    maker, other = sorted(FakeWorker.started, key=lambda w: len(w.told), reverse=True)
    assert other.told == [] and set(other.keys) == {None}
    (key,) = {m["prepare"]["key"] for m in maker.told if "prepare" in m}
    assert set(maker.keys) == {key} and maker.told[-1] == {"release": key}


def test_explicit_gpus_override_the_environment(tmp_path, monkeypatch, saxpy_task):
    FakeWorker.started = []
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    monkeypatch.setattr(evaluator_module, "GpuWorker", FakeWorker)
    monkeypatch.setattr(CudaEvaluator, "_compile", lambda self, job: True)
    source = candidate_source("1_Scaled_vector_add.py", "fast")
    with CudaEvaluator(CudaEvalConfig(cuda_arch="9.0"), tmp_path, gpus=[3]) as ev:
        (result,) = ev.evaluate_items([(saxpy_task, source)])
    assert [w.gpu for w in FakeWorker.started] == ["3"] and result.figures["gpu_device"] == "3"


def test_compile_jobs_run_with_multicast_off_and_no_gpu(tmp_path, saxpy_task):
    """The real (sandboxed) compile job: the candidate's import sees the variables it ran with."""
    names = [*MULTICAST_OFF, "CUDA_VISIBLE_DEVICES"]
    source = f"import os\nraise SystemExit(repr({{k: os.environ.get(k) for k in {names!r}}}))\n"
    ev = CudaEvaluator(CudaEvalConfig(cuda_arch="9.0"), tmp_path, gpus=[])
    job = evaluator_module._Job(0, saxpy_task, source, tmp_path / "job")
    job.job_dir.mkdir()
    (job.job_dir / "candidate.py").write_text(source)
    (job.job_dir / "reference.py").write_text(saxpy_task.reference_source)
    seen = ev._run_compile_job(job)["import_error"]
    for name, value in [*MULTICAST_OFF.items(), ("CUDA_VISIBLE_DEVICES", "")]:
        assert f"'{name}': '{value}'" in seen, seen


HOLDER = """
import sys, time
from pathlib import Path
from typing import ClassVar
from maxcode.evaluate.cuda.gpus import gpu_slot
with gpu_slot(Path(sys.argv[1]), ["0", "1"]) as device:
    print(device, flush=True)
    time.sleep(60)
"""


def test_gpu_slots_give_each_job_its_own_gpu_and_a_killed_job_frees_it(tmp_path: Path):
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "0"
        with gpu_slot(tmp_path, ["0", "1"]) as device:
            assert device == "1"
            got: list[str] = []
            waiter = threading.Thread(target=lambda: got.append(_hold_once(tmp_path)), daemon=True)
            waiter.start()
            time.sleep(0.5)
            assert got == []  # both GPUs held: the third job waits
            holder.kill()
            holder.wait()
            waiter.join(timeout=10)
            assert got == ["0"]  # the killed job's GPU, freed by the kernel
    finally:
        holder.kill()
        holder.wait()


def _hold_once(slots: Path) -> str:
    with gpu_slot(slots, ["0", "1"], poll_s=0.05) as device:
        return device


def test_no_visible_gpu_is_one_clear_error(tmp_path: Path):
    with pytest.raises(GpuUnavailable, match="no GPU visible"), gpu_slot(tmp_path, []):
        pass


def test_a_pinned_rollout_sees_only_its_own_gpu(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    with pinned_gpu(tmp_path) as first:
        assert first == "0" and os.environ["CUDA_VISIBLE_DEVICES"] == "0"
        assert visible_gpus() == ["0"]  # so the rollout's evaluator starts one worker, on it
        os.environ["CUDA_VISIBLE_DEVICES"] = "0,1"  # a second job of the same host
        with pinned_gpu(tmp_path) as second:
            assert second == "1" and os.environ["CUDA_VISIBLE_DEVICES"] == "1"
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "0,1"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    with pinned_gpu(tmp_path) as none:
        assert none is None and os.environ["CUDA_VISIBLE_DEVICES"] == ""


def test_the_host_lock_lets_shared_work_overlap_and_keeps_a_timing_alone(tmp_path, monkeypatch):
    """Two processes' locks on one GPU (two open files act as two processes for flock)."""
    from maxcode.evaluate.cuda.gpus import HostGpuLock, host_lock_path

    monkeypatch.setenv("MAXCODE_GPU_LOCK_DIR", str(tmp_path))
    path = host_lock_path("00000000:00:06.0")
    a, b = HostGpuLock(path), HostGpuLock(path)
    assert a.try_shared() and b.try_shared()  # shared work of both at once
    assert not a.try_exclusive()  # b's shared work is on the GPU
    assert not b.try_shared()  # a waits to time: b starts no new shared work meanwhile
    b.release()
    assert a.try_exclusive()
    assert not b.try_shared() and not b.try_exclusive()
    a.release()
    assert b.try_exclusive()
    b.release()
    a.close()
    b.close()


def test_the_host_lock_file_is_named_by_the_gpus_bus_id(tmp_path, monkeypatch):
    from maxcode.evaluate.cuda.gpus import host_lock_path

    monkeypatch.setenv("MAXCODE_GPU_LOCK_DIR", str(tmp_path / "locks"))
    path = host_lock_path("00000000:9A:00.0")
    assert path == tmp_path / "locks" / "00000000_9a_00.0.lock" and path.is_file()
    assert path.with_suffix(".turn").is_file()
    assert host_lock_path("") is None
