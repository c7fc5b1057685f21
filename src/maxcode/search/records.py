"""The rollout records of docs/records.md as types: one dataclass per record kind.

The loop and the synthetic-data writer write them; the reward-to-go dataset builder and
the tables read them. Reading is strict: an unknown or missing field is a
``RolloutFormatError`` naming the file, line, record kind and field, so a format change
cannot be read past silently. Fields added after the first format carry a default (and
say since when), so files written by earlier runs still read.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from maxcode.errors import RolloutFormatError
from maxcode.llm.usage import Usage
from maxcode.records import jsonl_lines

REFERENCE_ID = "reference"  # parent_id of a candidate derived from the task's own program


def _help(text: str, **more: Any) -> dict:
    return {"help": text, **more}


@dataclass(frozen=True)
class RunId:
    """Which unit of work a file holds."""

    suite: str = field(metadata=_help("suite name under `suites:`"))
    task_id: str = field(metadata=_help("task id within the suite"))
    method: str = field(metadata=_help("method name under `methods:`"))
    seed: int = field(metadata=_help("search seed"))

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Any, where: str) -> RunId:
        return cls(**_checked(cls, data, where, "run_start.run"))


@dataclass(frozen=True)
class Record:
    """Base of the record kinds: ``kind`` on disk picks the class."""

    kind: ClassVar[str]

    def to_dict(self) -> dict:
        out: dict[str, Any] = {"kind": self.kind}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            out[f.name] = value.to_dict() if hasattr(value, "to_dict") else value
        return out

    @classmethod
    def from_dict(cls, data: Any, where: str = "record") -> Record:
        values = _checked(cls, data, where, cls.kind, extra=("kind",))
        for f in dataclasses.fields(cls):
            if f.name in values and "load" in f.metadata:
                values[f.name] = f.metadata["load"](values[f.name], where)
        return cls(**values)


def _usage(data: Any, where: str) -> Usage:
    names = {f.name for f in dataclasses.fields(Usage)}
    if not isinstance(data, dict) or set(data) - names:
        raise RolloutFormatError(f"{where}: usage {data!r}: expected a mapping of {sorted(names)}")
    return Usage.from_dict(data)


USAGE = {"load": _usage}


@dataclass(frozen=True)
class RunStart(Record):
    """The first record: what ran, with which parts, and what a resume must match."""

    kind: ClassVar[str] = "run_start"
    run: RunId = field(metadata=_help("suite, task_id, method, seed", load=RunId.from_dict))
    config: dict = field(metadata=_help("the method's resolved search config"))
    reward_kind: str = field(metadata=_help("speedup | kernelcompare"))
    policy: dict = field(metadata=_help("`{name, offline}` of the generator"))
    critic: dict | None = field(metadata=_help("`{name, offline}`, or null without critiques"))
    reranker: dict | None = field(metadata=_help("`{name}` of the reward-to-go model, or null"))
    evaluator: str = field(metadata=_help("evaluator name and version"))
    task_hash: str = field(metadata=_help("hash of the task's reference and tests"))
    provenance: dict = field(metadata=_help("code version, hardware fingerprint, params"))
    fingerprint: dict = field(
        default_factory=dict,
        metadata=_help(
            "what a resume must match besides these (`maxcode optimize`: target and test "
            "hashes, settings); `{}` in the pipeline; absent before 2026-11-24"
        ),
    )
    synthetic: bool = field(
        default=False,
        metadata=_help("true in files of maxcode.r2g.synthetic, whose rewards are not measured"),
    )


@dataclass(frozen=True)
class RunExtend(Record):
    """A finished run resumed with a larger depth or another budget goes on after this."""

    kind: ClassVar[str] = "run_extend"
    after_step: int = field(metadata=_help("steps done before the extension"))
    config: dict = field(metadata=_help("the config now in force"))
    provenance: dict = field(metadata=_help("code version, hardware fingerprint, params"))


@dataclass(frozen=True)
class CandidateRecord(Record):
    """One proposal of a step, executed or not."""

    kind: ClassVar[str] = "candidate"
    step: int = field(metadata=_help("0-based step"))
    proposal_index: int = field(metadata=_help("index among the step's k proposals"))
    candidate_id: str | None = field(metadata=_help("sha256 of the source, 16 hex; null: no code"))
    parent_id: str = field(
        metadata=_help("candidate it was derived from; `reference` for the task's own program")
    )
    source: str | None = field(metadata=_help("the proposed program; null: no code"))
    executed: bool = field(metadata=_help("false when the reranker did not pick it"))
    rerank_score: float | None = field(metadata=_help("the reward-to-go model's score, or null"))
    rerank_fallback: bool | None = field(
        metadata=_help("true when the score is the fallback (the model's output was unusable)")
    )
    evaluation: dict | None = field(
        metadata=_help("`EvalResult.to_dict()`; null when not executed")
    )
    reward: float | None = field(metadata=_help("null when not executed"))
    critique: dict | None = field(
        metadata=_help("`{text, critic, offline, usage, prompt_version}`, or null")
    )
    observation_text: str = field(metadata=_help("the compact observation the reranker saw"))
    best_discounted_reward: float = field(metadata=_help("in the observation at this step"))
    usage: Usage = field(metadata=_help("the policy's calls, tokens and cost for it", **USAGE))
    prompt_version: str | None = field(metadata=_help("the generator prompt's version"))
    meta: dict = field(metadata=_help("what the policy says about it (transformations, ...)"))

    @property
    def status(self) -> str | None:
        """The evaluation's verdict (`ok`, `wrong_answer`, ...); None when not executed."""
        return self.evaluation["status"] if self.evaluation else None


