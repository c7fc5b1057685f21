"""The report's table is computed from measured results, in three formats."""

from __future__ import annotations

import json

import pytest

from maxcode.evaluate.result import EvalResult, Status, Timing
from maxcode.kernelcompare.table import kernelcompare_table, load_rows


def _record(task_id: str, status: Status, candidate: float | None = None) -> dict:
    timing = Timing("cuda_events", "ms", candidate, 1.0) if candidate is not None else None
    return {"task_id": task_id, "model": "m", "result": EvalResult(status, timing=timing).to_dict()}


def _write(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_rows_count_correct_faster_and_33_percent_reductions(tmp_path):
    base = _write(
        tmp_path / "base.jsonl",
        [
            _record("t1", Status.COMPILE_ERROR),
            _record("t2", Status.WRONG_ANSWER),
            _record("t3", Status.OK, 1.25),
            _record("t4", Status.NO_CODE),
        ],
    )
    tuned = _write(
        tmp_path / "grpo.jsonl",
        [
            _record("t1", Status.OK, 0.5),
            _record("t2", Status.OK, 0.67),
            _record("t3", Status.OK, 0.9),
            _record("t4", Status.RUNTIME_ERROR),
        ],
    )
    rows = load_rows({"base": base, "+GRPO": tuned})
    b, g = rows
    assert (b.tasks, b.compiled, b.correct, b.faster, b.reduced_33) == (4, 2, 1, 0, 0)
    assert b.geomean_speedup == pytest.approx(0.8)
    assert (g.compiled, g.correct, g.faster, g.reduced_33) == (4, 3, 3, 2)
    assert g.correctness == 0.75
    table = kernelcompare_table(rows)
    assert "| base | m | 4 | 2 | 1 | 25% | 0 | 0 | 0.80x |" in table.markdown()
    assert table.csv().splitlines()[2].startswith("+GRPO,m,4,4,3,75%,3,2,")
    assert r"75\%" in table.latex() and r">=33\% reduction" in table.latex()


def test_stages_must_cover_the_same_tasks(tmp_path):
    a = _write(tmp_path / "a.jsonl", [_record("t1", Status.OK, 1.0)])
    b = _write(tmp_path / "b.jsonl", [_record("t2", Status.OK, 1.0)])
    with pytest.raises(ValueError, match="covers different tasks"):
        load_rows({"base": a, "+SFT": b})
    with pytest.raises(FileNotFoundError, match=r"missing\.jsonl"):
        load_rows({"base": tmp_path / "missing.jsonl"})
