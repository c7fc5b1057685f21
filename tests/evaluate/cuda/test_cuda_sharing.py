"""One GPU shared by several candidates (CPU: the GPU worker is a stand-in): jobs are let in
by memory, a verdict that sharing could have caused is measured again alone, the reference
is measured only for a correct (or out-of-memory) candidate, and the speedups divide by it."""

from __future__ import annotations

import dataclasses
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from cuda_candidates import candidate_source

import maxcode.evaluate.cuda.evaluator as evaluator_module
from maxcode.evaluate.cuda import CudaEvalConfig, CudaEvaluator
from maxcode.evaluate.cuda.estimator import PROCESS_OVERHEAD_MB, gpu_memory_estimates_mb
from maxcode.evaluate.cuda.gpus import MAX_OVERTAKES, GpuMemoryLedger, GpuQueue, gpu_slots
from maxcode.evaluate.cuda.worker import oom_request_mb
from maxcode.evaluate.result import Status

STATS = {"median": 1.0, "iqr": 0.01, "n": 20}


def timing(candidate_ms: float) -> dict:
    return {"candidate": {**STATS, "median": candidate_ms}, "eager_this_process": STATS}


class SharedGpu:
    """Stands in for one GPU worker: runs jobs from several threads, counts who overlaps."""

    gpu = "0"
    sandbox = "full"

    def __init__(self, reply_for):
        self.reply_for = reply_for
        self.jobs: list[dict] = []
        self.told: list[dict] = []  # lines without a reply (inputs made ahead)
        self.running = 0
        self.most = 0
        self.lock = threading.Lock()
        self.made: dict[str, float] = {}  # when each task's set was ready (0: being made)
        self.inputs_listeners: list = []  # the evaluator's batches
        self.down = False  # a zygote that is down misses what it is told

    def say(self, changes: dict | None) -> None:
        """As the zygote's reader thread: what the store is making (None: it is gone)."""
        for told in list(self.inputs_listeners):
            told(changes)

    def run(self, job: dict) -> dict:
        with self.lock:
            self.jobs.append(job)
            self.running += 1
            self.most = max(self.most, self.running)
            beside = self.running > 1
        time.sleep(0.1)
        with self.lock:
            beside = beside or self.running > 1  # another job overlapped this one
        try:
            return self.reply_for(job, beside)
        finally:
            with self.lock:
                self.running -= 1

    store_s = 0.2  # how long its input store takes to make a task's set

    def tell(self, message: dict) -> bool:
        """As the zygote: a task asked for is being made, then ready ``store_s`` later."""
        with self.lock:
            self.told.append(message)
        if self.down:
            return False
        key = message.get("prepare", {}).get("key")
        if key is not None and key not in self.made:
            self.made[key] = 0.0
            self.say({key: True})

            def ready() -> None:
                self.made[key] = time.monotonic()
                self.say({key: False})

            threading.Timer(self.store_s, ready).start()
        return True

    def references(self) -> list[dict]:
        return [j for j in self.jobs if j["entry"].endswith(":run_reference")]

    def candidates(self) -> list[dict]:
        return [j for j in self.jobs if j["entry"].endswith(":run_job")]

    def start(self) -> None:
        pass

    def close(self) -> None:
        pass


REFERENCE = {"eager": STATS, "compiled": {**STATS, "median": 0.8}, "peak_gpu_mb": 2048.0}


def correct_reply(job: dict, beside: bool) -> dict:
    """What a stand-in GPU worker answers for a correct candidate and its task's reference."""
    if job["entry"].endswith(":run_reference"):
        return {"status": "ok", "reference": REFERENCE}
    return {"status": "ok", "reason": "", "figures": {}, "timing": timing(0.5)}


def evaluate(tmp_path, monkeypatch, worker, items, **config):
    monkeypatch.setattr(CudaEvaluator, "_compile", lambda self, job: True)
    monkeypatch.setattr(CudaEvaluator, "_facts", lambda self, gpu: {"memory.total": "81559"})
    ev = CudaEvaluator(CudaEvalConfig(cuda_arch="9.0", host_pch=False, **config), tmp_path)
    ev._workers = [worker]
    return ev.evaluate_items(items)


@pytest.fixture
def source():
    return candidate_source("1_Scaled_vector_add.py", "fast")


