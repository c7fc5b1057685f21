"""The MaxCode loop: observe, propose k, (rerank and) execute m, critique, keep the best.

One call runs one unit of work (task x method x seed) and writes every candidate to
an append-only JSONL file (docs/records.md). A rerun replays the finished steps from
that file and continues with the first unfinished one, so a kill loses at most the
step in flight, whose LLM calls and evaluations the caches then replay.
"""

from __future__ import annotations

import hashlib
import json
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from maxcode.errors import BudgetExhausted, RunMismatch
from maxcode.evaluate.result import EvalResult, Status, reward_of
from maxcode.llm.usage import Usage
from maxcode.records import JsonlWriter, atomic_write_text, sha256_text
from maxcode.search.config import MethodConfig
from maxcode.search.observation import build_observation, observation_summary
from maxcode.search.records import (
    REFERENCE_ID,
    CandidateRecord,
    Record,
    RunEnd,
    RunExtend,
    RunId,
    RunStart,
    StepEnd,
    read_record_lines,
)
from maxcode.search.returns import step_returns
from maxcode.search.types import (
    Attempt,
    Critic,
    Critique,
    Evaluator,
    Observation,
    Policy,
    Proposal,
    Reranker,
)
from maxcode.tasks.model import Task

if TYPE_CHECKING:
    from maxcode.llm.client import BudgetTracker


def candidate_id(source: str) -> str:
    return sha256_text(source)[:16]


