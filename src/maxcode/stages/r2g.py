"""The reward-to-go stages as functions of typed params: the one front door.

The Snakemake rules (``workflow/scripts/*_r2g.py``) and ``maxcode r2g ...`` both call
these, so a stage runs the same way by hand and under Snakemake.
"""

from __future__ import annotations

import json
from pathlib import Path

from maxcode.params import R2GParams
from maxcode.r2g.dataset import build_dataset, read_dataset, write_dataset
from maxcode.r2g.reranker import load_reranker, train
from maxcode.records import atomic_write_json
from maxcode.tasks.model import read_tasks_jsonl


def dataset_stage(
    rollouts: list[Path], r2g: R2GParams, gamma: float, suite_dirs: list[Path], out_dir: Path
) -> dict:
    """Examples from executed candidates of the training methods, split by task."""
    cfg = r2g.dataset
    tasks = [t for d in suite_dirs for t in read_tasks_jsonl(Path(d) / "tasks.jsonl")]
    descriptions = (
        {f"{t.suite}/{t.task_id}": t.description for t in tasks} if cfg.with_descriptions else None
    )
    dataset = build_dataset(
        rollouts,
        gamma,
        cfg.test_fraction,
        cfg.seed,
        cfg.max_prompt_chars,
        descriptions,
        all_tasks={(t.suite, t.task_id) for t in tasks},  # the split PipelinePlan.held_out uses
    )
    write_dataset(dataset, out_dir)
    return dataset.card()


def train_stage(dataset_dir: Path, r2g: R2GParams, out_dir: Path) -> dict:
    """Train the model of kind ``r2g.kind``; writes the model, config.json and metrics.json."""
    return train(read_dataset(dataset_dir), r2g.model, out_dir)


def ranking_stage(
    model_dir: Path, dataset_dir: Path, r2g: R2GParams, out: Path, split: str = "test"
) -> dict:
    """Ranking metrics on a split, and which model produced them, for the rerank table."""
    from maxcode.r2g.evaluate import evaluate_reranker  # scipy: seconds to import; only here

    reranker = load_reranker(model_dir)
    metrics = evaluate_reranker(reranker, read_dataset(dataset_dir).split(split))
    report = {
        "model": {"kind": r2g.kind, "name": reranker.name},
        "metrics": _flat_metrics(metrics["all"]),
        "detail": json.loads(json.dumps(metrics, default=str)),
    }
    atomic_write_json(out, report)
    return report


def _flat_metrics(block: dict, prefix: str = "") -> dict:
    flat = {}
    for key, value in block.items():
        if isinstance(value, dict):
            flat.update(_flat_metrics(value, f"{prefix}{key}."))
        elif isinstance(value, int | float) and not isinstance(value, bool):
            flat[f"{prefix}{key}"] = value
    return flat
