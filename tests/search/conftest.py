"""Scripted parts for loop tests: the loop's logic, without compilers or LLMs."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import pytest

from maxcode.evaluate.result import EvalResult, Status, Timing
from maxcode.llm.usage import Usage
from maxcode.search.types import Critique, Observation, Proposal, Score
from maxcode.tasks.model import Task


def result_for(source: str) -> EvalResult:
    """Source text encodes the verdict: 'ok:<speedup>', 'compile_error', 'wrong'."""
    if source.startswith("ok:"):
        speedup = float(source.split(":")[1].split()[0])
        return EvalResult(
            Status.OK, timing=Timing("wall", "s", 1.0 / speedup, 1.0), evaluator="scripted"
        )
    if source.startswith("compile_error"):
        return EvalResult(Status.COMPILE_ERROR, reason="error: expected ';'", evaluator="scripted")
    return EvalResult(Status.WRONG_ANSWER, reason="test 0 line 1", evaluator="scripted")


@dataclass
class ScriptedEvaluator:
    name: str = "scripted/1"
    calls: list[str] = field(default_factory=list)

    def evaluate(self, task: Task, source: str) -> EvalResult:
        self.calls.append(source)
        return result_for(source)


@dataclass
class ScriptedPolicy:
    """Proposes script[step][i]; remembers every observation it saw."""

    script: list[list[str | None]]
    name: str = "scripted-policy"
    offline: bool = True
    seen: list[Observation] = field(default_factory=list)

    def propose(self, obs: Observation, k: int, rng: random.Random) -> list[Proposal]:
        self.seen.append(obs)
        row = self.script[obs.step]
        return [
            Proposal(
                source=s,
                reason="no code" if s is None else "",
                usage=Usage(calls=1, input_tokens=10),
            )
            for s in row[:k]
        ]


@dataclass
class EchoCritic:
    name: str = "echo-critic"
    offline: bool = True

    def critique(self, task: Task, source: str, result: EvalResult) -> Critique:
        return Critique(f"verdict {result.status.value} for {source[:12]}", self.name, True)


@dataclass
class LengthReranker:
    """Scores proposals by the speedup written in their source (an oracle)."""

    name: str = "oracle"

    def score(self, obs: Observation, proposals: list[Proposal]) -> list[Score]:
        out = []
        for p in proposals:
            if p.source and p.source.startswith("ok:"):
                out.append(Score(float(p.source.split(":")[1].split()[0])))
            else:
                out.append(Score(0.0, fallback=True))
        return out


@pytest.fixture
def task(tmp_path) -> Task:
    return Task(task_id="t1", suite="s", language="cpp", reference_source="int main(){}")