@dataclass(frozen=True)
class StepEnd(Record):
    """Written once every candidate of a step is recorded: the step is finished."""

    kind: ClassVar[str] = "step_end"
    step: int = field(metadata=_help("0-based step"))
    step_reward: float = field(metadata=_help("max reward executed this step"))
    best_reward: float = field(metadata=_help("best so far, never decreasing"))
    best_candidate_id: str | None = field(metadata=_help("the best candidate so far"))
    usage: Usage = field(metadata=_help("LLM calls, tokens and cost so far", **USAGE))
    evaluations: int = field(metadata=_help("candidates executed so far"))
    wall_s: float = field(
        default=0.0, metadata=_help("seconds spent so far; absent in the first format")
    )


@dataclass(frozen=True)
class RunEnd(Record):
    """The last record of a complete run (an extended run has one per part)."""

    kind: ClassVar[str] = "run_end"
    best_reward: float = field(metadata=_help("best reward of the run"))
    best_candidate_id: str | None = field(metadata=_help("its candidate"))
    step_rewards: list[float] = field(metadata=_help("max reward executed per step"))
    step_returns: list[float] = field(
        metadata=_help("max-reward returns G_t = max_{k>=t} gamma^(k-t) r_k")
    )
    stopped_by: str = field(metadata=_help("depth, target, or `budget: <what>`"))
    usage: Usage = field(metadata=_help("LLM calls, tokens and cost of the run", **USAGE))
    evaluations: int = field(metadata=_help("candidates executed"))
    wall_s: float = field(metadata=_help("seconds the run took"))


RECORD_KINDS: dict[str, type[Record]] = {
    cls.kind: cls for cls in (RunStart, RunExtend, CandidateRecord, StepEnd, RunEnd)
}


def record_from_dict(data: Any, where: str) -> Record:
    """The typed record of one JSON object; ``where`` (file:line) starts every message."""
    kind = data.get("kind") if isinstance(data, dict) else None
    if kind not in RECORD_KINDS:
        raise RolloutFormatError(
            f"{where}: kind {kind!r} is not one of {list(RECORD_KINDS)} (docs/records.md)"
        )
    return RECORD_KINDS[kind].from_dict(data, where)


def read_records(path: Path) -> list[Record]:
    """Every complete record of a rollout file, typed (a trailing partial line is skipped).

    A line that is not JSON is a ``RolloutFormatError`` naming it too, not a bare
    ``JSONDecodeError`` that names neither the file nor the line.
    """
    return [record for record, _ in read_record_lines(path)]


def read_record_lines(path: Path) -> list[tuple[Record, str]]:
    """:func:`read_records`, each record with its line as it stands in the file, so a
    writer that keeps some of them (a resume) copies them byte for byte. Messages name
    the file's own line numbers, blank lines counted."""
    records: list[tuple[Record, str]] = []
    for number, line in jsonl_lines(Path(path)):
        where = f"{path}:{number}"
        try:
            data = json.loads(line)
        except json.JSONDecodeError as err:
            raise RolloutFormatError(
                f"{where}: not a JSON record ({err.msg}); docs/records.md describes the format"
            ) from None
        records.append((record_from_dict(data, where), line))
    return records


def _checked(cls: type, data: Any, where: str, name: str, extra: tuple[str, ...] = ()) -> dict:
    """``data`` without ``extra`` keys, once its keys are exactly ``cls``'s fields."""
    if not isinstance(data, dict):
        raise RolloutFormatError(f"{where}: {name} record: expected a mapping, got {data!r}")
    fields = dataclasses.fields(cls)
    names = {f.name for f in fields}
    unknown = sorted(set(data) - names - set(extra))
    if unknown:
        raise RolloutFormatError(
            f"{where}: {name} record: unknown field(s) {unknown} (docs/records.md lists "
            f"{sorted(names)})"
        )
    required = [
        f.name
        for f in fields
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    ]
    missing = [n for n in required if n not in data]
    if missing:
        raise RolloutFormatError(f"{where}: {name} record: missing field(s) {missing}")
    return {k: v for k, v in data.items() if k in names}
