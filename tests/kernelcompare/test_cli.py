"""The CLI wires params.yaml into the stages; errors name the bad key or path."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from maxcode.pipeline import KC_PAIRS, KC_SPLIT, SUITE_DIR
from maxcode.stages.kernelcompare_cli import app
from maxcode.tasks.model import Task, write_tasks_jsonl

FIXTURES = Path(__file__).parent / "fixtures"
runner = CliRunner()


def _params(tmp_path: Path, block: dict) -> Path:
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump({"kernelcompare": block}))
    return path


def test_extract_writes_pairs_stats_and_card(tmp_path):
    params = _params(tmp_path, {"extract": {"compile_check": False}})
    out = tmp_path / "kc" / "pairs.jsonl"
    result = runner.invoke(
        app,
        [
            "extract",
            "--parboil",
            str(FIXTURES / "parboil"),
            "--rodinia",
            str(FIXTURES / "rodinia"),
            "--out",
            str(out),
            "--params",
            str(params),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "parboil: raw 7, kept 2" in result.output
    assert "rodinia: raw 4, kept 2" in result.output  # without the compile check bad.cu stays
    lines = out.read_text().splitlines()
    assert [json.loads(x)["suite"] for x in lines] == ["parboil", "parboil", "rodinia", "rodinia"]
    stats = json.loads(out.with_suffix(".stats.json").read_text())
    assert stats["suites"]["rodinia"]["dropped"] == {"mostly_host": 1, "no_naive_variant": 1}


def test_unknown_param_key_is_named(tmp_path):
    params = _params(tmp_path, {"extract": {"compile_chek": False}})
    result = runner.invoke(
        app,
        [
            "extract",
            "--parboil",
            str(FIXTURES / "parboil"),
            "--out",
            str(tmp_path / "p.jsonl"),
            "--params",
            str(params),
        ],
    )
    assert result.exit_code != 0
    assert "did you mean 'compile_check'" in str(result.exception)


def test_missing_tree_is_named(tmp_path):
    result = runner.invoke(
        app,
        [
            "extract",
            "--parboil",
            str(tmp_path / "nowhere"),
            "--out",
            str(tmp_path / "p.jsonl"),
            "--params",
            str(_params(tmp_path, {})),
        ],
    )
    assert result.exit_code != 0 and str(tmp_path / "nowhere") in str(result.exception)


def test_split_command_writes_the_reports_split(tmp_path):
    tasks = [
        Task(
            task_id=f"kernelbench-L1-{i}",
            suite="kernelbench",
            language="cuda",
            reference_source="x",
        )
        for i in range(1, 101)
    ]
    write_tasks_jsonl(tasks, tmp_path / "tasks.jsonl")
    out = tmp_path / "split.json"
    result = runner.invoke(
        app,
        [
            "split",
            "--tasks",
            str(tmp_path / "tasks.jsonl"),
            "--out",
            str(out),
            "--params",
            str(_params(tmp_path, {})),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "train 80, test 20, fingerprint 0991ecfbc451937c" in result.output
    assert json.loads(out.read_text())["seed"] == 42


def test_paths_left_out_are_the_pipelines(tmp_path, monkeypatch):
    """Without --tasks and --out the commands read and write what their rules do: the
    tasks of kernelcompare.sources.suite, and the plan's pairs and split files."""
    monkeypatch.chdir(tmp_path)
    tasks = [
        Task(task_id=f"t{i}", suite="kb", language="cuda", reference_source="x") for i in range(10)
    ]
    write_tasks_jsonl(tasks, Path(SUITE_DIR.format(suite="kb")) / "tasks.jsonl")
    sources = {"parboil": str(FIXTURES / "parboil"), "suite": "kb"}
    params = ["--params", str(_params(tmp_path, {"sources": sources}))]
    result = runner.invoke(app, ["split", *params])
    assert result.exit_code == 0, result.output
    assert len(json.loads(Path(KC_SPLIT).read_text())["test"]) == 2
    result = runner.invoke(app, ["extract", "--parboil", sources["parboil"], *params])
    assert result.exit_code == 0, result.output
    assert Path(KC_PAIRS).is_file()

    no_sources = ["--params", str(_params(tmp_path, {}))]
    result = runner.invoke(app, ["split", *no_sources])
    assert "kernelcompare.sources" in str(result.exception)


