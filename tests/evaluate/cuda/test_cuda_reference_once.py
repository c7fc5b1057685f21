"""The reference is measured once per task, in its own job, and reused (CPU: the GPU worker is
a stand-in that records the jobs it is sent)."""

from __future__ import annotations

import dataclasses

import pytest

from maxcode.evaluate.cuda import CudaEvalConfig, CudaEvaluator


class RecordingWorker:
    gpu = 0

    def __init__(self, reply: dict):
        self.reply, self.jobs = reply, []

    def run(self, job: dict) -> dict:
        self.jobs.append(job)
        return self.reply


FIGURES = {"eager": {"median": 0.5}, "peak_gpu_mb": 12.0}


@pytest.fixture
def evaluator(tmp_path):
    return CudaEvaluator(CudaEvalConfig(cuda_arch="9.0", host_pch=False), tmp_path, gpus=[])


def test_one_reference_job_per_task_then_memory_then_disk(evaluator, saxpy_task, tmp_path):
    worker = RecordingWorker({"status": "ok", "reference": FIGURES})
    first = evaluator._reference_for(worker, saxpy_task)
    again = evaluator._reference_for(worker, saxpy_task)
    assert first == again  # the same measurement, kept in memory
    assert first["reference"] == FIGURES
    assert set(first["stage_seconds"]) == {
        "admission"
    }  # where its wait went (this stand-in has no stages)
    (job,) = worker.jobs
    assert job["entry"] == "maxcode.evaluate.cuda.worker:run_reference"
    assert "candidate.py" not in job and "cache_root" not in job  # no candidate code goes there
    later = CudaEvaluator(CudaEvalConfig(cuda_arch="9.0", host_pch=False), tmp_path, gpus=[])
    assert later._reference_for(worker, saxpy_task) == {"reference": FIGURES}
    assert len(worker.jobs) == 1  # read back from <cache>/references/


def test_the_key_changes_with_what_the_figures_depend_on(evaluator, saxpy_task, builtin_tasks):
    key = evaluator.reference_key(saxpy_task, 0)
    other_task = builtin_tasks["5_Softmax.py"]
    assert evaluator.reference_key(other_task, 0) != key
    for change in ({"semantics": "kernelbench-head"}, {"timing_trials": 7}, {"seed": 1}):
        changed = CudaEvaluator(dataclasses.replace(evaluator.config, **change), gpus=[])
        assert changed.reference_key(saxpy_task, 0) != key, change
    unrelated = CudaEvaluator(dataclasses.replace(evaluator.config, correctness_trials=2), gpus=[])
    assert unrelated.reference_key(saxpy_task, 0) == key


def test_a_failed_reference_is_passed_on_and_not_cached_on_disk(evaluator, saxpy_task, tmp_path):
    worker = RecordingWorker({"status": "memory_limit", "reason": "the reference alone ran out"})
    got = evaluator._reference_for(worker, saxpy_task)
    assert got == {
        "reference": None,
        "reference_error": "memory_limit: the reference alone ran out",
    }
    assert not (tmp_path / "references").exists()


def test_a_reference_whose_torch_compile_failed_is_measured_again_next_run(
    evaluator, saxpy_task, tmp_path
):
    """Figures without torch.compile (it failed in the sandbox on the H100 until 2026-11-25)
    are used in this run but not kept on disk, so a later run times torch.compile again."""
    broken = {**FIGURES, "compiled_reference_error": "BackendCompilerFailed <- KeyError: ..."}
    worker = RecordingWorker({"status": "ok", "reference": broken})
    assert evaluator._reference_for(worker, saxpy_task)["reference"] == broken
    assert not list((tmp_path / "references").glob("*.json"))
    later = CudaEvaluator(CudaEvalConfig(cuda_arch="9.0", host_pch=False), tmp_path, gpus=[])
    worker.reply = {"status": "ok", "reference": FIGURES}
    assert later._reference_for(worker, saxpy_task)["reference"] == FIGURES
    assert len(worker.jobs) == 2 and len(list((tmp_path / "references").glob("*.json"))) == 1


def test_a_failed_torch_compile_of_the_reference_names_its_cause():
    """On the H100 the reference's torch.compile failed in the jail and the figures said only
    "BackendCompilerFailed: backend='inductor' raised:"; the cause is what a user can act on."""
    from maxcode.evaluate.cuda.worker import _describe_compile_failure

    class BackendCompilerFailed(Exception):
        def __init__(self, inner: BaseException) -> None:
            super().__init__("backend='inductor' raised:\n" + repr(inner))
            self.inner_exception = inner

    def find_driver() -> None:
        raise AssertionError("libcuda.so cannot found!\nPossible files are located at []")

    try:
        try:
            find_driver()
        except AssertionError as inner:
            raise BackendCompilerFailed(inner) from inner
    except BackendCompilerFailed as err:
        text = _describe_compile_failure(err)
    assert text.startswith("BackendCompilerFailed <- AssertionError: libcuda.so cannot found!")
    assert "Possible files are located at []" in text
    assert "test_cuda_reference_once.py:" in text
