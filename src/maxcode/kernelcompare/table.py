"""The report's Table 1 from measured results: correctness and speedups on held-out tasks.

Input: one JSONL per stage (base, +SFT, +GRPO), one line per held-out task with its
``EvalResult``, as ``heldout.evaluate_stage`` writes them. Nothing here is typed in:
the header ``notes`` and ``extra`` columns (run context, the report's published numbers)
come from ``maxcode.report.reference.kernelcompare_context``.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from maxcode.evaluate.result import EvalResult
from maxcode.records import read_jsonl
from maxcode.report.tables import Table

REDUCTION = 0.33  # the report counts kernels with at least 33% runtime reduction


@dataclass(frozen=True)
class StageRow:
    stage: str
    model: str
    tasks: int
    compiled: int
    correct: int
    faster: int  # correct and speedup > 1
    reduced_33: int  # correct and runtime reduced by >= 33% (speedup >= 1 / 0.67)
    geomean_speedup: float | None  # over correct kernels; None when none is correct
    median_speedup: float | None

    @property
    def correctness(self) -> float:
        return self.correct / self.tasks if self.tasks else 0.0


def stage_row(stage: str, records: list[dict]) -> StageRow:
    if not records:
        raise ValueError(f"stage {stage!r}: no evaluation records; run the held-out evaluation")
    models = sorted({r.get("model", "") for r in records})
    results = [EvalResult.from_dict(r["result"]) for r in records]
    task_ids = [r["task_id"] for r in records]
    if len(set(task_ids)) != len(task_ids):
        raise ValueError(f"stage {stage!r}: a task is evaluated twice; one record per task")
    speedups = [r.speedup for r in results if r.speedup is not None]
    return StageRow(
        stage=stage,
        model=", ".join(models),
        tasks=len(results),
        compiled=sum(r.status.compiled for r in results),
        correct=sum(r.status.correct for r in results),
        faster=sum(s > 1.0 for s in speedups),
        reduced_33=sum(1 - 1 / s >= REDUCTION - 1e-9 for s in speedups),  # float rounding
        geomean_speedup=math.exp(statistics.fmean(map(math.log, speedups))) if speedups else None,
        median_speedup=statistics.median(speedups) if speedups else None,
    )


def load_rows(stage_files: dict[str, Path]) -> list[StageRow]:
    """Rows in the given stage order; every stage must cover the same tasks."""
    rows, task_sets = [], {}
    for stage, path in stage_files.items():
        if not Path(path).is_file():
            raise FileNotFoundError(f"{path}: results of stage {stage!r} not found")
        records = list(read_jsonl(Path(path)))
        task_sets[stage] = {r["task_id"] for r in records}
        rows.append(stage_row(stage, records))
    first = next(iter(task_sets.values()), set())
    for stage, ids in task_sets.items():
        if ids != first:
            raise ValueError(
                f"stage {stage!r} covers different tasks than the first stage "
                f"(missing {sorted(first - ids)[:5]}, extra {sorted(ids - first)[:5]}); "
                "compare stages on the same held-out split"
            )
    return rows


COLUMNS = (
    "Stage",
    "Model",
    "Tasks",
    "Compiled",
    "Correct",
    "Correctness",
    "Faster",
    ">=33% reduction",
    "Geomean speedup (correct)",
)


def _cells(row: StageRow) -> list[str]:
    geo = f"{row.geomean_speedup:.2f}x" if row.geomean_speedup is not None else "-"
    return [
        row.stage,
        row.model,
        str(row.tasks),
        str(row.compiled),
        str(row.correct),
        f"{row.correctness:.0%}",
        str(row.faster),
        str(row.reduced_33),
        geo,
    ]


Extra = dict[str, list[str]]  # column -> one cell per row, appended after COLUMNS


def _columns(extra: Extra | None) -> list[str]:
    return [*COLUMNS, *(extra or {})]


def _row_cells(rows: list[StageRow], extra: Extra | None) -> list[list[str]]:
    return [
        [*_cells(r), *(cells[i] for cells in (extra or {}).values())] for i, r in enumerate(rows)
    ]


TITLE = "KernelCompare: held-out results per training stage"


def kernelcompare_table(
    rows: list[StageRow],
    notes: Sequence[str] = (),
    extra: Extra | None = None,
    meta: dict[str, str] | None = None,
) -> Table:
    """The table in the project's one table type (md, csv, tex, html from report.tables);
    ``notes`` head md, tex and html, ``meta`` (run context) closes every CSV row."""
    return Table(TITLE, _columns(extra), _row_cells(rows, extra), list(notes), meta)
