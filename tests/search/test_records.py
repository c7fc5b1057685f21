"""The rollout record types: what the loop writes reads back strictly, old files still read,
and docs/records.md lists every field of every kind."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest

from maxcode.errors import RolloutFormatError
from maxcode.r2g.synthetic import write_synthetic_rollouts
from maxcode.records import read_jsonl
from maxcode.search.records import (
    RECORD_KINDS,
    CandidateRecord,
    RunEnd,
    RunExtend,
    RunId,
    RunStart,
    StepEnd,
    read_records,
    record_from_dict,
)

from .test_loop import method, run

DOC = Path(__file__).resolve().parents[2] / "docs" / "records.md"

# A rollout as the first format wrote it (before `fingerprint`, `synthetic` and the
# step_end `wall_s`): files on disk from earlier runs look like this.
OLD_FORMAT = [
    {
        "kind": "run_start",
        "run": {"suite": "s", "task_id": "t", "method": "m", "seed": 0},
        "config": {"name": "m", "depth": 1, "k": 1},
        "reward_kind": "speedup",
        "policy": {"name": "p", "offline": True},
        "critic": None,
        "reranker": None,
        "evaluator": "cpp/1",
        "task_hash": "abc",
        "provenance": {"hardware": {"cpu": "x"}},
    },
    {
        "kind": "candidate",
        "step": 0,
        "proposal_index": 0,
        "candidate_id": "c0",
        "parent_id": "reference",
        "source": "int main() {}",
        "executed": True,
        "rerank_score": None,
        "rerank_fallback": None,
        "evaluation": {"status": "ok"},
        "reward": 1.5,
        "critique": None,
        "observation_text": "task=t",
        "best_discounted_reward": 0.0,
        "usage": {},
        "prompt_version": None,
        "meta": {},
    },
    {
        "kind": "step_end",
        "step": 0,
        "step_reward": 1.5,
        "best_reward": 1.5,
        "best_candidate_id": "c0",
        "usage": {"calls": 1},
        "evaluations": 1,
    },
    {
        "kind": "run_end",
        "best_reward": 1.5,
        "best_candidate_id": "c0",
        "step_rewards": [1.5],
        "step_returns": [1.5],
        "stopped_by": "depth",
        "usage": {"calls": 1},
        "evaluations": 1,
        "wall_s": 0.1,
    },
]


def test_what_the_loop_writes_reads_back_typed_and_unchanged(task, tmp_path):
    run(task, tmp_path, method(depth=2))
    run(task, tmp_path, method(depth=3))  # grown: a run_extend record and a second run_end
    raw = list(read_jsonl(tmp_path / "run.jsonl"))
    typed = read_records(tmp_path / "run.jsonl")
    assert {type(r) for r in typed} == set(RECORD_KINDS.values())
    assert [r.to_dict() for r in typed] == raw  # nothing lost or added by the types


def test_synthetic_rollouts_are_complete_records(tmp_path):
    path = write_synthetic_rollouts(tmp_path, n_tasks=1, depth=2, k=2)[0]
    records = read_records(path)
    start, end = records[0], records[-1]
    assert isinstance(start, RunStart) and start.synthetic and start.evaluator == "synthetic"
    assert isinstance(end, RunEnd) and end.evaluations == 4
    assert [r.evaluations for r in records if isinstance(r, StepEnd)] == [2, 4]


def test_old_files_still_read(tmp_path):
    path = tmp_path / "old.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in OLD_FORMAT))
    start, candidate, step_end, end = read_records(path)
    assert start.fingerprint == {} and start.synthetic is False
    assert start.run == RunId("s", "t", "m", 0)
    assert candidate.status == "ok" and candidate.usage.calls == 0
    assert step_end.wall_s == 0.0 and step_end.usage.calls == 1
    assert end.best_reward == 1.5


@pytest.mark.parametrize(
    ("index", "change", "drop", "message"),
    [
        (
            1,
            {"rewrad": 1.0},
            None,
            r"run\.jsonl:2: candidate record: unknown field\(s\) \['rewrad'\]",
        ),
        (
            2,
            {},
            "step_reward",
            r"run\.jsonl:3: step_end record: missing field\(s\) \['step_reward'\]",
        ),
        (0, {"run": {"suite": "s"}}, None, r"run\.jsonl:1: run_start\.run record: missing field"),
        (3, {"kind": "run_stop"}, None, r"run\.jsonl:4: kind 'run_stop' is not one of"),
        (1, {"usage": {"tokens": 3}}, None, r"run\.jsonl:2: usage \{'tokens': 3\}"),
    ],
)
def test_a_bad_record_names_file_line_kind_and_field(tmp_path, index, change, drop, message):
    records = [dict(r) for r in OLD_FORMAT]
    records[index] = {k: v for k, v in {**records[index], **change}.items() if k != drop}
    path = tmp_path / "run.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    with pytest.raises(RolloutFormatError, match=message):
        read_records(path)


def test_a_bad_record_is_named_by_its_line_in_the_file(tmp_path):
    """Blank lines count: the message points at the line an editor shows."""
    path = tmp_path / "run.jsonl"
    bad = {**OLD_FORMAT[1], "rewrad": 1.0}
    path.write_text(json.dumps(OLD_FORMAT[0]) + "\n\n" + json.dumps(bad) + "\n")
    with pytest.raises(RolloutFormatError, match=r"run\.jsonl:3: candidate record: unknown"):
        read_records(path)


def test_record_from_dict_round_trips_each_kind():
    for data in OLD_FORMAT:
        record = record_from_dict(data, "x")
        again = record_from_dict(record.to_dict(), "x")
        assert again == record
    extend = RunExtend(after_step=2, config={"depth": 4}, provenance={})
    assert record_from_dict(extend.to_dict(), "x") == extend


def _documented_fields(kind: str) -> list[str]:
    """The field names of ``kind``'s table in docs/records.md (rows start with a `name`)."""
    text = DOC.read_text()
    section = re.search(rf"^### `{kind}`\n(.*?)(?=^### |\Z)", text, re.S | re.M)
    assert section, f"docs/records.md has no section ### `{kind}`"
    return re.findall(r"^\| `([a-z_]+)` \|", section.group(1), re.M)


@pytest.mark.parametrize("kind", sorted(RECORD_KINDS))
def test_the_doc_lists_every_field_of_every_kind(kind):
    fields = [f.name for f in dataclasses.fields(RECORD_KINDS[kind])]
    assert _documented_fields(kind) == fields


def test_the_doc_lists_the_run_fields():
    assert _documented_fields("run") == [f.name for f in dataclasses.fields(RunId)]


def test_candidate_status_is_the_evaluation_verdict():
    data = {**OLD_FORMAT[1], "executed": False, "evaluation": None, "reward": None}
    assert CandidateRecord.from_dict(data).status is None
