"""Read finished rollout files into one row per run: all tables start here."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from maxcode.errors import RolloutIncompleteError
from maxcode.llm.usage import Usage
from maxcode.search.records import CandidateRecord, RunEnd, RunStart, StepEnd, read_records


@dataclass(frozen=True)
class RunRow:
    suite: str
    task_id: str
    method: str
    seed: int
    best_reward: float
    best_after_step: tuple[float, ...]  # best reward after each step (never decreasing)
    executed_per_step: int
    evaluations: int
    candidates: int
    correct_candidates: int
    usage: Usage
    wall_s: float
    policy: str
    policy_offline: bool
    critic: str | None
    critic_offline: bool | None
    evaluator: str
    hardware: dict
    stopped_by: str


def read_run(path: Path) -> RunRow:
    records = read_records(path)
    start, end = (records[0], records[-1]) if records else (None, None)
    if not isinstance(start, RunStart) or not isinstance(end, RunEnd):
        raise RolloutIncompleteError(
            f"{path}: not a finished rollout (needs run_start ... run_end); rerun its job"
        )
    run, config = start.run, start.config
    steps = [r.best_reward for r in records if isinstance(r, StepEnd)]
    candidates = [r for r in records if isinstance(r, CandidateRecord)]
    return RunRow(
        suite=run.suite,
        task_id=run.task_id,
        method=run.method,
        seed=run.seed,
        best_reward=end.best_reward,
        best_after_step=tuple(steps),
        executed_per_step=config.get("execute_top_m") or config["k"],
        evaluations=end.evaluations,
        candidates=len(candidates),
        correct_candidates=sum(1 for r in candidates if r.status == "ok"),
        usage=end.usage,
        wall_s=end.wall_s,
        policy=start.policy["name"],
        policy_offline=start.policy["offline"],
        critic=(start.critic or {}).get("name"),
        critic_offline=(start.critic or {}).get("offline"),
        evaluator=start.evaluator,
        hardware=start.provenance.get("hardware", {}),
        stopped_by=end.stopped_by,
    )


def read_runs(paths: list[Path]) -> list[RunRow]:
    return [read_run(Path(p)) for p in paths]
