from __future__ import annotations

import random
from pathlib import Path

import pytest

from maxcode.errors import RolloutFormatError
from maxcode.llm.usage import Usage
from maxcode.r2g.dataset import build_dataset, read_dataset, split_tasks, write_dataset
from maxcode.r2g.prompt import build_prompt
from maxcode.r2g.synthetic import write_synthetic_rollouts
from maxcode.records import JsonlWriter
from maxcode.search.records import CandidateRecord, RunEnd, RunId, RunStart


def _candidate(
    step: int, i: int, cid: str, parent: str, reward: float | None, executed=True
) -> CandidateRecord:
    return CandidateRecord(
        step=step,
        proposal_index=i,
        candidate_id=cid,
        parent_id=parent,
        source=f"int main() {{ return {cid!r}; }}",
        executed=executed,
        rerank_score=None,
        rerank_fallback=None,
        evaluation=None,
        reward=reward,
        critique=None,
        observation_text=f"task=t1 step={step + 1}/3",
        best_discounted_reward=0.0,
        usage=Usage(),
        prompt_version=None,
        meta={},
    )


def _start(task_id: str = "t1") -> RunStart:
    return RunStart(
        run=RunId("s", task_id, "m", 0),
        config={},
        reward_kind="speedup",
        policy={"name": "p", "offline": True},
        critic=None,
        reranker=None,
        evaluator="e",
        task_hash="h",
        provenance={},
    )


def _write_run(
    path: Path, records: list[CandidateRecord], task_id: str = "t1", complete: bool = True
) -> Path:
    end = RunEnd(3.0, None, [], [], "depth", Usage(), len(records), 0.0)
    with JsonlWriter(path) as w:
        for r in [_start(task_id), *records, *([end] if complete else [])]:
            w.write(r.to_dict())
    return path


def test_returns_match_hand_worked_tree(tmp_path: Path) -> None:
    # reference -> A(1.0) -> C(2.0) -> F(3.0); A -> D(1.5); C -> E(0); reference -> B(0).
    # gamma = 0.9: F = 3, E = 0, C = max(2, .9*3) = 2.7, D = 1.5, A = max(1, .9*2.7) = 2.43, B = 0.
    path = _write_run(
        tmp_path / "run.jsonl",
        [
            _candidate(0, 0, "A", "reference", 1.0),
            _candidate(0, 1, "B", "reference", 0.0),
            _candidate(1, 0, "C", "A", 2.0),
            _candidate(1, 1, "D", "A", 1.5),
            _candidate(1, 2, "X", "A", None, executed=False),  # reranked out: no example
            _candidate(2, 0, "E", "C", 0.0),
            _candidate(2, 1, "F", "C", 3.0),
        ],
    )
    ds = build_dataset([path], gamma=0.9, test_fraction=0.5, seed=0, max_prompt_chars=512)
    got = {e.candidate_id: (e.value, e.target) for e in ds.train + ds.test}
    assert got == {
        "A": (pytest.approx(2.43), " 2.43"),
        "B": (0.0, " 0.00"),
        "C": (pytest.approx(2.7), " 2.70"),
        "D": (1.5, " 1.50"),
        "E": (0.0, " 0.00"),
        "F": (3.0, " 3.00"),
    }
    assert ds.skipped == {"unexecuted_candidates": 1}
    assert all(e.group == ("s/m/t1/seed0", e.step) for e in ds.train + ds.test)


def test_incomplete_runs_are_left_out_and_counted(tmp_path: Path) -> None:
    done = _write_run(tmp_path / "a.jsonl", [_candidate(0, 0, "A", "reference", 1.0)])
    partial = _write_run(
        tmp_path / "b.jsonl",
        [_candidate(0, 0, "B", "reference", 5.0)],
        task_id="t2",
        complete=False,
    )
    ds = build_dataset([done, partial], 0.9, 0.5, 0, 512)
    assert [e.candidate_id for e in ds.train + ds.test] == ["A"]
    assert ds.skipped == {"incomplete_runs": 1}


def test_bad_records_name_file_and_field(tmp_path: Path) -> None:
    bad = _candidate(0, 0, "A", "reference", None)
    path = _write_run(tmp_path / "bad.jsonl", [bad])
    with pytest.raises(RolloutFormatError, match=r"bad\.jsonl: candidate record 2 .* 'reward'"):
        build_dataset([path], 0.9, 0.5, 0, 512)
    two_starts = tmp_path / "two.jsonl"
    with JsonlWriter(two_starts) as w:
        w.write(_start().to_dict())
        w.write(_start().to_dict())
    with pytest.raises(RolloutFormatError, match=r"two\.jsonl: expected one run_start"):
        build_dataset([two_starts], 0.9, 0.5, 0, 512)
    with pytest.raises(ValueError, match="test_fraction"):
        build_dataset([path], 0.9, 1.0, 0, 512)


