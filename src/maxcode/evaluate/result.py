"""Typed outcome of evaluating one candidate; the contract between evaluators,
the search loop, the critics and the tables.

Stages run in a fixed order (static checks, compile, run, correctness, timing) and
the first failure ends the evaluation with a status and a one-line reason. No -1
sentinels: a number that was not measured is ``None``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import StrEnum


class Status(StrEnum):
    OK = "ok"  # compiled, all tests correct, timed
    NO_CODE = "no_code"  # the proposal had no usable source
    UNSUPPORTED = "unsupported"  # the (offline) policy cannot write this task
    REJECTED = "rejected"  # a static/anti-cheat check failed
    COMPILE_ERROR = "compile_error"
    RUNTIME_ERROR = "runtime_error"  # crash or non-zero exit
    TIMEOUT = "timeout"
    MEMORY_LIMIT = "memory_limit"
    OUTPUT_LIMIT = "output_limit"
    WRONG_ANSWER = "wrong_answer"

    @property
    def compiled(self) -> bool:
        return self not in (
            Status.NO_CODE,
            Status.UNSUPPORTED,
            Status.REJECTED,
            Status.COMPILE_ERROR,
        )

    @property
    def correct(self) -> bool:
        return self is Status.OK


@dataclass
class TestVerdict:
    index: int
    status: Status
    runtime_s: float | None = None
    reason: str = ""  # e.g. "line 3: expected '42' got '41'"


@dataclass
class Timing:
    """Runtimes of candidate and reference, measured the same way in the same run."""

    mode: str  # "wall" | "instructions" | "cachegrind" | "cuda_events"
    unit: str  # "s" | "instructions" | "cycles" | "ms"
    candidate: float  # median total over tests
    reference: float
    candidate_spread: float | None = None  # relative IQR of repeats, where measured
    reference_spread: float | None = None
    repeats: int = 1


@dataclass
class EvalResult:
    status: Status
    reason: str = ""  # one line for a human; empty when ok
    tests: list[TestVerdict] = field(default_factory=list)
    timing: Timing | None = None
    compile_log: str = ""  # trimmed diagnostics
    profile: dict | None = None  # execution-overhead profile (Effi-Learner), optional
    figures: dict = field(default_factory=dict)  # measured extras for the critic
    evaluator: str = ""  # evaluator name + version
    cached: bool = False  # served from the evaluation cache
    # Isolation the candidate's code ran under: "full", "partial: <what is missing>",
    # "none: <why>"; "" where no candidate code ran (static rejection) or not recorded.
    sandbox: str = ""

    @property
    def speedup(self) -> float | None:
        """Reference cost / candidate cost; None unless correct and timed."""
        if self.status is not Status.OK or self.timing is None or self.timing.candidate <= 0:
            return None
        return self.timing.reference / self.timing.candidate

    @property
    def tests_passed(self) -> int:
        return sum(1 for t in self.tests if t.status is Status.OK)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["status"] = self.status.value
        d["tests"] = [{**asdict(t), "status": t.status.value} for t in self.tests]
        d["speedup"] = self.speedup
        return d

    @classmethod
    def from_dict(cls, d: dict) -> EvalResult:
        d = dict(d)
        d.pop("speedup", None)
        d["status"] = Status(d["status"])
        d["tests"] = [
            TestVerdict(**{**t, "status": Status(t["status"])}) for t in d.get("tests", [])
        ]
        d["timing"] = Timing(**d["timing"]) if d.get("timing") else None
        return cls(**d)


def reward_of(result: EvalResult, kind: str = "speedup") -> float:
    """Reward of a candidate: speedup over the reference if correct, else 0.

    ``kernelcompare`` is the GRPO reward: 0.4 compiles + 0.4 correct + 0.2 faster.
    """
    if kind == "speedup":
        return result.speedup or 0.0
    if kind == "kernelcompare":
        faster = result.speedup is not None and result.speedup > 1.0
        return 0.4 * result.status.compiled + 0.4 * result.status.correct + 0.2 * faster
    raise ValueError(f"unknown reward kind {kind!r}; choose 'speedup' or 'kernelcompare'")
