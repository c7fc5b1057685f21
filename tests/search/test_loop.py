from __future__ import annotations

import json

import pytest

from maxcode.errors import RolloutFormatError, RunMismatch
from maxcode.records import read_jsonl
from maxcode.search.config import Budget, MethodConfig
from maxcode.search.loop import RunContext, run_search
from maxcode.search.returns import candidate_returns, step_returns

from .conftest import EchoCritic, LengthReranker, ScriptedEvaluator, ScriptedPolicy

SCRIPT = [
    ["ok:1.5 a", "compile_error a", "wrong a"],
    ["ok:1.2 b", "compile_error b", "ok:1.5 b"],  # nothing better: best stays step-0's
    ["compile_error c", "wrong c", None],  # an all-failure step with a no-code proposal
    ["ok:3.0 d", "ok:2.0 d", "ok:3.0 e"],  # a tie: the earlier one stays best
]


def method(**kw) -> MethodConfig:
    return MethodConfig(**{"name": "m", "depth": 4, "k": 3, "gamma": 0.5, **kw})


def run(task, tmp_path, m: MethodConfig, script=SCRIPT, **parts):
    tmp_path.mkdir(parents=True, exist_ok=True)
    policy = ScriptedPolicy(script)
    evaluator = parts.pop("evaluator", ScriptedEvaluator())
    ctx = RunContext(task=task, method=m, seed=0, policy=policy, evaluator=evaluator, **parts)
    out = tmp_path / "run.jsonl"
    end = run_search(ctx, out)
    return end, list(read_jsonl(out)), policy, evaluator


def test_best_never_regresses_and_failures_never_become_best(task, tmp_path):
    end, records, _, _ = run(task, tmp_path, method())
    bests = [r["best_reward"] for r in records if r["kind"] == "step_end"]
    assert bests == pytest.approx([1.5, 1.5, 1.5, 3.0])
    assert end["step_rewards"] == pytest.approx([1.5, 1.5, 0.0, 3.0])
    winner = next(r for r in records if r.get("candidate_id") == end["best_candidate_id"])
    assert winner["source"] == "ok:3.0 d"  # tie with "ok:3.0 e": the first stays


def test_all_failure_run_has_no_best(task, tmp_path):
    script = [["compile_error", "wrong", None]] * 2
    end, records, _, _ = run(task, tmp_path, method(depth=2), script=script)
    assert end["best_reward"] == 0.0 and end["best_candidate_id"] is None
    no_code = [r for r in records if r["kind"] == "candidate" and r["source"] is None]
    assert no_code and all(
        r["evaluation"]["status"] == "no_code" and not r["executed"] for r in no_code
    )


def test_records_rebuild_returns_exactly(task, tmp_path):
    end, records, _, _ = run(task, tmp_path, method())
    per_step: dict[int, float] = {}
    for r in records:
        if r["kind"] == "candidate" and r["executed"]:
            per_step[r["step"]] = max(per_step.get(r["step"], 0.0), r["reward"])
    rebuilt = step_returns([per_step.get(s, 0.0) for s in range(4)], 0.5)
    assert end["step_returns"] == pytest.approx(rebuilt)
    # G_0 = max(1.5, .5*1.5, .25*0, .125*3.0) = 1.5 ; G_2 = max(0, .5*3) = 1.5
    assert end["step_returns"] == pytest.approx([1.5, 1.5, 1.5, 3.0])
    values = candidate_returns(
        [
            (r["candidate_id"], r["parent_id"], r["reward"])
            for r in records
            if r["kind"] == "candidate" and r["executed"]
        ],
        0.5,
    )
    assert max(values.values()) == pytest.approx(3.0)


