"""Synthetic rollout files in the format of docs/records.md, for tests and benchmarks.

The programs are real C++ text; the rewards are not measured: each task hides a
speedup factor per source transformation (fast I/O, no endl, reserve, prefix sums)
and a candidate's reward is the product of the factors of the transformations it
carries, times log-normal timing noise, or 0 when it carries a planted bug or does not
compile. So the value a reranker should learn is visible in the code, as in real
rollouts, and every file is labelled ``synthetic`` in its run_start record.
"""

from __future__ import annotations

import random
from pathlib import Path

from maxcode.evaluate.result import EvalResult, Status, TestVerdict, Timing
from maxcode.llm.usage import Usage
from maxcode.records import JsonlWriter, sha256_text
from maxcode.search.records import REFERENCE_ID, CandidateRecord, RunEnd, RunId, RunStart, StepEnd
from maxcode.search.returns import step_returns

TRANSFORMS = ("fast_io", "no_endl", "reserve", "prefix_sum")
_BREAKS = (("wrong_answer", 0.15), ("compile_error", 0.08))


def write_synthetic_rollouts(
    out_dir: Path,
    n_tasks: int,
    seeds: int = 1,
    depth: int = 3,
    k: int = 4,
    suite: str = "synthetic-cpp",
    seed: int = 0,
    gamma: float = 0.9,
) -> list[Path]:
    """One run per task x seed at ``<out_dir>/<suite>/synthetic/<task>/seed<s>.jsonl``."""
    paths = []
    for t in range(n_tasks):
        task_id = f"p{t:03d}"
        task_rng = random.Random(f"{seed}:{suite}:{task_id}")
        factors = {
            "fast_io": task_rng.uniform(1.0, 2.5),
            "no_endl": task_rng.uniform(1.0, 1.6),
            "reserve": task_rng.uniform(1.0, 1.2),
            "prefix_sum": task_rng.choice([1.0, task_rng.uniform(3.0, 12.0)]),
        }
        helpers = task_rng.randint(2, 12)
        for s in range(seeds):
            path = Path(out_dir) / suite / "synthetic" / task_id / f"seed{s}.jsonl"
            if path.exists():
                path.unlink()
            _write_run(path, suite, task_id, s, factors, helpers, depth, k, gamma, seed)
            paths.append(path)
    return paths


def program(transforms: frozenset[str], breaks: str | None, helpers: int, task_id: str) -> str:
    """A C++ solution of a range-sum task carrying the given transformations."""
    lines = ["#include <bits/stdc++.h>", "using namespace std;", f"// task {task_id}"]
    for h in range(helpers):
        lines += [
            f"static long long helper{h}(long long x) {{",
            f"    return x * {h + 3} % 1000003;",
            "}",
        ]
    lines += ["int main() {"]
    if "fast_io" in transforms:
        lines += ["    ios::sync_with_stdio(false);", "    cin.tie(nullptr);"]
    lines += ["    int n, q;", "    cin >> n >> q;", "    vector<long long> a;"]
    if "reserve" in transforms:
        lines += ["    a.reserve(n);"]
    bound = "i <= n" if breaks == "wrong_answer" else "i < n"
    semi = "" if breaks == "compile_error" else ";"
    lines += [
        f"    for (int i = 0; {bound}; ++i) {{ long long x; cin >> x; a.push_back(x){semi} }}",
    ]
    if "prefix_sum" in transforms:
        lines += [
            "    vector<long long> pre(n + 1, 0);",
            "    for (int i = 0; i < n; ++i) pre[i + 1] = pre[i] + a[i];",
        ]
    lines += ["    while (q--) {", "        int l, r;", "        cin >> l >> r;"]
    if "prefix_sum" in transforms:
        lines += ["        long long s = pre[r] - pre[l];"]
    else:
        lines += ["        long long s = 0;", "        for (int i = l; i < r; ++i) s += a[i];"]
    end = "'\\n'" if "no_endl" in transforms else "endl"
    lines += [f"        cout << s << {end};", "    }", "    return 0;", "}"]
    return "\n".join(lines) + "\n"