def test_extract_with_the_llm_generator_role(tmp_path, fake_llm_server, api_keys):
    params = tmp_path / "params.yaml"
    params.write_text(
        yaml.safe_dump(
            {
                "llm": {
                    "generator": {
                        "backend": "openai",
                        "model": "fake-model",
                        "base_url": fake_llm_server.openai_base_url,
                    }
                },
                "kernelcompare": {"extract": {"compile_check": False, "naive_generator": "llm"}},
            }
        )
    )
    out = tmp_path / "pairs.jsonl"
    args = ["extract", "--rodinia", str(FIXTURES / "rodinia"), "--out", str(out)]
    args += ["--params", str(params), "--llm-cache", str(tmp_path / "cache")]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    stats = json.loads(out.with_suffix(".stats.json").read_text())
    assert stats["suites"]["rodinia"]["dropped"] == {"mostly_host": 1, "no_naive_variant": 3}
    assert fake_llm_server.count() == 3
    assert runner.invoke(app, args).exit_code == 0 and fake_llm_server.count() == 3  # cached


@pytest.mark.slow
def test_sft_grpo_heldout_table_commands_chain(tmp_path, cpp_tasks):
    """The stages as the workflow calls them, on a tiny model and two C++ tasks."""
    model = {
        "from_config": {
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "num_key_value_heads": 1,
            "max_position_embeddings": 4096,
        },
        "tokenizer_vocab_size": 300,
    }
    tiny = {"use_cpu": True, "disable_tqdm": True, "lora_r": 4, "lora_alpha": 8}
    params = tmp_path / "params.yaml"
    params.write_text(
        yaml.safe_dump(
            {
                "evaluation": {"cpp": {"repeats": 1, "workers": 1}},
                "kernelcompare": {
                    "extract": {"compile_check": False},
                    "split": {"train_fraction": 0.5},
                    "model": model,
                    "sft": {**tiny, "num_train_epochs": 1, "warmup_steps": 0, "max_length": 2048},
                    "grpo": {
                        **tiny,
                        "max_steps": 1,
                        "num_generations": 2,
                        "per_device_train_batch_size": 2,
                        "max_completion_length": 8,
                    },
                    "heldout": {"max_new_tokens": 8},
                },
            }
        )
    )
    write_tasks_jsonl(cpp_tasks, tmp_path / "tasks.jsonl")
    p = ["--params", str(params)]
    steps = [
        ["extract", "--parboil", str(FIXTURES / "parboil"), "--out", str(tmp_path / "pairs.jsonl")],
        ["split", "--tasks", str(tmp_path / "tasks.jsonl"), "--out", str(tmp_path / "split.json")],
        ["sft", "--pairs", str(tmp_path / "pairs.jsonl"), "--out", str(tmp_path / "sft")],
        [
            "grpo",
            "--tasks",
            str(tmp_path / "tasks.jsonl"),
            "--split",
            str(tmp_path / "split.json"),
            "--out",
            str(tmp_path / "grpo"),
            "--init-adapter",
            str(tmp_path / "sft"),
            "--cache-dir",
            str(tmp_path / "cache"),
        ],
    ]
    for stage, adapter in (("base", None), ("+SFT", "sft"), ("+GRPO", "grpo")):
        step = [
            "heldout",
            "--stage",
            stage,
            "--tasks",
            str(tmp_path / "tasks.jsonl"),
            "--split",
            str(tmp_path / "split.json"),
            "--out",
            str(tmp_path / f"{adapter}.jsonl"),
            "--cache-dir",
            str(tmp_path / "cache"),
        ]
        steps.append(step + (["--adapter", str(tmp_path / adapter)] if adapter else []))
    for step in steps:
        result = runner.invoke(app, step + p)
        assert result.exit_code == 0, (step[0], result.output, result.exception)
    table = ["table", "--out", str(tmp_path / "kc")]
    for stage, name in (("base", "None"), ("+SFT", "sft"), ("+GRPO", "grpo")):
        table += ["--stage", f"{stage}={tmp_path / name}.jsonl"]
    result = runner.invoke(app, table)
    assert result.exit_code == 0, result.output
    md = (tmp_path / "kc.md").read_text()
    body = [line.split(" | ")[0] for line in md.splitlines() if line.startswith("| ")][1:]
    assert body == ["| base", "| +SFT", "| +GRPO"]
    assert (tmp_path / "kc.csv").is_file() and (tmp_path / "kc.tex").is_file()