@pytest.mark.parametrize(
    ("cfg", "expect_traj", "expect_code", "expect_critique", "expect_best"),
    [
        (dict(trajectory="best_per_step"), True, True, False, False),  # CUDA-LLM
        (dict(trajectory="none", critique=True), True, False, True, False),  # Critique-only
        (dict(trajectory="none", best=True), False, False, False, True),  # Best Perf-only
        (dict(trajectory="all", critique=True, best=True), True, True, True, True),  # full
    ],
)
def test_observation_holds_exactly_the_enabled_components(
    task, tmp_path, cfg, expect_traj, expect_code, expect_critique, expect_best
):
    _, _, policy, _ = run(task, tmp_path, method(**cfg), critic=EchoCritic())
    later = policy.seen[2]  # step 2: two steps of history exist
    assert bool(later.trajectory) is expect_traj
    assert later.include_trajectory is expect_code
    assert any(a.critique for a in later.trajectory) is expect_critique
    assert all(a.critique is None for a in later.trajectory) is not expect_critique
    assert (later.best is not None) is expect_best
    if expect_best:
        assert later.best.source == "ok:1.5 a"
    if cfg["trajectory"] == "best_per_step":
        assert [a.step for a in later.trajectory] == [0, 1]


def test_resume_after_kill_repeats_only_the_step_in_flight(task, tmp_path):
    full_end, full_records, _, _ = run(task, tmp_path / "a", method())
    out = tmp_path / "b" / "run.jsonl"
    out.parent.mkdir()
    # Simulate kill -9 in step 2: keep records through step 1's step_end plus two candidates
    # and a torn half line.
    lines = [json.dumps(r, sort_keys=True) for r in full_records]
    cut = next(i for i, r in enumerate(full_records) if r["kind"] == "step_end" and r["step"] == 1)
    out.write_text("\n".join(lines[: cut + 3]) + "\n" + lines[cut + 3][:40])
    evaluator = ScriptedEvaluator()
    ctx = RunContext(
        task=task, method=method(), seed=0, policy=ScriptedPolicy(SCRIPT), evaluator=evaluator
    )
    end = run_search(ctx, out)
    assert end["step_rewards"] == full_end["step_rewards"]
    assert end["best_candidate_id"] == full_end["best_candidate_id"]
    # only steps 2 and 3 were evaluated again (2 and 3 executed candidates with code)
    assert evaluator.calls == ["compile_error c", "wrong c", "ok:3.0 d", "ok:2.0 d", "ok:3.0 e"]

    def strip(rs: list[dict]) -> list[dict]:
        return [{k: v for k, v in r.items() if k not in ("wall_s", "provenance")} for r in rs]

    assert strip(list(read_jsonl(out))) == strip(full_records)
    # a finished run is not run again
    again = ScriptedEvaluator()
    ctx2 = RunContext(
        task=task, method=method(), seed=0, policy=ScriptedPolicy(SCRIPT), evaluator=again
    )
    assert run_search(ctx2, out)["best_reward"] == end["best_reward"] and again.calls == []


def test_growing_depth_extends_the_run_and_keeps_every_record(task, tmp_path):
    run(task, tmp_path, method(depth=2))
    before = (tmp_path / "run.jsonl").read_bytes()
    end, records, _, evaluator = run(task, tmp_path, method(depth=4))
    assert (tmp_path / "run.jsonl").read_bytes().startswith(before)  # appended, not rewritten
    assert len(end["step_rewards"]) == 4
    assert [r["kind"] for r in records].count("run_start") == 1
    extend = next(r for r in records if r["kind"] == "run_extend")
    assert extend["after_step"] == 2 and extend["config"]["depth"] == 4
    assert evaluator.calls == ["compile_error c", "wrong c", "ok:3.0 d", "ok:2.0 d", "ok:3.0 e"]
    same, _, _, again = run(task, tmp_path, method(depth=4))  # nothing grew: nothing runs
    assert same == end and again.calls == []


def test_records_of_another_configuration_are_refused_untouched(task, tmp_path):
    run(task, tmp_path, method(depth=2))
    before = (tmp_path / "run.jsonl").read_bytes()
    with pytest.raises(RunMismatch, match=r"config.k: 3 in the records, 2 now"):
        run(task, tmp_path, method(depth=2, k=2))
    with pytest.raises(RunMismatch, match="depth: 1 now, but the records hold 2 steps"):
        run(task, tmp_path, method(depth=1))
    assert (tmp_path / "run.jsonl").read_bytes() == before


