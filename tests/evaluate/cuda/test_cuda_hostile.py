"""Each adversarial candidate is caught on a real GPU by its own check (or ends with its status).

All candidates go through one ``evaluate_items`` batch, which also shows that a crash,
a hang or a process exit does not disturb the candidates evaluated after it.
"""

from __future__ import annotations

import dataclasses

import pytest

from maxcode.evaluate.cuda import CudaEvalConfig, CudaEvaluator
from maxcode.evaluate.result import Status

from .cuda_fixtures import hostile, requires_gpu

pytestmark = [pytest.mark.gpu, requires_gpu]

EXPECTED = [
    ("good", Status.OK, None),
    ("torch_only", Status.REJECTED, "no_custom_kernel"),
    ("introspection", Status.REJECTED, "harness_introspection"),
    ("crash", Status.RUNTIME_ERROR, None),
    ("result_reuse", Status.REJECTED, "result_reuse"),
    ("inplace", Status.REJECTED, "inplace_input_mutation"),
    ("hang", Status.TIMEOUT, None),
    ("alias", Status.REJECTED, "output_aliases_input"),
    ("stream", Status.REJECTED, "stream_or_thread"),
    ("thread", Status.REJECTED, "stream_or_thread"),
    ("exits", Status.RUNTIME_ERROR, None),
    ("timing_patch", Status.REJECTED, "timing_patch"),
    ("precision", Status.REJECTED, "precision_downgrade"),
    ("hardcoded", Status.REJECTED, "hardcoded_shapes"),
    ("calls_reference", Status.REJECTED, "calls_reference"),
    ("torch_compute", Status.OK, None),
    ("torch_tampering", Status.REJECTED, "torch_tampering"),
    ("backend_flags", Status.REJECTED, "torch_tampering"),
    ("late_reuse", Status.REJECTED, "timed_result_reuse"),
    ("racy", Status.REJECTED, "nondeterministic"),
    ("unused_kernel", Status.REJECTED, "no_custom_kernel_launched"),
    ("spin", Status.TIMEOUT, None),
    ("slow", Status.OK, None),
    ("oom", Status.MEMORY_LIMIT, None),
    ("good", Status.OK, None),
]


def result_of(results, name):
    return results[[n for n, _, _ in EXPECTED].index(name)]


@pytest.fixture(scope="module")
def results(saxpy_task, tmp_path_factory):
    config = CudaEvalConfig(
        correctness_trials=3, timing_trials=20, time_compiled_reference=False, run_timeout_s=45
    )
    forbidding = dataclasses.replace(
        saxpy_task, metadata={**saxpy_task.metadata, "forbid_torch_compute": True}
    )
    items = [(saxpy_task, hostile(name)) for name, _, _ in EXPECTED]
    items += [(forbidding, hostile("torch_compute")), (forbidding, hostile("good"))]
    items += [(saxpy_task, hostile("cuda_graph"))]
    with CudaEvaluator(config, tmp_path_factory.mktemp("cuda-cache")) as evaluator:
        return evaluator.evaluate_items(items)


@pytest.mark.parametrize(
    ("position", "case"),
    list(enumerate(EXPECTED)),
    ids=[f"{i}-{c[0]}" for i, c in enumerate(EXPECTED)],
)
def test_hostile_candidate_gets_its_verdict(results, position, case):
    name, status, check_id = case
    result = results[position]
    assert result.status is status, (
        f"{name}: {result.status} {result.reason} {result.figures.get('output_tail', '')[-500:]}"
    )
    if check_id:
        assert result.figures["failed_check"] == check_id
        assert result.reason.startswith(f"{check_id}: ")


def test_forbidden_torch_compute_is_rejected_only_where_the_task_says_so(results):
    forbidden, honest = results[len(EXPECTED)], results[len(EXPECTED) + 1]
    assert (
        forbidden.status is Status.REJECTED
        and forbidden.figures["failed_check"] == "torch_compute_in_forward"
    )
    assert "add" in forbidden.reason
    assert honest.status is Status.OK


@pytest.mark.parametrize("name", ["hang", "spin"])
def test_never_ending_calls_are_killed_by_the_watchdog_within_15_s(results, name):
    result = result_of(results, name)
    assert "watchdog limit" in result.reason and result.figures["watchdog_s"] <= 15.0


def test_tampering_verdicts_name_what_changed(results):
    assert "torch.Tensor.__rmul__" in result_of(results, "torch_tampering").reason
    flags = result_of(results, "backend_flags").reason
    assert "torch.backends.cudnn.benchmark: False -> True (during forward)" in flags


def test_out_of_memory_says_the_reference_alone_fits(results):
    result = result_of(results, "oom")
    assert "out of GPU memory during result_reuse" in result.reason
    assert "and fits" in result.reason and result.figures["reference_fits"] is True


def test_own_kernel_share_and_peak_memory_are_recorded(results):
    good, mixed = result_of(results, "good"), result_of(results, "torch_compute")
    assert good.figures["own_kernel_share_pct"] == 100.0
    assert 0.0 < mixed.figures["own_kernel_share_pct"] < 100.0
    assert all(r.figures["peak_gpu_mb"] > 0 for r in results if r.status is Status.OK)


def test_a_cuda_graph_replaying_its_kernel_is_allowed_and_its_timed_outputs_checked(results):
    graph = results[len(EXPECTED) + 2]
    assert graph.status is Status.OK, graph.reason
    assert graph.figures["own_kernel_launches"] >= 1
    assert graph.figures["timed_outputs_checked"] >= 2


def test_the_reference_is_timed_once_per_task_outside_the_candidates(results):
    ok = [r for r in results if r.status is Status.OK]
    assert {r.figures["reference_source"] for r in ok} == {"reference process"}
    assert len({r.figures["runtime_ms"]["eager"]["median"] for r in ok}) == 1
    assert all("reference_timing" not in r.figures["stage_seconds"] for r in ok)


def test_candidates_after_crash_and_hang_are_unaffected(results):
    good_after = results[len(EXPECTED) - 1]
    assert good_after.status is Status.OK and good_after.speedup is not None


def test_excessive_speedup_is_flagged_or_rejected_by_severity(saxpy_task, tmp_path):
    warn = CudaEvalConfig(
        correctness_trials=1,
        timing_trials=10,
        time_compiled_reference=False,
        excessive_speedup=1.01,
    )
    reject = dataclasses.replace(warn, check_severity={"excessive_speedup": "error"})
    with CudaEvaluator(warn, tmp_path) as ev:
        flagged = ev.evaluate(saxpy_task, hostile("good"))
    with CudaEvaluator(reject, tmp_path) as ev:
        rejected = ev.evaluate(saxpy_task, hostile("good"))
    if flagged.speedup is not None and flagged.speedup > 1.01:
        assert any(w.startswith("excessive_speedup") for w in flagged.figures["warnings"])
        assert (
            rejected.status is Status.REJECTED
            and rejected.figures["failed_check"] == "excessive_speedup"
        )
    else:
        pytest.skip(f"fused kernel measured no speedup here ({flagged.speedup}); nothing to flag")
