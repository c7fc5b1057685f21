"""Evaluate one training stage (base, +SFT, +GRPO) on the held-out tasks.

One greedy completion per task from the same single-turn prompt GRPO trains on,
evaluated by the same evaluator; each line records the result the table reads.
"""

from __future__ import annotations

from pathlib import Path

from maxcode.evaluate.result import EvalResult, Status, reward_of
from maxcode.kernelcompare.grpo import single_turn_prompt
from maxcode.llm.extract import extract_code
from maxcode.records import JsonlWriter, read_jsonl
from maxcode.search.types import Evaluator
from maxcode.tasks.model import Task


def evaluate_stage(
    stage: str,
    model_label: str,
    model,
    tokenizer,
    tasks: list[Task],
    evaluator: Evaluator,
    out: Path,
    max_new_tokens: int,
) -> list[dict]:
    """Append one record per task to ``out``; tasks already there are skipped (resumable)."""
    import torch

    records = list(read_jsonl(Path(out)))
    done = {r["task_id"] for r in records}
    model.eval()
    with JsonlWriter(Path(out)) as writer:
        for task in tasks:
            if task.task_id in done:
                continue
            prompt_ids = tokenizer.apply_chat_template(
                single_turn_prompt(task), add_generation_prompt=True, return_tensors="pt"
            )
            if not isinstance(prompt_ids, torch.Tensor):
                prompt_ids = prompt_ids["input_ids"]
            prompt_ids = prompt_ids.to(model.device)
            with torch.no_grad():
                output = model.generate(
                    prompt_ids,
                    max_new_tokens=max_new_tokens,
                    do_sample=False,
                    pad_token_id=tokenizer.pad_token_id,
                )
            new_tokens = output[0, prompt_ids.shape[1] :]
            truncated = len(new_tokens) >= max_new_tokens
            text = tokenizer.decode(new_tokens, skip_special_tokens=True)
            found = extract_code(text, task.language, truncated=truncated)
            if found.source is None:
                result = EvalResult(Status.NO_CODE, found.reason, evaluator=evaluator.name)
            else:
                result = evaluator.evaluate(task, found.source)
            record = {
                "stage": stage,
                "model": model_label,
                "task_id": task.task_id,
                "completion_tokens": len(new_tokens),
                "reward": reward_of(result, "kernelcompare"),
                "result": result.to_dict(),
            }
            writer.write(record)
            records.append(record)
    return records
