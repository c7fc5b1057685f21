"""``maxcode r2g``: build the dataset, train a model, evaluate its ranking."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
import yaml

from maxcode.r2g.config import (
    EncoderR2GConfig,
    GenerativeR2GConfig,
    R2GDatasetConfig,
    load_config,
)

app = typer.Typer(
    help="Reward-to-go model: dataset, training, ranking evaluation.", no_args_is_help=True
)

KIND_CONFIGS = {"generative": GenerativeR2GConfig, "encoder": EncoderR2GConfig}


@app.command()
def dataset(
    rollouts: Annotated[
        list[Path], typer.Argument(metavar="ROLLOUTS", help="rollout .jsonl files or directories")
    ],
    out: Annotated[Path, typer.Option(help="directory for train/test jsonl and the card")],
    gamma: Annotated[float, typer.Option(help="discount of the max-reward return (search.gamma)")],
    config: Annotated[Path | None, typer.Option(help="YAML with the r2g.dataset block")] = None,
    tasks: Annotated[
        list[Path] | None,
        typer.Option(help="suites' tasks.jsonl: descriptions, and the task list the split uses"),
    ] = None,
) -> None:
    """Examples from executed candidates, split by task; prints the card."""
    from maxcode.r2g.dataset import build_dataset, card_markdown, write_dataset
    from maxcode.tasks.model import read_tasks_jsonl

    cfg = load_config(R2GDatasetConfig, _yaml_block(config), "r2g.dataset")
    files = _rollout_files(rollouts)
    task_list = [t for p in tasks or [] for t in read_tasks_jsonl(p)]
    if cfg.with_descriptions and not task_list:
        raise typer.BadParameter("with_descriptions is on: pass --tasks (the suites' tasks.jsonl)")
    descriptions = (
        {f"{t.suite}/{t.task_id}": t.description for t in task_list}
        if cfg.with_descriptions
        else None
    )
    all_tasks = {(t.suite, t.task_id) for t in task_list} or None
    ds = build_dataset(
        files, gamma, cfg.test_fraction, cfg.seed, cfg.max_prompt_chars, descriptions, all_tasks
    )
    write_dataset(ds, out)
    typer.echo(card_markdown(ds.card()))


@app.command()
def train(
    dataset_dir: Annotated[
        Path, typer.Argument(metavar="DATASET_DIR", help="output of `maxcode r2g dataset`")
    ],
    out: Annotated[Path, typer.Option(help="model directory (resumes from its checkpoints)")],
    kind: Annotated[str, typer.Option(help="generative | encoder")] = "encoder",
    config: Annotated[Path | None, typer.Option(help="YAML with the r2g.<kind> block")] = None,
) -> None:
    """Train a reward-to-go model; writes the model, config.json and metrics.json."""
    from maxcode.r2g.dataset import read_dataset
    from maxcode.r2g.reranker import train as train_model

    if kind not in KIND_CONFIGS:
        raise typer.BadParameter(f"--kind {kind!r}: choose one of {sorted(KIND_CONFIGS)}")
    cfg = load_config(KIND_CONFIGS[kind], _yaml_block(config), f"r2g.{kind}")
    metrics = train_model(read_dataset(dataset_dir), cfg, out)
    typer.echo(json.dumps(metrics["test_ranking"]["all"], indent=2))


@app.command()
def evaluate(
    model_dir: Annotated[
        Path, typer.Argument(metavar="MODEL_DIR", help="a trained reward-to-go model")
    ],
    dataset_dir: Annotated[
        Path, typer.Argument(metavar="DATASET_DIR", help="output of `maxcode r2g dataset`")
    ],
    split: Annotated[str, typer.Option(help="train | test")] = "test",
    out: Annotated[Path | None, typer.Option(help="write the metrics JSON here")] = None,
) -> None:
    """Ranking metrics (average rank, Spearman, equal-budget kept share) on a split."""
    from maxcode.r2g.dataset import read_dataset
    from maxcode.r2g.evaluate import evaluate_reranker
    from maxcode.r2g.reranker import load_reranker
    from maxcode.records import atomic_write_json

    metrics = evaluate_reranker(load_reranker(model_dir), read_dataset(dataset_dir).split(split))
    if out is not None:
        atomic_write_json(out, metrics)
    typer.echo(json.dumps(metrics["all"], indent=2))


def _rollout_files(paths: list[Path]) -> list[Path]:
    files: list[Path] = []
    for p in paths:
        if p.is_dir():
            files.extend(sorted(p.rglob("*.jsonl")))
        elif p.is_file():
            files.append(p)
        else:
            raise typer.BadParameter(f"{p}: no such rollout file or directory")
    if not files:
        raise typer.BadParameter(f"no .jsonl rollout files under {[str(p) for p in paths]}")
    return files


def _yaml_block(path: Path | None) -> dict:
    if path is None:
        return {}
    data = yaml.safe_load(path.read_text()) or {}
    if not isinstance(data, dict):
        raise typer.BadParameter(f"{path}: expected a mapping of config keys")
    return data