def test_candidates_share_the_gpu_and_each_is_judged_against_the_reference(
    tmp_path, monkeypatch, saxpy_task, source
):
    gpu = SharedGpu(correct_reply)
    results = evaluate(tmp_path, monkeypatch, gpu, [(saxpy_task, source)] * 4, gpu_concurrency=4)
    assert gpu.most > 1  # side by side
    assert len(gpu.references()) == 1  # one reference for the task, whatever the sharing
    for r in results:
        assert r.status is Status.OK
        assert r.figures["speedup_vs_eager"] == 2.0 and r.figures["speedup_vs_compiled"] == 1.6
        assert r.figures["reference_source"] == "reference process"
        assert r.timing.candidate == 0.5 and r.timing.reference == 1.0


def test_a_candidates_slot_time_covers_its_run_and_its_wait_for_the_reference(
    tmp_path, monkeypatch, saxpy_task, source
):
    """``gpu_slot_seconds`` is the slot's whole share (what the throughput benchmark adds up
    to say how full the slots were): the candidate's run and, for a correct one, the wait for
    the task's reference, which one of them measures in 0.1 s more here."""

    gpu = SharedGpu(correct_reply)
    results = evaluate(tmp_path, monkeypatch, gpu, [(saxpy_task, source)] * 3, gpu_concurrency=3)
    slot = sorted(r.figures["gpu_slot_seconds"] for r in results)
    assert slot[0] >= 0.1  # its own run: the stand-in takes 0.1 s
    assert slot[-1] >= 0.2  # the run, then the reference's 0.1 s measurement
    for r in results:  # both figures are rounded to the millisecond: allow that much
        slot_after_wait = r.figures["gpu_slot_seconds"] - r.figures["reference_wait_seconds"]
        assert slot_after_wait >= 0.1 - 0.0011


def test_the_slot_count_is_how_many_candidates_the_gpu_workers_ran_at_once(
    tmp_path, monkeypatch, saxpy_task, source
):
    """What the throughput benchmark divides slot seconds by: the evaluator's own count."""
    monkeypatch.setattr(CudaEvaluator, "_compile", lambda self, job: True)
    monkeypatch.setattr(CudaEvaluator, "_facts", lambda self, gpu: {"memory.total": "81559"})
    ev = CudaEvaluator(CudaEvalConfig(cuda_arch="9.0", host_pch=False, gpu_concurrency=3), tmp_path)
    assert ev.gpu_slot_count == 0  # no GPU worker yet
    gpu = SharedGpu(correct_reply)
    ev._workers = [gpu]
    ev.evaluate_items([(saxpy_task, source)] * 6)
    assert ev.gpu_slot_count == 3 and 1 < gpu.most <= 3


def test_one_slot_runs_one_job_at_a_time(tmp_path, monkeypatch, saxpy_task, source):
    gpu = SharedGpu(correct_reply)
    evaluate(tmp_path, monkeypatch, gpu, [(saxpy_task, source)] * 3, gpu_concurrency=1)
    assert gpu.most == 1


def test_no_reference_is_measured_for_candidates_that_are_not_correct(
    tmp_path, monkeypatch, saxpy_task, source
):
    gpu = SharedGpu(lambda job, beside: {"status": "wrong_answer", "reason": "trial 0: off"})
    results = evaluate(tmp_path, monkeypatch, gpu, [(saxpy_task, source)] * 2, gpu_concurrency=2)
    assert [r.status for r in results] == [Status.WRONG_ANSWER] * 2
    assert gpu.references() == []


@pytest.mark.parametrize(
    "first",
    [
        {"status": "memory_limit", "reason": "out of GPU memory during correctness: ..."},
        {"status": "timeout", "reason": "ModelNew.forward ran longer than its watchdog limit"},
        {"status": "runtime_error", "reason": "ModelNew.forward raised: CUDA error: out of memory"},
    ],
)
def test_a_verdict_sharing_could_explain_is_measured_again_alone(
    tmp_path, monkeypatch, saxpy_task, source, first
):
    def reply(job, beside):
        if job["entry"].endswith(":run_reference"):
            return {"status": "ok", "reference": REFERENCE}
        if beside:
            return dict(first)
        return {"status": "ok", "reason": "", "figures": {}, "timing": timing(0.5)}

    together = threading.Barrier(2, timeout=5)  # the first two jobs surely overlap

    def overlapping(job, beside):
        if not job["entry"].endswith(":run_reference") and len(gpu.candidates()) <= 2:
            together.wait()
            beside = True
        return reply(job, beside)

    gpu = SharedGpu(overlapping)
    results = evaluate(tmp_path, monkeypatch, gpu, [(saxpy_task, source)] * 2, gpu_concurrency=2)
    assert [r.status for r in results] == [Status.OK, Status.OK]
    assert all(r.figures["run_alone_after"].startswith(first["status"]) for r in results)
    assert len(gpu.candidates()) == 4