def _write_run(
    path: Path,
    suite: str,
    task_id: str,
    run_seed: int,
    factors: dict[str, float],
    helpers: int,
    depth: int,
    k: int,
    gamma: float,
    seed: int,
) -> None:
    rng = random.Random(f"{seed}:{suite}:{task_id}:run{run_seed}")
    reference_cost = rng.uniform(0.5, 3.0)
    best_id, best_reward, best_transforms = REFERENCE_ID, 0.0, frozenset()
    history: list[str] = []
    step_rewards = []
    with JsonlWriter(path) as w:
        w.write(
            RunStart(
                run=RunId(suite, task_id, "synthetic", run_seed),
                config={"depth": depth, "k": k, "gamma": gamma},
                reward_kind="speedup",
                policy={"name": "synthetic-transforms/1", "offline": True},
                critic=None,
                reranker=None,
                evaluator="synthetic",
                task_hash=sha256_text(program(frozenset(), None, helpers, task_id)),
                provenance={"generator": "maxcode.r2g.synthetic", "seed": seed},
                synthetic=True,
            ).to_dict()
        )
        evaluations = 0
        for step in range(depth):
            obs_text = "\n".join(
                [
                    f"task={task_id} suite={suite} step={step + 1}/{depth}",
                    f"best_discounted_reward={best_reward:.3f}",
                    *history[-6:],
                ]
            )
            step_best = 0.0
            new_best = (best_id, best_reward, best_transforms)
            for i in range(k):
                extra = rng.choice(
                    [t for t in TRANSFORMS if t not in best_transforms] or ["reserve"]
                )
                transforms = best_transforms | {extra}
                breaks = next((b for b, p in _BREAKS if rng.random() < p), None)
                source = program(transforms, breaks, helpers, task_id)
                result = _result(transforms, breaks, factors, reference_cost, rng)
                reward = result.speedup or 0.0
                cid = sha256_text(source)[:16]
                w.write(
                    CandidateRecord(
                        step=step,
                        proposal_index=i,
                        candidate_id=cid,
                        parent_id=best_id,
                        source=source,
                        executed=True,
                        rerank_score=None,
                        rerank_fallback=None,
                        evaluation=result.to_dict(),
                        reward=reward,
                        critique=None,
                        observation_text=obs_text,
                        best_discounted_reward=best_reward,
                        usage=Usage(),
                        prompt_version=None,
                        meta={"transforms": sorted(transforms), "breaks": breaks},
                    ).to_dict()
                )
                evaluations += 1
                history.append(f"attempt s{step}#{i}: reward={reward:.3f}; {_feedback(result)}")
                step_best = max(step_best, reward)
                if reward > new_best[1]:
                    new_best = (cid, reward, transforms)
            best_id, best_reward, best_transforms = new_best
            step_rewards.append(step_best)
            w.write(
                StepEnd(
                    step=step,
                    step_reward=step_best,
                    best_reward=best_reward,
                    best_candidate_id=None if best_id == REFERENCE_ID else best_id,
                    usage=Usage(),
                    evaluations=evaluations,
                ).to_dict()
            )
        w.write(
            RunEnd(
                best_reward=best_reward,
                best_candidate_id=None if best_id == REFERENCE_ID else best_id,
                step_rewards=step_rewards,
                step_returns=step_returns(step_rewards, gamma),
                stopped_by="depth",
                usage=Usage(),
                evaluations=evaluations,
                wall_s=0.0,
            ).to_dict()
        )


def _feedback(result: EvalResult) -> str:
    """Feedback in the shape of maxcode.search.observation.format_feedback."""
    if result.timing is not None:
        t = result.timing
        return (
            f"{result.status.value}; {result.tests_passed}/{len(result.tests)} tests passed; "
            f"{t.mode} {t.candidate:.4f}{t.unit} vs reference {t.reference:.4f}{t.unit}"
        )
    return f"{result.status.value}: {result.reason}"


def _result(
    transforms: frozenset[str],
    breaks: str | None,
    factors: dict[str, float],
    reference_cost: float,
    rng: random.Random,
) -> EvalResult:
    if breaks == "compile_error":
        return EvalResult(
            Status.COMPILE_ERROR,
            reason="expected ';' before '}' token",
            compile_log="main.cpp:12: error: expected ';' before '}' token",
            evaluator="synthetic",
        )
    if breaks == "wrong_answer":
        return EvalResult(
            Status.WRONG_ANSWER,
            reason="test 0: line 1: expected '15' got '21'",
            tests=[TestVerdict(0, Status.WRONG_ANSWER, reason="line 1: expected '15' got '21'")],
            evaluator="synthetic",
        )
    speedup = 1.0
    for t in transforms:
        speedup *= factors[t]
    speedup *= rng.lognormvariate(0.0, 0.05)
    return EvalResult(
        Status.OK,
        tests=[TestVerdict(i, Status.OK, runtime_s=reference_cost / speedup / 5) for i in range(5)],
        timing=Timing("wall", "s", reference_cost / speedup, reference_cost, repeats=5),
        evaluator="synthetic",
    )