def test_step_in_flight_is_set_aside_not_deleted(task, tmp_path):
    _, full, _, _ = run(task, tmp_path / "a", method(depth=2))
    out = tmp_path / "b" / "run.jsonl"
    out.parent.mkdir()
    cut = next(i for i, r in enumerate(full) if r["kind"] == "step_end")
    lines = [json.dumps(r, sort_keys=True) + "\n" for r in full[: cut + 3]]
    out.write_text("".join(lines))
    ctx = RunContext(
        task=task,
        method=method(depth=2),
        seed=0,
        policy=ScriptedPolicy(SCRIPT),
        evaluator=ScriptedEvaluator(),
    )
    run_search(ctx, out)
    aside = list(read_jsonl(out.with_name("run.jsonl.dropped.jsonl")))
    assert aside == full[cut + 1 : cut + 3]


def _killed_in_step_1(task, tmp_path) -> tuple[list[dict], list[str]]:
    """A depth-2 run's records and the lines a kill in step 1 leaves: step 0 finished,
    two candidates of step 1 written."""
    _, full, _, _ = run(task, tmp_path / "full", method(depth=2))
    cut = next(i for i, r in enumerate(full) if r["kind"] == "step_end")
    return full, [json.dumps(r, sort_keys=True) + "\n" for r in full[: cut + 3]]


def _depth_2(task) -> RunContext:
    """The run _killed_in_step_1 was cut from, with a fresh evaluator, ready to resume."""
    return RunContext(
        task=task,
        method=method(depth=2),
        seed=0,
        policy=ScriptedPolicy(SCRIPT),
        evaluator=ScriptedEvaluator(),
    )


@pytest.mark.parametrize(
    ("line", "damage", "message"),
    [
        (2, lambda r: {**r, "rewrad": 1.0}, r"candidate record: unknown field\(s\) \['rewrad'\]"),
        (
            5,
            lambda r: {k: v for k, v in r.items() if k != "usage"},
            r"step_end record: missing field\(s\) \['usage'\]",
        ),
        (3, lambda r: {**r, "kind": "candidat"}, r"kind 'candidat' is not one of"),
        (4, None, r"not a JSON record"),
    ],
)
def test_a_malformed_record_stops_the_resume_naming_file_line_and_field(
    task, tmp_path, line, damage, message
):
    """The resume reads the file as typed records: a bad one is one line naming file:line
    and field, and nothing is evaluated, set aside or rewritten."""
    _, lines = _killed_in_step_1(task, tmp_path)
    lines[line - 1] = (
        json.dumps(damage(json.loads(lines[line - 1])), sort_keys=True) + "\n"
        if damage
        else lines[line - 1][:30] + "\n"
    )
    out = tmp_path / "run.jsonl"
    out.write_text("".join(lines))
    ctx = _depth_2(task)
    with pytest.raises(RolloutFormatError, match=rf"^{out}:{line}: {message}"):
        run_search(ctx, out)
    assert out.read_text() == "".join(lines) and ctx.evaluator.calls == []
    assert not out.with_name("run.jsonl.dropped.jsonl").exists()


def test_a_resume_keeps_the_finished_records_byte_for_byte(task, tmp_path):
    """The finished steps stay as written and the step in flight is set aside as written,
    here by an earlier format (no `fingerprint`, no step_end `wall_s`, keys unsorted): its
    records read with their documented defaults, so the run goes on."""
    full, _ = _killed_in_step_1(task, tmp_path)
    cut = next(i for i, r in enumerate(full) if r["kind"] == "step_end")
    old = [dict(r) for r in full[: cut + 3]]
    del old[0]["fingerprint"]
    del old[cut]["wall_s"]
    lines = [json.dumps(dict(reversed(r.items()))) + "\n" for r in old]
    out = tmp_path / "run.jsonl"
    out.write_text("".join(lines))
    ctx = _depth_2(task)
    end = run_search(ctx, out)
    assert out.read_text().startswith("".join(lines[: cut + 1]))
    assert out.with_name("run.jsonl.dropped.jsonl").read_text() == "".join(lines[cut + 1 :])
    assert ctx.evaluator.calls == ["ok:1.2 b", "compile_error b", "ok:1.5 b"]  # step 1 again
    assert end["step_rewards"] == [1.5, 1.5] and end["evaluations"] == 6