def test_a_wrong_answer_beside_others_is_not_measured_again(
    tmp_path, monkeypatch, saxpy_task, source
):
    gpu = SharedGpu(lambda job, beside: {"status": "wrong_answer", "reason": "trial 0: off"})
    evaluate(tmp_path, monkeypatch, gpu, [(saxpy_task, source)] * 2, gpu_concurrency=2)
    assert len(gpu.candidates()) == 2


def test_out_of_memory_alone_says_whether_the_reference_fits(
    tmp_path, monkeypatch, saxpy_task, source
):
    def reply(job, beside):
        if job["entry"].endswith(":run_reference"):
            return {"status": "ok", "reference": REFERENCE}
        return {
            "status": "memory_limit",
            "reason": "out of GPU memory during correctness: CUDA out of memory",
            "figures": {"env": {"memory_mb": 81559}},
        }

    (result,) = evaluate(tmp_path, monkeypatch, SharedGpu(reply), [(saxpy_task, source)])
    assert result.status is Status.MEMORY_LIMIT
    assert "the reference alone peaks at 2.0 GiB of 79.6 GiB and fits" in result.reason
    assert result.figures["reference_fits"] is True


def test_out_of_memory_where_the_reference_alone_does_not_fit_says_so(
    tmp_path, monkeypatch, saxpy_task, source
):
    def reply(job, beside):
        if job["entry"].endswith(":run_reference"):
            return {"status": "memory_limit", "reason": "the reference alone ran out of GPU memory"}
        return {"status": "memory_limit", "reason": "out of GPU memory during correctness: ..."}

    (result,) = evaluate(tmp_path, monkeypatch, SharedGpu(reply), [(saxpy_task, source)])
    assert result.status is Status.MEMORY_LIMIT
    assert result.reason.endswith("; the reference alone does not fit either")
    assert result.figures["reference_fits"] is False


def test_a_reference_that_fails_fails_its_correct_candidates(
    tmp_path, monkeypatch, saxpy_task, source
):
    def reply(job, beside):
        if job["entry"].endswith(":run_reference"):
            return {"status": "runtime_error", "reason": "reference failed: boom"}
        return {"status": "ok", "reason": "", "figures": {}, "timing": timing(0.5)}

    (result,) = evaluate(tmp_path, monkeypatch, SharedGpu(reply), [(saxpy_task, source)])
    assert result.status is Status.RUNTIME_ERROR and result.timing is None
    assert "the task's reference failed in its own process" in result.reason
    assert result.figures["harness_error"] is True


@pytest.mark.parametrize(("severity", "status"), [("warn", Status.OK), ("error", Status.REJECTED)])
def test_an_excessive_speedup_is_flagged_by_its_severity(
    tmp_path, monkeypatch, saxpy_task, source, severity, status
):
    def reply(job, beside):
        if job["entry"].endswith(":run_reference"):
            return {"status": "ok", "reference": REFERENCE}
        return {"status": "ok", "reason": "", "figures": {}, "timing": timing(0.01)}

    (result,) = evaluate(
        tmp_path,
        monkeypatch,
        SharedGpu(reply),
        [(saxpy_task, source)],
        check_severity={"excessive_speedup": severity},
    )
    assert result.status is status
    flagged = result.reason if status is Status.REJECTED else " ".join(result.figures["warnings"])
    assert "speedup 100.0x over eager exceeds 10x" in flagged