def step_seed(seed: int, task_id: str, method: str, step: int) -> int:
    """Per-step RNG seed: a resumed run draws exactly what the first run drew."""
    digest = hashlib.sha256(f"{seed}|{task_id}|{method}|{step}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


@dataclass
class SearchState:
    history: list[Attempt] = field(default_factory=list)
    best: Attempt | None = None
    step_rewards: list[float] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    evaluations: int = 0
    wall_s: float = 0.0

    @property
    def next_step(self) -> int:
        return len(self.step_rewards)

    def best_discounted_reward(self, gamma: float) -> float:
        """max_{j<t} gamma^(t-1-j) r_j: the best reward seen, discounted by its age."""
        t = len(self.step_rewards)
        return max((gamma ** (t - 1 - j) * r for j, r in enumerate(self.step_rewards)), default=0.0)


@dataclass
class RunContext:
    task: Task
    method: MethodConfig
    seed: int
    policy: Policy
    evaluator: Evaluator
    critic: Critic | None = None
    reranker: Reranker | None = None
    reward_kind: str = "speedup"
    provenance: dict = field(default_factory=dict)
    on_event: Callable[[str, dict], None] | None = None  # live views subscribe here
    # The run's LLM limits shared by every role (worst case checked before each call).
    llm_budget: BudgetTracker | None = None
    # What a resume must match besides the method (maxcode optimize: target, tests, settings).
    fingerprint: dict = field(default_factory=dict)


def run_search(ctx: RunContext, out_path: Path) -> dict:
    """Run, resume or extend one rollout; returns the newest ``run_end`` record.

    The file is read as typed records (:mod:`maxcode.search.records`); a malformed one
    raises ``RolloutFormatError`` naming the file, line and field, before anything is
    written. Records on disk are never rewritten except to set aside, line for line, a
    step that was in flight (to ``<out>.dropped.jsonl``); records of another run raise
    :class:`RunMismatch`. A finished run whose depth or budget has grown goes on after a
    ``run_extend`` record.
    """
    out_path = Path(out_path)
    _check_parts(ctx)
    lines = read_record_lines(out_path)
    existing = [record for record, _ in lines]
    if existing:
        found = run_differences(existing, ctx)
        if found:
            raise RunMismatch(out_path, found)
    kept = _complete_steps(existing)
    if len(kept) != len(existing):
        # The step in flight is replayed from the caches; its records are kept aside.
        with JsonlWriter(out_path.with_name(out_path.name + ".dropped.jsonl")) as aside:
            for _, line in lines[len(kept) :]:
                aside.write_line(line)
        atomic_write_text(out_path, "".join(line for _, line in lines[: len(kept)]))
    method = ctx.method
    grown = bool(kept) and _growable(latest_config(kept)) != _growable(method.to_dict())
    if kept and isinstance(kept[-1], RunEnd) and not grown:
        return kept[-1].to_dict()
    state = replay_state(kept, method.gamma)
    if ctx.llm_budget is not None:
        ctx.llm_budget.start_from(state.usage)
    if kept:
        _emit(
            ctx,
            "resume",
            {
                "steps": state.next_step,
                "evaluations": state.evaluations,
                "best_reward": state.best.reward if state.best else 0.0,
                "set_aside": len(existing) - len(kept),
                "extended": grown,
            },
        )

    started = time.monotonic() - state.wall_s
    with JsonlWriter(out_path) as writer:
        if not kept:
            writer.write(_run_start_record(ctx).to_dict())
        elif grown:
            writer.write(
                RunExtend(
                    after_step=state.next_step, config=method.to_dict(), provenance=ctx.provenance
                ).to_dict()
            )
        stopped_by = "depth"
        for step in range(state.next_step, method.depth):
            limit = _budget_hit(method, state, time.monotonic() - started)
            if limit:
                stopped_by = limit
                break
            try:
                exhausted = _run_step(ctx, state, step, writer)
            except BudgetExhausted as err:  # before any candidate of the step was recorded
                stopped_by = f"budget: {err}"
                break
            state.wall_s = time.monotonic() - started
            writer.write(
                StepEnd(
                    step=step,
                    step_reward=state.step_rewards[-1],
                    best_reward=state.best.reward if state.best else 0.0,
                    best_candidate_id=state.best.candidate_id if state.best else None,
                    usage=state.usage,
                    evaluations=state.evaluations,
                    wall_s=state.wall_s,
                ).to_dict()
            )
            _emit(
                ctx,
                "step_end",
                {"step": step, "best_reward": state.best.reward if state.best else 0.0},
            )
            if exhausted is not None:  # the step's candidates are recorded, some uncritiqued
                stopped_by = f"budget: {exhausted}"
                break
            if (
                method.target_speedup is not None
                and state.best
                and state.best.reward >= method.target_speedup
            ):
                stopped_by = "target"
                break
        end = RunEnd(
            best_reward=state.best.reward if state.best else 0.0,
            best_candidate_id=state.best.candidate_id if state.best else None,
            step_rewards=state.step_rewards,
            step_returns=step_returns(state.step_rewards, method.gamma),
            stopped_by=stopped_by,
            usage=state.usage,
            evaluations=state.evaluations,
            wall_s=time.monotonic() - started,
        ).to_dict()
        writer.write(end)
    _emit(ctx, "run_end", end)
    return end


def _run_step(
    ctx: RunContext, state: SearchState, step: int, writer: JsonlWriter
) -> BudgetExhausted | None:
    """One step; a budget hit while critiquing records the rest uncritiqued and is returned."""
    method, task = ctx.method, ctx.task
    exhausted: BudgetExhausted | None = None
    rng = random.Random(step_seed(ctx.seed, task.task_id, method.name, step))
    obs = build_observation(
        task, method, step, state.history, state.best, state.best_discounted_reward(method.gamma)
    )
    _emit(ctx, "propose", {"step": step, "k": method.k, "m": method.executed_per_step})
    proposals = ctx.policy.propose(obs, method.k, rng)
    if len(proposals) != method.k:
        raise RuntimeError(
            f"policy {ctx.policy.name} returned {len(proposals)} proposals, expected k={method.k}"
        )
    for p in proposals:
        state.usage = state.usage + p.usage
    chosen, scores = _choose_executed(ctx, obs, proposals, rng)
    idle = [p.reason for p in proposals if p.source is None and p.reason]
    _emit(ctx, "evaluate", {"step": step, "n": len(chosen), "reasons": idle})
    results = _evaluate(ctx, [proposals[i] for i in chosen])
    parent = state.best.candidate_id if state.best else REFERENCE_ID
    obs_text = observation_summary(obs)
    step_best = 0.0
    executed = dict(zip(chosen, results, strict=True))
    for i, p in enumerate(proposals):
        result = executed.get(i) or _unexecuted_result(p)
        was_executed = i in executed and p.source is not None
        reward = reward_of(result, ctx.reward_kind) if (was_executed or p.source is None) else None
        critique = None
        if was_executed and method.critique and ctx.critic is not None and exhausted is None:
            try:
                critique = ctx.critic.critique(task, p.source, result)
                state.usage = state.usage + critique.usage
            except BudgetExhausted as err:
                exhausted = err
        cid = candidate_id(p.source) if p.source is not None else None
        record = CandidateRecord(
            step=step,
            proposal_index=i,
            candidate_id=cid,
            parent_id=parent,
            source=p.source,
            executed=was_executed,
            rerank_score=scores[i].value if scores else None,
            rerank_fallback=scores[i].fallback if scores else None,
            evaluation=result.to_dict() if (was_executed or p.source is None) else None,
            reward=reward,
            critique=_critique_dict(critique),
            observation_text=obs_text,
            best_discounted_reward=obs.best_discounted_reward,
            usage=p.usage,
            prompt_version=p.prompt_version,
            meta=p.meta,
        )
        writer.write(record.to_dict())
        if was_executed:
            state.evaluations += 1
            attempt = _attempt_from_record(record)
            state.history.append(attempt)
            step_best = max(step_best, attempt.reward)
            if _improves(attempt, state.best):
                state.best = attempt
            _emit(
                ctx,
                "candidate",
                {
                    "step": step,
                    "index": i,
                    "status": result.status.value,
                    "reward": reward,
                    "critique": critique.text if critique else None,
                    "usage": state.usage.to_dict(),
                    "evaluations": state.evaluations,
                    "candidate_id": cid,
                    "source": p.source,
                },
            )
    state.step_rewards.append(step_best)
    return exhausted


def _choose_executed(
    ctx: RunContext, obs: Observation, proposals: list[Proposal], rng: random.Random
) -> tuple[list[int], list | None]:
    """Indices of proposals to execute: all, the reranker's top m, or a random m."""
    method = ctx.method
    with_code = [i for i, p in enumerate(proposals) if p.source is not None]
    m = method.executed_per_step
    if method.rerank == "none" or len(with_code) <= m:
        return with_code[:m], None
    if method.rerank == "random":
        return sorted(rng.sample(with_code, m)), None
    assert ctx.reranker is not None  # checked in _check_parts
    scores = ctx.reranker.score(obs, proposals)
    ranked = sorted(with_code, key=lambda i: (-scores[i].value, i))
    return sorted(ranked[:m]), scores


def _evaluate(ctx: RunContext, proposals: list[Proposal]) -> list[EvalResult]:
    sources = [p.source for p in proposals if p.source is not None]
    many = getattr(ctx.evaluator, "evaluate_many", None)
    if many is not None and len(sources) > 1:
        return list(many(ctx.task, sources))
    return [ctx.evaluator.evaluate(ctx.task, s) for s in sources]


def _unexecuted_result(p: Proposal) -> EvalResult:
    if p.source is None:
        status = Status.UNSUPPORTED if p.status_hint == "unsupported" else Status.NO_CODE
        return EvalResult(status=status, reason=p.reason or status.value, evaluator="none")
    return EvalResult(status=Status.NO_CODE, reason="not executed (reranked out)", evaluator="none")


def _improves(attempt: Attempt, best: Attempt | None) -> bool:
    """Strictly better reward; a failed candidate (reward 0) never becomes best."""
    if attempt.reward <= 0.0:
        return False
    return best is None or attempt.reward > best.reward


def _budget_hit(method: MethodConfig, state: SearchState, wall_s: float) -> str | None:
    b = method.budget
    u = state.usage
    checks = [
        ("evaluations", b.max_evaluations, state.evaluations + method.executed_per_step),
        ("llm_calls", b.max_llm_calls, u.calls + 1),
        ("tokens", b.max_tokens, u.input_tokens + u.output_tokens),
        ("cost_usd", b.max_cost_usd, u.cost_usd),
        ("wall_s", b.max_wall_s, wall_s),
    ]
    for name, limit, value in checks:
        if limit is not None and value > limit:
            return f"budget: {name}"
    return None


def _check_parts(ctx: RunContext) -> None:
    if ctx.method.rerank == "model" and ctx.reranker is None:
        raise ValueError(
            f"method {ctx.method.name!r} reranks with a model but no reranker was given"
        )
    if ctx.method.critique and ctx.critic is None:
        raise ValueError(f"method {ctx.method.name!r} shows critiques but no critic was given")


# ---- replay -------------------------------------------------------------------------


GROWABLE = ("depth", "budget")  # a resumed run may change these: it goes on, or stops sooner
_COMPARED = ("run", "reward_kind", "policy", "critic", "reranker", "evaluator", "task_hash")


def run_differences(records: list[Record], ctx: RunContext) -> list[str]:
    """What makes ``records`` another run than ``ctx`` would make (empty: resumable)."""
    first = records[0]
    if not isinstance(first, RunStart):
        return ["the file does not start with a run_start record"]
    old, new = first.to_dict(), _run_start_record(ctx).to_dict()
    found: list[str] = []
    for key in ("fingerprint", *_COMPARED):
        found += differences(key, old[key], new[key])
    old_config = {k: v for k, v in latest_config(records).items() if k not in GROWABLE}
    new_config = {k: v for k, v in new["config"].items() if k not in GROWABLE}
    found += differences("config", old_config, new_config)
    done = sum(isinstance(r, StepEnd) for r in records)
    if ctx.method.depth < done:
        found.append(f"depth: {ctx.method.depth} now, but the records hold {done} steps")
    return found


def differences(key: str, old: object, new: object) -> list[str]:
    """``key.sub: old in the records, new now`` for each leaf that differs."""
    old, new = _normalized(old), _normalized(new)
    if old == new:
        return []
    if isinstance(old, dict) and isinstance(new, dict):
        return [
            d
            for sub in sorted(set(old) | set(new))
            for d in differences(f"{key}.{sub}", old.get(sub), new.get(sub))
        ]
    return [f"{key}: {old!r} in the records, {new!r} now"]


def latest_config(records: list[Record]) -> dict:
    """The method config in force: the newest ``run_extend``'s, else ``run_start``'s."""
    configs = [r.config for r in records if isinstance(r, (RunStart, RunExtend))]
    return configs[-1] if configs else {}


def _growable(config: dict) -> dict:
    return _normalized({k: config.get(k) for k in GROWABLE})


def _normalized(value: object) -> object:
    return json.loads(json.dumps(value, sort_keys=True))


def _complete_steps(records: list[Record]) -> list[Record]:
    """Records up to the last ``step_end``, ``run_end`` or ``run_extend``; after it, a step
    was in flight."""
    boundaries = (StepEnd, RunEnd, RunExtend)
    last = max((i for i, r in enumerate(records) if isinstance(r, boundaries)), default=None)
    if last is None:
        return records[:1] if records and isinstance(records[0], RunStart) else []
    return records[: last + 1]


def replay_state(records: list[Record], gamma: float) -> SearchState:
    """Rebuild the loop state from a file's complete steps (the same path a fresh run takes)."""
    state = SearchState()
    for r in records:
        if isinstance(r, CandidateRecord) and r.executed:
            attempt = _attempt_from_record(r)
            state.history.append(attempt)
            state.evaluations += 1
            if _improves(attempt, state.best):
                state.best = attempt
        elif isinstance(r, StepEnd):
            executed = [a.reward for a in state.history if a.step == r.step]
            state.step_rewards.append(max(executed, default=0.0))
            state.usage = r.usage
            state.wall_s = r.wall_s
    return state


def _attempt_from_record(r: CandidateRecord) -> Attempt:
    c = r.critique
    return Attempt(
        step=r.step,
        index=r.proposal_index,
        candidate_id=r.candidate_id,
        source=r.source,
        result=EvalResult.from_dict(r.evaluation),
        reward=r.reward,
        critique=Critique(**{**c, "usage": Usage.from_dict(c.get("usage"))}) if c else None,
        meta=r.meta,
    )


def _critique_dict(c: Critique | None) -> dict | None:
    if c is None:
        return None
    return {
        "text": c.text,
        "critic": c.critic,
        "offline": c.offline,
        "usage": c.usage.to_dict(),
        "prompt_version": c.prompt_version,
    }


def _run_start_record(ctx: RunContext) -> RunStart:
    return RunStart(
        run=RunId(ctx.task.suite, ctx.task.task_id, ctx.method.name, ctx.seed),
        config=ctx.method.to_dict(),
        reward_kind=ctx.reward_kind,
        policy={"name": ctx.policy.name, "offline": ctx.policy.offline},
        critic={"name": ctx.critic.name, "offline": ctx.critic.offline} if ctx.critic else None,
        reranker={"name": ctx.reranker.name} if ctx.reranker else None,
        evaluator=ctx.evaluator.name,
        task_hash=ctx.task.content_hash(),
        provenance=ctx.provenance,
        fingerprint=ctx.fingerprint,
    )


def _emit(ctx: RunContext, event: str, data: dict) -> None:
    if ctx.on_event is not None:
        ctx.on_event(event, data)