def test_a_budget_hit_while_critiquing_ends_the_step_with_its_records(task, tmp_path):
    from maxcode.errors import BudgetExceeded

    class CappedCritic(EchoCritic):
        def critique(self, task, source, result):
            if source.startswith("compile_error"):
                raise BudgetExceeded("critic", "cost_usd", 0.009, 0.01, next_worst=0.002)
            return super().critique(task, source, result)

    end, records, _, _ = run(task, tmp_path, method(critique=True), critic=CappedCritic())
    assert end["stopped_by"].startswith("budget: LLM budget of role 'critic'")
    step0 = [r for r in records if r["kind"] == "candidate" and r["step"] == 0]
    assert len(step0) == 3 and [r["critique"] is not None for r in step0] == [True, False, False]
    assert [r["kind"] for r in records][-2:] == ["step_end", "run_end"]


def test_reranker_executes_only_its_top_m(task, tmp_path):
    m = method(rerank="model", execute_top_m=1)
    end, records, _, evaluator = run(task, tmp_path, m, reranker=LengthReranker())
    assert evaluator.calls == ["ok:1.5 a", "ok:1.5 b", "compile_error c", "ok:3.0 d"]
    assert end["evaluations"] == 4
    skipped = [r for r in records if r["kind"] == "candidate" and r["source"] and not r["executed"]]
    assert skipped and all(r["evaluation"] is None and r["reward"] is None for r in skipped)


def test_random_m_is_seeded(task, tmp_path):
    m = method(rerank="random", execute_top_m=1)
    _, _, _, ev1 = run(task, tmp_path / "x", m)
    _, _, _, ev2 = run(task, tmp_path / "y", m)
    assert ev1.calls == ev2.calls and len(ev1.calls) == 4


def test_evaluation_budget_stops_cleanly(task, tmp_path):
    end, _, _, _ = run(task, tmp_path, method(budget=Budget(max_evaluations=6)))
    assert end["stopped_by"] == "budget: evaluations"
    assert end["evaluations"] == 6 and len(end["step_rewards"]) == 2


def test_target_speedup_stops_early(task, tmp_path):
    end, _, _, _ = run(task, tmp_path, method(target_speedup=1.4))
    assert end["stopped_by"] == "target" and len(end["step_rewards"]) == 1


def test_usage_is_summed_from_policy_and_critic(task, tmp_path):
    end, _, _, _ = run(task, tmp_path, method(critique=True), critic=EchoCritic())
    assert end["usage"]["calls"] == 12 and end["usage"]["input_tokens"] == 120


def test_missing_critic_is_a_clear_error(task, tmp_path):
    with pytest.raises(ValueError, match="critique"):
        run(task, tmp_path, method(critique=True))


def test_llm_budget_exceeded_ends_the_run_cleanly(task, tmp_path):
    from maxcode.errors import BudgetExceeded

    class SpendingPolicy(ScriptedPolicy):
        def propose(self, obs, k, rng):
            if obs.step == 1:
                raise BudgetExceeded("generator", "calls", 3, 3)
            return super().propose(obs, k, rng)

    ctx = RunContext(
        task=task,
        method=method(),
        seed=0,
        policy=SpendingPolicy(SCRIPT),
        evaluator=ScriptedEvaluator(),
    )
    end = run_search(ctx, tmp_path / "run.jsonl")
    assert end["stopped_by"].startswith("budget: LLM budget of role 'generator' reached")
    assert end["step_rewards"] == pytest.approx([1.5])