def test_the_ledger_lets_jobs_in_by_memory_and_alone_means_alone():
    ledger = GpuMemoryLedger(budget_mb=100.0, slots=4)
    order: list[str] = []

    def job(name: str, need: float, hold: float, alone: bool = False) -> None:
        with ledger.admit(need, alone=alone) as admission:
            order.append(f"+{name}")
            time.sleep(hold)
            order.append(f"-{name}{'*' if admission.shared else ''}")

    a = threading.Thread(target=job, args=("a", 60.0, 0.3))
    a.start()
    time.sleep(0.05)
    b = threading.Thread(target=job, args=("b", 60.0, 0.1))  # does not fit beside a
    c = threading.Thread(target=job, args=("c", 30.0, 0.1))  # fits beside a
    b.start()
    c.start()
    for t in (a, b, c):
        t.join()
    assert order.index("+c") < order.index("-a*") < order.index("+b")
    solo = threading.Thread(target=job, args=("s", 1.0, 0.2, True))
    d = threading.Thread(target=job, args=("d", 1.0, 0.05))
    solo.start()
    time.sleep(0.05)
    d.start()
    solo.join()
    d.join()
    assert order[-4:] == ["+s", "-s", "+d", "-d"]  # alone: nothing beside, not shared


def test_slots_default_to_one_per_four_cores_at_most_four():
    assert gpu_slots(0, cpus=2) == 1 and gpu_slots(0, cpus=16) == 4 and gpu_slots(0, cpus=64) == 4
    assert gpu_slots(3, cpus=2) == 3


def test_a_reference_is_admitted_at_its_own_estimate_not_at_its_candidates_peak(
    tmp_path, monkeypatch, saxpy_task, source
):
    """The reference process holds one input set and two outputs; counted at its candidate's
    peak, a 6 GB elementwise task's reference took at least 28 GB of the ledger, not 19.9."""
    held: dict[str, list[float]] = {}

    def compiled(self, job):
        job.gpu_memory_mb, job.reference_gpu_memory_mb = 30000.0, 8000.0
        return True

    monkeypatch.setattr(CudaEvaluator, "_compile", compiled)
    monkeypatch.setattr(CudaEvaluator, "_facts", lambda self, gpu: {"memory.total": "81559"})
    ev = CudaEvaluator(CudaEvalConfig(cuda_arch="9.0", host_pch=False, gpu_concurrency=1), tmp_path)

    def reply(job, beside):
        entry = job["entry"].split(":")[1]
        held[entry] = [a.need_mb for a in ev._ledgers["0"]._running.values()]
        if entry == "run_reference":
            return {"status": "ok", "reference": REFERENCE}
        figures = {"peak_gpu_reserved_mb": 40000.0}  # what the candidate's process peaked at
        return {"status": "ok", "reason": "", "figures": figures, "timing": timing(0.5)}

    ev._workers = [SharedGpu(reply)]
    (result,) = ev.evaluate_items([(saxpy_task, source)])
    assert result.status is Status.OK
    assert held == {"run_job": [30000.0], "run_reference": [8000.0]}


@pytest.mark.parametrize("forged", ["30000", -1, float("nan"), True, None, [1]])
def test_memory_estimates_are_numbers_or_nothing(forged):
    """An estimate the estimator answered or a file kept: anything but a positive finite
    number counts as no estimate (an even share), never a crash."""
    assert evaluator_module._megabytes(forged) is None
    assert evaluator_module._megabytes(1500) == 1500.0


def test_the_estimator_estimates_a_tasks_gpu_memory_from_shapes(tmp_path):
    ref = tmp_path / "reference.py"
    ref.write_text(
        "import torch\n"
        "class Model(torch.nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.fc = torch.nn.Linear(1024, 512)\n"
        "    def forward(self, x):\n"
        "        return self.fc(x)\n"
        "def get_inputs():\n"
        "    return [torch.randn(4096, 1024)]\n"
        "def get_init_inputs():\n"
        "    return []\n"
    )
    weights, inputs, outputs = (1024 * 512 + 512) * 4, 4096 * 1024 * 4, 4096 * 512 * 4
    candidate = (2 * weights + 3 * inputs + 2 * outputs) / 2**20 + PROCESS_OVERHEAD_MB
    alone = (weights + inputs + 2 * outputs) / 2**20 + PROCESS_OVERHEAD_MB
    assert gpu_memory_estimates_mb(ref) == (
        pytest.approx(candidate, abs=0.1),
        pytest.approx(alone, abs=0.1),
    )
    ref.write_text(
        ref.read_text().replace("return self.fc(x)", "return self.fc(x) * x.sum().item()")
    )
    assert gpu_memory_estimates_mb(ref) == (None, None)  # data-dependent: an even share


