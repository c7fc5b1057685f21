"""Stage 2: single-turn GRPO (TRL's GRPOTrainer) with execution feedback as the reward.

Each prompt is the project's generator prompt for one training task with no history
(single turn); each completion is evaluated by an ``Evaluator`` and scored with
``reward_of(result, "kernelcompare")``: 0.4 compiles + 0.4 correct + 0.2 faster.
"""

from __future__ import annotations

import json
import resource
import time
from dataclasses import dataclass, field
from pathlib import Path

from trl import GRPOConfig

from maxcode.evaluate.result import EvalResult, Status, reward_of
from maxcode.kernelcompare.models import ModelSpec, load_model_and_tokenizer
from maxcode.kernelcompare.sft import LoraFields
from maxcode.llm.extract import extract_code
from maxcode.policy.prompts import generator_prompt
from maxcode.records import JsonlWriter, atomic_write_json, code_version, hardware_fingerprint
from maxcode.search.types import Evaluator, Observation
from maxcode.tasks.model import Task

METHOD = "kernelcompare-grpo"


@dataclass
class KernelCompareGRPOConfig(LoraFields, GRPOConfig):
    """TRL's GRPOConfig; only the fields the report fixes or the stage needs differ."""

    beta: float = field(
        default=0.04,
        metadata={
            "help": "KL penalty against the frozen reference (the SFT policy with adapters "
            "off); the report keeps a frozen copy for this penalty, so it is not 0"
        },
    )
    logging_steps: float = field(default=1, metadata={"help": "log rewards every n steps"})
    save_strategy: str = field(
        default="no", metadata={"help": "the stage saves the adapter itself"}
    )
    activation_checkpointing: bool | None = field(
        default=False, metadata={"help": "trade compute for memory on long sequences"}
    )
    gradient_checkpointing: bool | None = field(
        default=None, metadata={"help": "deprecated alias of activation_checkpointing"}
    )

    def __post_init__(self) -> None:
        self.check_lora("kernelcompare.grpo")
        super().__post_init__()


def single_turn_prompt(task: Task) -> list[dict]:
    """The generator prompt at step 0: the task alone, no trajectory, critique or best."""
    obs = Observation(
        task=task,
        step=0,
        depth=1,
        trajectory=[],
        best=None,
        best_discounted_reward=0.0,
        include_critique=False,
        method=METHOD,
        include_trajectory=False,
    )
    return generator_prompt(obs).messages


def _completion_text(completion: object) -> str:
    if isinstance(completion, list):  # conversational: a list of messages
        return "".join(m.get("content", "") for m in completion if m.get("role") == "assistant")
    return str(completion)


class KernelCompareReward:
    """TRL reward function: evaluate each completion on its task; log every evaluation."""

    __name__ = "kernelcompare_reward"  # TRL names the logged reward column after it

    def __init__(self, tasks: list[Task], evaluator: Evaluator, log_path: Path | None = None):
        self.tasks = {t.task_id: t for t in tasks}
        self.evaluator = evaluator
        self.log = JsonlWriter(log_path) if log_path is not None else None
        self.calls = 0
        self.completion_tokens = 0  # generated tokens seen, for the throughput figure

    def __call__(
        self,
        prompts: list,
        completions: list,
        task_id: list[str],
        completion_ids: list[list[int]] | None = None,
        **_: object,
    ) -> list[float]:
        self.completion_tokens += sum(len(ids) for ids in completion_ids or [])
        rewards = []
        for completion, tid in zip(completions, task_id, strict=True):
            task = self.tasks[tid]
            found = extract_code(_completion_text(completion), task.language)
            if found.source is None:
                result = EvalResult(Status.NO_CODE, found.reason, evaluator=self.evaluator.name)
            else:
                result = self.evaluator.evaluate(task, found.source)
            reward = reward_of(result, "kernelcompare")
            rewards.append(reward)
            if self.log is not None:
                self.log.write(
                    {
                        "call": self.calls,
                        "task_id": tid,
                        "reward": reward,
                        "result": result.to_dict(),
                    }
                )
        self.calls += 1
        return rewards

    def close(self) -> None:
        if self.log is not None:
            self.log.close()


def tasks_to_dataset(tasks: list[Task]):
    from datasets import Dataset

    if not tasks:
        raise ValueError("no training tasks for GRPO; check the split file's train list")
    return Dataset.from_list(
        [{"prompt": single_turn_prompt(t), "task_id": t.task_id} for t in tasks]
    )


def run_grpo(
    tasks: list[Task],
    evaluator: Evaluator,
    model_spec: ModelSpec,
    config: KernelCompareGRPOConfig,
    out_dir: Path,
    init_adapter: Path | None = None,
) -> dict:
    """Train on ``tasks`` (the split's train ids) starting from the SFT adapter if given."""
    import torch
    from trl import GRPOTrainer

    out_dir = Path(out_dir)
    dataset = tasks_to_dataset(tasks)
    corpus = [m["content"] for row in dataset["prompt"] for m in row]
    peft_config = config.lora_config()
    if init_adapter is None:
        model, tokenizer = load_model_and_tokenizer(model_spec, corpus)
    else:
        from peft import PeftModel
        from transformers import AutoTokenizer

        saved = AutoTokenizer.from_pretrained(str(init_adapter))
        model, tokenizer = load_model_and_tokenizer(model_spec, corpus, tokenizer=saved)
        model = PeftModel.from_pretrained(model, str(init_adapter), is_trainable=True)
        peft_config = None
    reward = KernelCompareReward(tasks, evaluator, out_dir / "evaluations.jsonl")
    config.output_dir = str(out_dir)
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=reward,
        args=config,
        train_dataset=dataset,
        processing_class=tokenizer,
        peft_config=peft_config,
    )
    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    try:
        trainer.train()
    finally:
        reward.close()
    seconds = time.perf_counter() - start
    history = trainer.state.log_history
    trainer.save_model(str(out_dir))
    tokenizer.save_pretrained(str(out_dir))
    metrics = {
        "stage": "grpo",
        "tasks": len(tasks),
        "steps": trainer.state.global_step,
        "reward_calls": reward.calls,
        "completion_tokens": reward.completion_tokens,
        "train_seconds": seconds,
        "completion_tokens_per_second": reward.completion_tokens / seconds if seconds > 0 else None,
        "rewards": [e["reward"] for e in history if "reward" in e],
        "peak_memory_bytes": torch.cuda.max_memory_allocated()
        if torch.cuda.is_available()
        else None,
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "device": "cuda" if torch.cuda.is_available() else "cpu",
        "evaluator": evaluator.name,
        "hardware": hardware_fingerprint(),
        "code_version": code_version(),
        "config": json.loads(config.to_json_string()),
    }
    atomic_write_json(out_dir / "metrics.json", metrics)
    return metrics
