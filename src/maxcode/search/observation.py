"""Build the policy's observation from the attempts so far, with components as switches.

The three MaxCode components map to ``MethodConfig`` fields: ``trajectory`` (previous
attempts with feedback), ``critique`` (a natural-language critique per attempt) and
``best`` (best-performing code so far with its feedback).
"""

from __future__ import annotations

from dataclasses import replace

from maxcode.evaluate.result import EvalResult, Status
from maxcode.search.config import MethodConfig
from maxcode.search.types import Attempt, Observation
from maxcode.tasks.model import Task


def build_observation(
    task: Task,
    method: MethodConfig,
    step: int,
    history: list[Attempt],
    best: Attempt | None,
    best_discounted_reward: float,
) -> Observation:
    shown = select_trajectory(history, method.trajectory)
    if method.trajectory == "none" and method.critique:
        # Critique-only: the critiques of the last step's attempts, without their code.
        shown = [a for a in history if a.step == step - 1]
    if not method.critique:
        shown = [replace(a, critique=None) for a in shown]
    return Observation(
        task=task,
        step=step,
        depth=method.depth,
        trajectory=shown,
        best=(
            replace(best, critique=best.critique if method.critique else None)
            if method.best and best
            else None
        ),
        best_discounted_reward=best_discounted_reward,
        include_critique=method.critique,
        method=method.name,
        include_trajectory=method.trajectory != "none",
    )


def select_trajectory(history: list[Attempt], mode: str) -> list[Attempt]:
    if mode == "none" or not history:
        return []
    if mode == "all":
        return list(history)
    if mode == "last":
        last_step = history[-1].step
        return [a for a in history if a.step == last_step]
    if mode == "best_per_step":
        per_step: dict[int, Attempt] = {}
        for a in history:
            cur = per_step.get(a.step)
            if cur is None or a.reward > cur.reward:
                per_step[a.step] = a
        return [per_step[s] for s in sorted(per_step)]
    raise ValueError(f"unknown trajectory mode {mode!r}")


def format_feedback(result: EvalResult, max_chars: int = 600) -> str:
    """Execution feedback as the papers describe it: compiled, correct, speed, first error."""
    compiled = result.status.compiled
    correct = result.status.correct
    parts = [f"compiled={compiled}", f"correctness={correct}", f"status={result.status.value}"]
    if result.speedup is not None and result.timing is not None:
        t = result.timing
        parts.append(
            f"speedup={result.speedup:.3f}x ({t.mode}: candidate {t.candidate:.4g} {t.unit}"
            f" vs reference {t.reference:.4g} {t.unit})"
        )
    if result.status is not Status.OK and result.reason:
        parts.append(f"reason: {result.reason}")
    if result.status is Status.COMPILE_ERROR and result.compile_log:
        parts.append("compiler: " + result.compile_log.strip().splitlines()[0])
    text = "; ".join(parts)
    return text if len(text) <= max_chars else text[: max_chars - 3] + "..."


def observation_summary(obs: Observation) -> str:
    """Compact text of an observation (no code): what the reward-to-go model conditions on."""
    lines = [
        f"task={obs.task.task_id} suite={obs.task.suite} step={obs.step + 1}/{obs.depth}",
        f"best_discounted_reward={obs.best_discounted_reward:.3f}",
    ]
    if obs.best is not None:
        lines.append(f"best: reward={obs.best.reward:.3f}; {format_feedback(obs.best.result, 200)}")
    for a in obs.trajectory[-6:]:
        line = (
            f"attempt s{a.step}#{a.index}: reward={a.reward:.3f}; {format_feedback(a.result, 160)}"
        )
        if a.critique is not None:
            line += " | critique: " + a.critique.text.strip().splitlines()[0][:160]
        lines.append(line)
    return "\n".join(lines)