def test_the_reference_is_measured_beside_other_tasks_not_after_them(tmp_path, builtin_tasks):
    """Per-task locks: measuring one task's reference does not hold up another task's."""
    started = []

    class Slow:
        gpu = "0"

        def run(self, job):
            started.append(time.monotonic())
            time.sleep(0.3)
            return {"status": "ok", "reference": REFERENCE}

    ev = CudaEvaluator(
        CudaEvalConfig(cuda_arch="9.0", host_pch=False, gpu_concurrency=2), tmp_path, gpus=[]
    )
    ev._facts = lambda gpu: {}
    tasks = [builtin_tasks["1_Scaled_vector_add.py"], builtin_tasks["5_Softmax.py"]]
    threads = [threading.Thread(target=ev._reference_for, args=(Slow(), t)) for t in tasks]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert abs(started[1] - started[0]) < 0.2


def test_evaluator_module_keeps_verdicts_sharing_cannot_explain():
    assert evaluator_module._sharing_may_explain({"status": "timeout"})
    assert not evaluator_module._sharing_may_explain({"status": "wrong_answer", "reason": "memory"})
    assert not evaluator_module._sharing_may_explain({"status": "compile_error"})
    assert Path(evaluator_module.__file__).name == "evaluator.py"


def _taker(queue: GpuQueue, ledger: GpuMemoryLedger) -> tuple[threading.Thread, list]:
    """queue.take in a thread (it blocks until a job fits); what it took lands in the list."""
    got: list = []
    thread = threading.Thread(target=lambda: got.append(queue.take(ledger)), daemon=True)
    thread.start()
    return thread, got


def _take_now(queue: GpuQueue, ledger: GpuMemoryLedger) -> Any:
    """The job a take gets within a moment, or None if it is still waiting."""
    thread, got = _taker(queue, ledger)
    thread.join(0.3)
    return got[0][0] if got and got[0] else None


def test_the_queue_lets_in_the_oldest_job_that_fits_and_a_small_one_may_pass_a_large_one():
    cond = threading.Condition()
    ledger = GpuMemoryLedger(budget_mb=100.0, slots=4, cond=cond)
    queue = GpuQueue(cond)
    for name, need in (("first", 60.0), ("second", 50.0), ("third", 10.0), ("fourth", 20.0)):
        queue.put(name, need)
    queue.close()
    first, a = queue.take(ledger)
    # "second" does not fit beside "first"; "third" and "fourth" do
    assert (first, _take_now(queue, ledger), _take_now(queue, ledger)) == (
        "first",
        "third",
        "fourth",
    )
    waiting, got = _taker(queue, ledger)
    waiting.join(0.3)
    assert got == []  # 90 of 100 in use: "second" waits for memory
    ledger.leave(a)
    waiting.join(5)
    assert got[0][0] == "second" and queue.take(ledger) is None


def test_a_waiting_job_is_passed_at_most_max_overtakes_times():
    cond = threading.Condition()
    ledger = GpuMemoryLedger(budget_mb=100.0, slots=64, cond=cond)
    queue = GpuQueue(cond)
    queue.put("running", 60.0)
    queue.put("large", 50.0)
    for i in range(MAX_OVERTAKES + 2):
        queue.put(f"small{i}", 1.0)
    queue.close()
    _, running = queue.take(ledger)
    passed = [_take_now(queue, ledger) for _ in range(MAX_OVERTAKES)]
    assert passed == [f"small{i}" for i in range(MAX_OVERTAKES)]
    waiting, got = _taker(queue, ledger)
    waiting.join(0.3)
    assert got == []  # a small job would fit, but "large" has been passed enough
    ledger.leave(running)
    waiting.join(5)
    assert got[0][0] == "large"


def test_a_held_job_waits_in_the_queue_is_not_overtaken_and_goes_when_its_hold_ends():
    """A job whose task's inputs are being made ahead stays in the queue, not in a GPU slot:
    later jobs go first without counting as passing it, and it goes once the hold ends."""
    cond = threading.Condition()
    ledger = GpuMemoryLedger(budget_mb=100.0, slots=64, cond=cond)
    holding = {"held"}
    queue = GpuQueue(cond, held=lambda job: job in holding)
    queue.put("held", 10.0)
    later = [f"later{i}" for i in range(MAX_OVERTAKES + 2)]
    for name in later:
        queue.put(name, 1.0)
    queue.close()
    assert [queue.take(ledger)[0] for _ in later] == later  # more than MAX_OVERTAKES passed it
    waiting, got = _taker(queue, ledger)
    waiting.join(0.3)
    assert got == []  # it fits, but is not admitted ahead of its inputs
    assert queue._jobs[0].overtaken == 0
    with cond:
        holding.clear()
        cond.notify_all()
    waiting.join(5)
    assert got[0][0] == "held"


