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
    ("good", Status.OK, None),
]


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
