"""``maxcode r2g``: --params through the one loader, over the stage functions the rules call."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from maxcode.stages.r2g_cli import app
from maxcode.tasks.model import Task, write_tasks_jsonl

REPO = Path(__file__).resolve().parents[2]
runner = CliRunner()


def _params(tmp_path: Path, **r2g_dataset) -> Path:
    raw = yaml.safe_load((REPO / "params.yaml").read_text())
    raw["r2g"]["dataset"].update(r2g_dataset)
    raw["tables"]["reference"] = str(REPO / "data" / "paper_reference.yaml")
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def _suite(tmp_path: Path, rollout_paths: list[Path]) -> Path:
    ids = sorted({p.parent.name for p in rollout_paths})
    tasks = [Task(t, "synthetic-cpp", "cpp", "int main(){}", description=f"task {t}") for t in ids]
    write_tasks_jsonl(tasks, tmp_path / "suite" / "tasks.jsonl")
    return tmp_path / "suite"


def test_dataset_command_reads_r2g_and_gamma_from_params(tmp_path, rollout_paths):
    root = rollout_paths[0].parents[3]  # <root>/<suite>/<method>/<task>/seed0.jsonl
    out = tmp_path / "ds"
    params = _params(tmp_path, test_fraction=0.4, seed=3)
    args = [
        "dataset",
        str(root),
        "--out",
        str(out),
        "--suite",
        str(_suite(tmp_path, rollout_paths)),
    ]
    result = runner.invoke(app, [*args, "--params", str(params)])
    assert result.exit_code == 0, result.output
    card = json.loads((out / "card.json").read_text())
    assert card["params"]["test_fraction"] == 0.4 and card["params"]["seed"] == 3
    assert card["params"]["gamma"] == 0.9  # search.gamma of the params file
    assert card["task_overlap"] == 0 and card["rollout_files"] == len(rollout_paths)
    first = json.loads((out / "train.jsonl").read_text().splitlines()[0])
    assert first["prompt"].startswith(f"### task\ntask {first['task_id']}\n")


@pytest.mark.parametrize("command", ["dataset", "train", "evaluate"])
def test_a_missing_params_file_is_one_line_and_exit_code_2(tmp_path, capsys, monkeypatch, command):
    from maxcode.cli import main

    monkeypatch.setattr(
        "sys.argv", ["maxcode", "r2g", command, "--params", str(tmp_path / "no.yaml")]
    )
    with pytest.raises(SystemExit) as exit_:
        main()
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.strip().count("\n") == 0 and "no.yaml: parameter file not found" in err


def test_a_bad_r2g_key_names_its_path(tmp_path, capsys, monkeypatch):
    from maxcode.cli import main

    params = _params(tmp_path, split_seed=1)
    monkeypatch.setattr("sys.argv", ["maxcode", "r2g", "train", "--params", str(params)])
    with pytest.raises(SystemExit) as exit_:
        main()
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "r2g.dataset: unknown key(s) 'split_seed'" in err and "Traceback" not in err


def test_without_rollouts_it_asks_for_the_plans_training_rollouts(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["dataset", "--params", str(_params(tmp_path))])
    assert result.exit_code != 0
    assert "rollouts of r2g.train_methods are not there yet" in str(result.exception)
    assert "results/rollouts/cpp_builtin/cuda-llm/" in str(result.exception)


def _stage_functions_called(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {
        a.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == "maxcode.stages.r2g"
        for a in node.names
    }


def test_the_command_and_the_rules_call_the_same_stage_functions():
    scripts = REPO / "workflow" / "scripts"
    by_rules = set().union(
        *(
            _stage_functions_called(scripts / f)
            for f in ("build_r2g_dataset.py", "train_r2g.py", "evaluate_r2g.py", "corpus.py")
        )
    )
    by_cli = _stage_functions_called(REPO / "src" / "maxcode" / "stages" / "r2g_cli.py")
    assert (
        by_rules
        == by_cli
        == {
            "dataset_stage",
            "train_stage",
            "ranking_stage",
            "corpus_ranking_stage",
        }
    )