def test_a_reference_that_waits_for_memory_goes_before_new_candidates():
    """Correct candidates wait for their task's reference, each holding a slot: the reference
    must not be passed by a stream of new candidates that each fit."""
    cond = threading.Condition()
    ledger = GpuMemoryLedger(budget_mb=100.0, slots=4, cond=cond)
    queue = GpuQueue(cond)
    queue.put("small", 10.0)
    queue.close()
    running = ledger.enter(60.0)
    order: list[str] = []

    def reference() -> None:
        with ledger.admit(50.0, urgent=True):
            order.append("reference")

    waiting = threading.Thread(target=reference, daemon=True)
    waiting.start()
    time.sleep(0.2)
    taker, took = _taker(queue, ledger)
    taker.join(0.3)
    assert took == []  # "small" would fit beside the running job, but the reference waits
    ledger.leave(running)
    waiting.join(5)
    taker.join(5)
    assert order == ["reference"] and took[0][0] == "small"


def test_a_reply_cannot_overwrite_the_figures_the_evaluator_measured(
    tmp_path, monkeypatch, saxpy_task, source
):
    """The reply comes from the candidate's own job directory; the times the evaluator took
    itself (queue, slot, reference wait) are its own, whatever the reply says."""

    def forged(job: dict, beside: bool) -> dict:
        reply = correct_reply(job, beside)
        if job["entry"].endswith(":run_job"):
            reply["figures"] = {
                "gpu_slot_seconds": 0.0,
                "gpu_queue_seconds": 1e6,
                "reference_wait_seconds": -1.0,
                "peak_gpu_mb": 7.0,  # the process's own figure: kept
            }
        return reply

    (result,) = evaluate(tmp_path, monkeypatch, SharedGpu(forged), [(saxpy_task, source)])
    assert result.status is Status.OK
    assert result.figures["gpu_slot_seconds"] >= 0.1  # the stand-in's run alone takes 0.1 s
    assert 0 <= result.figures["gpu_queue_seconds"] < 60
    assert result.figures["reference_wait_seconds"] >= 0
    assert result.figures["peak_gpu_mb"] == 7.0


def test_a_tasks_inputs_are_asked_for_as_its_candidates_queue_and_let_go_when_done(
    tmp_path, monkeypatch, saxpy_task, source
):
    """The GPU worker makes a task's large correctness inputs ahead (trial_inputs.InputStore):
    asked for as each candidate joins the GPU queue (the store makes a set once), carried by
    each candidate's job, let go once after the task's last candidate."""
    other = dataclasses.replace(
        saxpy_task, task_id="other", reference_source=saxpy_task.reference_source + "\n# other\n"
    )
    gpu = SharedGpu(correct_reply)
    dirs_during_run: list[bool] = []

    def reply(job: dict, beside: bool) -> dict:
        with gpu.lock:
            if "inputs_key" in job:  # its task's reference, for the makers, is still there
                asked = [m["prepare"] for m in gpu.told if "prepare" in m]
                mine = [a for a in asked if a["key"] == job["inputs_key"]]
                dirs_during_run.append(Path(mine[0]["job_dir"], "reference.py").is_file())
                gpu.told.append({"ran": job["inputs_key"]})
                made_before_run.append(0 < gpu.made[job["inputs_key"]] <= time.monotonic())
        return correct_reply(job, beside)

    made_before_run: list[bool] = []
    gpu.reply_for = reply
    items = [(saxpy_task, source)] * 3 + [(other, source)]
    results = evaluate(
        tmp_path, monkeypatch, gpu, items, gpu_concurrency=2, seed=7, correctness_trials=4
    )
    # each waited in the queue, not in a GPU slot, until the store said its set was ready
    assert made_before_run == [True] * 4
    held = sorted(r.figures["inputs_ahead_queue_seconds"] for r in results)
    assert held[-1] >= gpu.store_s - 0.05 and all(0 <= h < 5 for h in held)
    asked = [m["prepare"] for m in gpu.told if "prepare" in m]
    assert len(asked) == 4  # one per candidate queued
    assert {(a["seed"], a["trials"], a["min_bytes"]) for a in asked} == {
        (7, 4, evaluator_module.INPUTS_AHEAD_MIN_BYTES)
    }
    keys = sorted({a["key"] for a in asked}, key=[a["key"] for a in asked].count, reverse=True)
    assert len({a["job_dir"] for a in asked if a["key"] == keys[0]}) == 1  # one copy per task
    carried = [j["inputs_key"] for j in gpu.candidates()]
    assert sorted(carried) == sorted([keys[0]] * 3 + [keys[1]])
    released = [m["release"] for m in gpu.told if "release" in m]
    assert sorted(released) == sorted(keys)  # each once, after its last candidate
    for key in keys:
        last_run = max(i for i, m in enumerate(gpu.told) if m.get("ran") == key)
        assert gpu.told.index({"release": key}) > last_run
    assert len(dirs_during_run) == 4 and all(dirs_during_run)
    assert not any(Path(a["job_dir"]).exists() for a in asked)


