"""SFT and single-turn GRPO end to end on a tiny config-built model (CPU)."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from maxcode.evaluate.result import Status
from maxcode.kernelcompare.extract import extract_parboil
from maxcode.kernelcompare.grpo import KernelCompareGRPOConfig, KernelCompareReward, run_grpo
from maxcode.kernelcompare.records import write_dataset
from maxcode.kernelcompare.sft import KernelCompareSFTConfig, run_sft

PARBOIL = Path(__file__).parent / "fixtures" / "parboil"


def test_sft_config_defaults_are_the_reports_recipe():
    cfg = KernelCompareSFTConfig(output_dir="x", use_cpu=True)
    assert (cfg.lora_r, cfg.lora_alpha, cfg.lora_dropout) == (32, 64, 0.1)
    assert cfg.lora_target_modules == [
        "q_proj",
        "k_proj",
        "v_proj",
        "o_proj",
        "gate_proj",
        "up_proj",
        "down_proj",
    ]
    assert (cfg.learning_rate, cfg.per_device_train_batch_size, cfg.max_length) == (2e-4, 4, 4096)
    assert (cfg.num_train_epochs, cfg.warmup_steps, cfg.optim) == (8.0, 100, "adamw_torch")
    lora = cfg.lora_config()
    assert (lora.r, lora.lora_alpha, lora.lora_dropout) == (32, 64, 0.1)


@pytest.mark.slow
def test_sft_loss_goes_down_on_a_fixed_batch(tmp_path, tiny_model):
    pairs = tmp_path / "pairs.jsonl"
    write_dataset([extract_parboil(PARBOIL)], pairs, "You are a CUDA optimization expert.")
    cfg = KernelCompareSFTConfig(
        output_dir=str(tmp_path / "sft"),
        num_train_epochs=4,
        warmup_steps=0,
        learning_rate=3e-3,
        per_device_train_batch_size=2,  # both pairs in every step: the same batch each time
        max_length=512,
        use_cpu=True,
        lora_r=8,
        lora_alpha=16,
        lora_dropout=0.0,
        disable_tqdm=True,
    )
    metrics = run_sft(pairs, tiny_model, cfg, tmp_path / "sft")
    losses = metrics["losses"]
    assert len(losses) == 4 and losses[-1] < losses[0]
    assert all(b < a for a, b in itertools.pairwise(losses))
    assert metrics["tokens_per_second"] > 0
    assert (tmp_path / "sft" / "adapter_config.json").is_file()
    saved = json.loads((tmp_path / "sft" / "adapter_config.json").read_text())
    assert sorted(saved["target_modules"]) == sorted(cfg.lora_target_modules)


@pytest.mark.slow
def test_reward_is_point_four_compiles_point_four_correct_point_two_faster(
    cpp_tasks, cpp_evaluator, tmp_path
):
    task = cpp_tasks[0]
    reward = KernelCompareReward(cpp_tasks, cpp_evaluator, tmp_path / "log.jsonl")
    completions = [
        [{"role": "assistant", "content": f"```cpp\n{task.reference_source}\n```"}],
        [{"role": "assistant", "content": "```cpp\nint main() { return 0 }\n```"}],
        [
            {
                "role": "assistant",
                "content": '```cpp\n#include <cstdio>\nint main() { puts("x"); }\n```',
            }
        ],
        [{"role": "assistant", "content": "I would use a faster algorithm."}],
    ]
    values = reward([None] * 4, completions, [task.task_id] * 4, completion_ids=[[1, 2]] * 4)
    log = [json.loads(line) for line in (tmp_path / "log.jsonl").read_text().splitlines()]
    statuses = [Status(r["result"]["status"]) for r in log]
    assert statuses[1:] == [Status.COMPILE_ERROR, Status.WRONG_ANSWER, Status.NO_CODE]
    assert statuses[0] is Status.OK and values[0] in (0.8, 1.0)  # 1.0 only if measured faster
    assert values[1:] == [0.0, 0.4, 0.0]
    assert reward.completion_tokens == 8


@pytest.mark.slow
def test_grpo_completes_steps_from_the_sft_adapter(cpp_tasks, cpp_evaluator, tmp_path, tiny_model):
    pairs = tmp_path / "pairs.jsonl"
    write_dataset([extract_parboil(PARBOIL)], pairs, "sys")
    sft_cfg = KernelCompareSFTConfig(
        output_dir=str(tmp_path / "sft"),
        num_train_epochs=1,
        warmup_steps=0,
        max_length=512,
        use_cpu=True,
        lora_r=4,
        lora_alpha=8,
        disable_tqdm=True,
    )
    run_sft(pairs, tiny_model, sft_cfg, tmp_path / "sft")
    cfg = KernelCompareGRPOConfig(
        output_dir=str(tmp_path / "grpo"),
        max_steps=2,
        per_device_train_batch_size=4,
        num_generations=4,
        max_completion_length=16,
        use_cpu=True,
        disable_tqdm=True,
    )
    metrics = run_grpo(
        cpp_tasks, cpp_evaluator, tiny_model, cfg, tmp_path / "grpo", tmp_path / "sft"
    )
    assert metrics["steps"] == 2
    assert metrics["reward_calls"] == 2 and metrics["completion_tokens"] > 0
    assert len(metrics["rewards"]) == 2 and all(0.0 <= r <= 1.0 for r in metrics["rewards"])
    lines = (tmp_path / "grpo" / "evaluations.jsonl").read_text().splitlines()
    assert len(lines) == 8  # 2 steps x 4 completions, each evaluated
    assert {json.loads(x)["task_id"] for x in lines} <= {t.task_id for t in cpp_tasks}
    assert (tmp_path / "grpo" / "adapter_model.safetensors").is_file()


@pytest.mark.slow
def test_heldout_evaluation_feeds_the_table_and_resumes(cpp_tasks, cpp_evaluator, tmp_path):
    from maxcode.kernelcompare.grpo import single_turn_prompt
    from maxcode.kernelcompare.heldout import evaluate_stage
    from maxcode.kernelcompare.models import ModelSpec, load_model_and_tokenizer
    from maxcode.kernelcompare.table import kernelcompare_table, load_rows

    spec = ModelSpec(
        from_config={
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "num_key_value_heads": 1,
            "max_position_embeddings": 4096,
        },
        tokenizer_vocab_size=300,
    )
    corpus = [m["content"] for t in cpp_tasks for m in single_turn_prompt(t)]
    model, tokenizer = load_model_and_tokenizer(spec, corpus)
    out = tmp_path / "base.jsonl"
    args = ("base", "config-built", model, tokenizer)
    first = evaluate_stage(*args, cpp_tasks[:1], cpp_evaluator, out, max_new_tokens=8)
    both = evaluate_stage(*args, cpp_tasks, cpp_evaluator, out, max_new_tokens=8)
    assert [r["task_id"] for r in both] == [t.task_id for t in cpp_tasks]
    assert both[0] == first[0] and len(out.read_text().splitlines()) == 2  # resumed, not redone
    assert all(r["completion_tokens"] <= 8 for r in both)
    (row,) = load_rows({"base": out})
    assert row.tasks == 2 and row.correct == sum(r["result"]["status"] == "ok" for r in both)
    assert "| base | config-built | 2 |" in kernelcompare_table([row]).markdown()
