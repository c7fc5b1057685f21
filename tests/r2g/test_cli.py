from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from maxcode.r2g.cli import app
from maxcode.tasks.model import Task, write_tasks_jsonl

runner = CliRunner()


def test_dataset_command_writes_split_and_card(tmp_path: Path, rollout_paths: list[Path]) -> None:
    root = rollout_paths[0].parents[3]  # <root>/<suite>/<method>/<task>/seed0.jsonl
    tasks = tmp_path / "tasks.jsonl"
    ids = sorted({p.parent.name for p in rollout_paths})
    write_tasks_jsonl(
        [Task(t, "synthetic-cpp", "cpp", "int main(){}", description=f"task {t}") for t in ids],
        tasks,
    )
    out = tmp_path / "ds"
    result = runner.invoke(
        app, ["dataset", str(root), "--out", str(out), "--gamma", "0.9", "--tasks", str(tasks)]
    )
    assert result.exit_code == 0, result.output
    card = json.loads((out / "card.json").read_text())
    assert card["task_overlap"] == 0 and card["params"]["with_descriptions"]
    assert card["rollout_files"] == len(rollout_paths)
    first = json.loads((out / "train.jsonl").read_text().splitlines()[0])
    assert first["prompt"].startswith(f"### task\ntask {first['task_id']}\n")


def test_dataset_command_rejects_bad_config(tmp_path: Path, rollout_paths: list[Path]) -> None:
    cfg = tmp_path / "r2g.yaml"
    cfg.write_text("test_fraction: 0.3\nsplit_seed: 1\n")
    result = runner.invoke(
        app,
        [
            "dataset",
            str(rollout_paths[0]),
            "--out",
            str(tmp_path),
            "--gamma",
            "0.9",
            "--config",
            str(cfg),
        ],
    )
    assert result.exit_code != 0
    assert "r2g.dataset: unknown key(s) 'split_seed'" in str(result.exception)


def test_train_command_rejects_unknown_kind(tmp_path: Path) -> None:
    result = runner.invoke(app, ["train", str(tmp_path), "--out", str(tmp_path), "--kind", "svm"])
    assert result.exit_code != 0 and "choose one of ['encoder', 'generative']" in result.output