def test_a_hold_ends_when_the_gpu_worker_loses_its_store(tmp_path, monkeypatch, saxpy_task, source):
    """A zygote that dies while it makes a task's set never says it is ready: its candidates
    go as soon as the worker says the store is gone, not after ``run_timeout_s``."""

    class DyingStore(SharedGpu):
        def tell(self, message: dict) -> bool:
            with self.lock:
                self.told.append(message)
            if "prepare" in message:
                self.say({message["prepare"]["key"]: True})
                threading.Timer(0.3, self.say, args=(None,)).start()
            return True

    started = time.monotonic()
    (result,) = evaluate(tmp_path, monkeypatch, DyingStore(correct_reply), [(saxpy_task, source)])
    assert result.status is Status.OK and time.monotonic() - started < 10
    assert 0.25 <= result.figures["inputs_ahead_queue_seconds"] < 5


def test_a_task_asked_of_a_zygote_that_is_down_holds_nothing(
    tmp_path, monkeypatch, saxpy_task, source
):
    """The ask never reached a store (the zygote is down; it restarts with the next job): the
    candidate is not held for a set nobody makes."""
    gpu = SharedGpu(correct_reply)
    gpu.down = True
    started = time.monotonic()
    (result,) = evaluate(tmp_path, monkeypatch, gpu, [(saxpy_task, source)])
    assert result.status is Status.OK and time.monotonic() - started < 10
    assert any("prepare" in m for m in gpu.told)
    assert result.figures["inputs_ahead_queue_seconds"] < 1


def test_tasks_small_by_the_compile_jobs_estimate_are_not_asked_for(
    tmp_path, monkeypatch, saxpy_task, source
):
    """The task's memory estimate counts three input sets: below three times the
    store's floor, the inputs are below it, and no maker is forked to find that out."""

    def compiled(estimate_mb: float | None):
        def compile_job(self, job) -> bool:
            job.gpu_memory_mb = estimate_mb
            return True

        return compile_job

    floor_mb = evaluator_module.INPUTS_AHEAD_MIN_BYTES / 2**20
    for estimate_mb, asked in ((3 * floor_mb - 1, False), (3 * floor_mb, True), (None, True)):
        gpu = SharedGpu(correct_reply)
        monkeypatch.setattr(CudaEvaluator, "_facts", lambda self, g: {"memory.total": "81559"})
        monkeypatch.setattr(CudaEvaluator, "_compile", compiled(estimate_mb))
        ev = CudaEvaluator(
            CudaEvalConfig(cuda_arch="9.0", host_pch=False), tmp_path / str(estimate_mb)
        )
        ev._workers = [gpu]
        (result,) = ev.evaluate_items([(saxpy_task, source)])
        assert result.status is Status.OK
        assert any("prepare" in m for m in gpu.told) is asked, estimate_mb


def test_no_inputs_are_made_ahead_where_they_are_made_on_the_gpu(
    tmp_path, monkeypatch, saxpy_task, source
):
    gpu = SharedGpu(correct_reply)
    evaluate(tmp_path, monkeypatch, gpu, [(saxpy_task, source)] * 2, fast_inputs=True)
    assert gpu.told == [] and all("inputs_key" not in j for j in gpu.candidates())