def test_split_by_task_has_no_overlap_and_ignores_file_order(rollout_paths, dataset) -> None:
    train_tasks = {e.task_id for e in dataset.train}
    test_tasks = {e.task_id for e in dataset.test}
    assert train_tasks and test_tasks and not train_tasks & test_tasks
    assert len(test_tasks) == 3  # round(0.3 * 10)
    shuffled = list(rollout_paths)
    random.Random(7).shuffle(shuffled)
    again = build_dataset(shuffled, gamma=0.9, test_fraction=0.3, seed=0, max_prompt_chars=1024)
    assert again.train == dataset.train and again.test == dataset.test
    other_seed = build_dataset(rollout_paths, 0.9, 0.3, 1, 1024)
    assert {e.task_id for e in other_seed.test} != test_tasks


def test_split_is_per_suite_and_keeps_a_train_task() -> None:
    tasks = {("a", f"t{i}") for i in range(10)} | {("b", "u0"), ("b", "u1")} | {("c", "solo")}
    test = split_tasks(tasks, 0.2, seed=3)
    assert sum(s == "a" for s, _ in test) == 2
    assert sum(s == "b" for s, _ in test) == 1  # at least one test task, one left for train
    assert not any(s == "c" for s, _ in test)  # a lone task stays in train
    assert split_tasks(set(sorted(tasks, reverse=True)), 0.2, seed=3) == test


def test_card_and_roundtrip(tmp_path: Path, dataset) -> None:
    card = dataset.card()
    assert card["task_overlap"] == 0
    assert card["splits"]["train"]["examples"] == len(dataset.train)
    assert card["splits"]["test"]["examples"] == len(dataset.test)
    q = card["splits"]["train"]["target"]["quantiles"]
    assert list(q.values()) == sorted(q.values())
    assert q["p100"] == pytest.approx(max(e.value for e in dataset.train), abs=1e-4)
    write_dataset(dataset, tmp_path / "ds")
    back = read_dataset(tmp_path / "ds")
    assert (
        back.train == dataset.train and back.test == dataset.test and back.params == dataset.params
    )
    assert "| train | synthetic-cpp |" in (tmp_path / "ds" / "card.md").read_text()


def test_prompt_is_cut_to_length_keeping_head_and_tail() -> None:
    source = "HEAD\n" + "x = x + 1;\n" * 2000 + "TAIL\n"
    prompt = build_prompt("observation " * 500, source, max_chars=1200, description="d")
    assert len(prompt) <= 1200
    assert "HEAD" in prompt and "TAIL" in prompt and "chars cut" in prompt
    short = build_prompt("obs", "int main(){}", max_chars=1200)
    assert "int main(){}" in short and "chars cut" not in short


def test_descriptions_must_cover_every_task(tmp_path: Path) -> None:
    paths = write_synthetic_rollouts(tmp_path, n_tasks=2, depth=1, k=2)
    ds = build_dataset(
        paths,
        0.9,
        0.5,
        0,
        1024,
        descriptions={"synthetic-cpp/p000": "sum", "synthetic-cpp/p001": "q"},
    )
    want = {"p000": "sum", "p001": "q"}
    assert ds.params.with_descriptions
    assert all(e.prompt.startswith(f"### task\n{want[e.task_id]}\n") for e in ds.train + ds.test)
    with pytest.raises(ValueError, match="p001 has no description"):
        build_dataset(paths, 0.9, 0.5, 0, 1024, descriptions={"synthetic-cpp/p000": "sum"})


def test_split_over_the_full_task_list_matches_the_pipelines_held_out_set(rollout_paths) -> None:
    found = {("synthetic-cpp", p.parent.name) for p in rollout_paths}
    everything = found | {("synthetic-cpp", f"never-ran-{i}") for i in range(5)}
    ds = build_dataset(rollout_paths, 0.9, 0.3, 0, 1024, all_tasks=everything)
    held_out = split_tasks(everything, 0.3, 0)
    assert ds.test and {(e.suite, e.task_id) for e in ds.test} == held_out & found
    assert not {(e.suite, e.task_id) for e in ds.train} & held_out
    with pytest.raises(ValueError, match="not in the task list"):
        build_dataset(rollout_paths, 0.9, 0.3, 0, 1024, all_tasks={("synthetic-cpp", "p000")})
