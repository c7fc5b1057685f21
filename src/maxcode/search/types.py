"""What flows through the search loop: observations in, proposals out.

The policy, critic and reranker are interchangeable parts behind small protocols,
so every method in the papers' tables is a configuration of one loop.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Protocol

from maxcode.evaluate.result import EvalResult
from maxcode.llm.usage import Usage
from maxcode.tasks.model import Task


@dataclass
class Critique:
    text: str
    critic: str  # e.g. "offline-rules/1" or "anthropic:claude-3-7-sonnet"
    offline: bool
    usage: Usage = field(default_factory=Usage)
    prompt_version: str | None = None


@dataclass
class Attempt:
    """One executed candidate as the next observation sees it."""

    step: int
    index: int  # position among this step's executed candidates
    candidate_id: str  # sha256 of the source (first 16 hex)
    source: str
    result: EvalResult
    reward: float
    critique: Critique | None = None
    meta: dict = field(default_factory=dict)  # policy's own notes (e.g. transformations)


@dataclass
class Observation:
    """The policy's input at a step; disabled components are None / empty.

    ``trajectory`` holds previous attempts (all, or the best per step);
    ``best`` is the best-performing attempt so far with its feedback;
    critiques ride on the attempts and are stripped when the switch is off.
    With ``include_trajectory`` off and critiques on (the Critique-only ablation),
    attempts carry only their critique and verdict: renderers show no code.
    """

    task: Task
    step: int
    depth: int
    trajectory: list[Attempt]
    best: Attempt | None
    best_discounted_reward: float
    include_critique: bool
    method: str
    include_trajectory: bool = True  # False (Critique-only): show critiques, not code

    def attempts_shown(self) -> list[Attempt]:
        """Every attempt the observation shows: the trajectory, plus the best if not in it."""
        attempts = list(self.trajectory)
        if self.best is not None and all(
            a.candidate_id != self.best.candidate_id for a in attempts
        ):
            attempts.append(self.best)
        return attempts


@dataclass
class Proposal:
    source: str | None  # None: no usable code (see reason)
    reason: str = ""  # why there is no source, e.g. "no code block in completion"
    status_hint: str | None = None  # "no_code" | "unsupported" when source is None
    meta: dict = field(default_factory=dict)
    usage: Usage = field(default_factory=Usage)
    prompt_version: str | None = None

    @classmethod
    def unsupported(cls, n: int, reason: str, **meta: object) -> list[Proposal]:
        """``n`` proposals without code that say why the policy has nothing (more) to offer."""
        return [
            cls(source=None, reason=reason, status_hint="unsupported", meta=dict(meta))
            for _ in range(n)
        ]


class Policy(Protocol):
    name: str  # recorded in every rollout record, e.g. "offline-cpp/1"
    offline: bool

    def propose(self, obs: Observation, k: int, rng: random.Random) -> list[Proposal]: ...


class Critic(Protocol):
    name: str
    offline: bool

    def critique(self, task: Task, source: str, result: EvalResult) -> Critique: ...


@dataclass
class Score:
    value: float  # predicted max-reward return
    fallback: bool = False  # the model's output was unusable; value is the fallback


class Reranker(Protocol):
    name: str

    def score(self, obs: Observation, proposals: list[Proposal]) -> list[Score]: ...


class Evaluator(Protocol):
    name: str  # includes its version; part of every evaluation-cache key

    def evaluate(self, task: Task, source: str) -> EvalResult: ...