def test_a_job_waits_for_memory_other_processes_hold_and_not_for_ever(monkeypatch):
    import maxcode.evaluate.cuda.gpus as gpus_module

    monkeypatch.setattr(gpus_module, "FREE_RECHECK_S", 0.0)
    free = [1000.0]
    ledger = GpuMemoryLedger(8000.0, 4, free_mb=lambda: free[0])
    assert ledger.fits(500.0)
    free[0] = 300.0  # another evaluator's jobs took the rest
    running = ledger.enter(100.0)
    assert not ledger.fits(500.0)
    ledger.leave(running)
    monkeypatch.setattr(gpus_module, "FOREIGN_WAIT_S", 0.2)
    assert not ledger.fits(500.0)  # nothing of this ledger's runs: it waits, but only so long
    time.sleep(0.25)
    assert ledger.fits(500.0)


def test_out_of_memory_while_other_processes_held_the_gpu_is_run_again_and_says_so(
    tmp_path, monkeypatch, saxpy_task, source
):
    def reply(job, beside):
        if job["entry"].endswith(":run_reference"):
            return {"status": "ok", "reference": REFERENCE}
        return {
            "status": "memory_limit",
            "reason": "out of GPU memory during correctness: ...",
            "figures": {
                "env": {"memory_mb": 81559},
                "gpu_free_mb_at_oom": 81.0,
                "gpu_other_processes_mb": 79000.0,
            },
        }

    gpu = SharedGpu(reply)
    (result,) = evaluate(tmp_path, monkeypatch, gpu, [(saxpy_task, source)])
    assert len(gpu.candidates()) == 2  # alone (as far as this evaluator can make it) again
    assert result.status is Status.MEMORY_LIMIT
    assert "other processes held 77.1 GiB of the GPU when it ran out (81 MiB free)" in result.reason
    assert result.figures["memory_verdict_shared"] is True
    assert result.figures["run_alone_after"].startswith("memory_limit")


def test_an_allocation_larger_than_the_others_could_explain_is_the_candidates_own(
    tmp_path, monkeypatch, saxpy_task, source
):
    """A 1 TiB request fails on an 80 GB GPU whoever else holds memory: no second run, and the
    verdict keeps saying that the reference alone fits."""

    def reply(job, beside):
        if job["entry"].endswith(":run_reference"):
            return {"status": "ok", "reference": REFERENCE}
        return {
            "status": "memory_limit",
            "reason": "out of GPU memory during result_reuse: CUDA out of memory. Tried to allocate 1024.00 GiB",
            "figures": {
                "env": {"memory_mb": 81559},
                "gpu_free_mb_at_oom": 60000.0,
                "gpu_other_processes_mb": 20000.0,
                "gpu_oom_request_mb": 1048576.0,
            },
        }

    gpu = SharedGpu(reply)
    (result,) = evaluate(tmp_path, monkeypatch, gpu, [(saxpy_task, source)])
    assert len(gpu.candidates()) == 1
    assert "the reference alone peaks at 2.0 GiB of 79.6 GiB and fits" in result.reason
    assert result.figures["reference_fits"] is True
    assert "memory_verdict_shared" not in result.figures


def test_the_failed_allocation_is_read_from_torchs_message():
    message = (
        "CUDA out of memory. Tried to allocate 1024.00 GiB. GPU 0 has a total capacity of "
        "139.81 GiB of which 137.02 GiB is free."
    )
    assert oom_request_mb(message) == 1024.0 * 1024
    assert oom_request_mb("Tried to allocate 20.00 MiB. GPU 0") == 20.0
    assert oom_request_mb("an illegal memory access was encountered") is None


def test_a_timeout_while_another_evaluator_used_the_gpu_is_run_again_and_says_so(
    tmp_path, monkeypatch, saxpy_task, source
):
    def reply(job, beside):
        if job["entry"].endswith(":run_reference"):
            return {"status": "ok", "reference": REFERENCE}
        return {
            "status": "timeout",
            "reason": "ModelNew.forward (correctness) ran past its watchdog limit",
            "figures": {"other_evaluators_on_gpu": True},
        }

    gpu = SharedGpu(reply)
    (result,) = evaluate(tmp_path, monkeypatch, gpu, [(saxpy_task, source)])
    assert len(gpu.candidates()) == 2
    assert result.status is Status.TIMEOUT
    assert result.reason.endswith(
        "another evaluator process used this GPU meanwhile (outside the timed calls), so the verdict may be theirs"
    )
