"""PIE's best@k speedup, %Opt and %Correct, with and without the floor at 1.0."""

from __future__ import annotations

import pytest

from maxcode.evaluate.pie_metrics import Outcome, best_at_k, pie_metrics
from maxcode.evaluate.result import EvalResult, Status, Timing

WRONG = Outcome(False, None)


def ok(speedup: float) -> Outcome:
    return Outcome(True, speedup)


def test_best_at_k_looks_only_at_the_first_k():
    cands = [WRONG, ok(1.05), ok(3.0)]
    assert best_at_k(cands, 1) is None
    assert best_at_k(cands, 2) == 1.05
    assert best_at_k(cands, 3) == 3.0
    with pytest.raises(ValueError, match="k >= 1"):
        best_at_k(cands, 0)


def test_metrics_as_pie_computes_them():
    per_task = {"a": [ok(2.0)], "b": [ok(0.5)], "c": [WRONG], "d": [ok(1.1)]}
    m = pie_metrics(per_task, k=1, floor=True)
    assert m.mean_speedup == pytest.approx((2.0 + 1.0 + 1.0 + 1.1) / 4)
    assert m.pct_opt == pytest.approx(50.0)  # a and d (>= 1.1 counts)
    assert m.pct_correct == pytest.approx(75.0)
    raw = pie_metrics(per_task, k=1, floor=False)
    assert raw.mean_speedup == pytest.approx((2.0 + 0.5 + 1.0 + 1.1) / 4)
    assert "floored at 1.0" in m.speedup_label and "not floored" in raw.speedup_label
    assert m.to_dict()["speedup_floor_1"] is True


def test_eval_results_are_accepted_directly():
    good = EvalResult(Status.OK, timing=Timing("instructions", "instructions", 10.0, 30.0))
    bad = EvalResult(Status.WRONG_ANSWER)
    assert best_at_k([bad, good], 2) == pytest.approx(3.0)
    assert pie_metrics({"t": [bad, good]}, k=2).pct_opt == 100.0


def test_empty_inputs_are_errors():
    with pytest.raises(ValueError, match="at least one task"):
        pie_metrics({}, k=1)
    with pytest.raises(ValueError, match="task 'x' has no candidates"):
        pie_metrics({"x": []}, k=1)
