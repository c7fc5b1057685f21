"""Reward-to-go examples from the corpus of public runs, rewarded by measurements.

Pools come from ``maxcode.runs.pools`` (one label source per problem; our own GPU verdicts
before published labels; ``1000 / runtime_ms`` where the labels give no reference time, so
ranks are exact and absolute speedups are not). Every example records its ``label_source``.

Single attempts are one-step runs (return = reward). Attempts of a multi-turn trajectory get
the max-reward return along the trajectory, ``G_t = max_{k>=t} gamma^(k-t) r_k``, and the
observation text of the feedback and diagnosis that attempt saw.
"""

from __future__ import annotations

from collections import defaultdict

from maxcode.r2g.dataset import DatasetParams, R2GDataset, R2GExample, split_tasks
from maxcode.r2g.prompt import build_prompt, format_target
from maxcode.runs.pools import Pool, reward
from maxcode.runs.record import Attempt


def observation_of(a: Attempt) -> str:
    """What the attempt's prompt carried from earlier attempts; "" for a first attempt."""
    parts = []
    if a.feedback:
        parts.append(f"feedback on the previous attempt:\n{a.feedback}")
    if a.diagnosis:
        parts.append(f"diagnosis of the previous attempt:\n{a.diagnosis}")
    return "\n\n".join(parts)


def pool_examples(pool: Pool, gamma: float, max_prompt_chars: int) -> list[R2GExample]:
    """One example per distinct program of the pool, in a stable order."""
    rewards = {r.code_hash: reward(m) for r, m in pool.members}
    # returns along trajectories: the attempts of one trajectory, in turn order, by program
    steps: dict[str, list[tuple[int, str]]] = defaultdict(list)
    for r, _ in pool.members:
        for a in r.attempts:
            if a.trajectory and a.turn is not None:
                steps[a.trajectory].append((a.turn, r.code_hash))
    value = dict(rewards)
    for seq in steps.values():
        seq.sort()
        running = 0.0
        for _, h in reversed(seq):
            running = max(rewards[h], gamma * running)
            value[h] = max(value[h], running)
    out = []
    members = sorted(pool.members, key=lambda rm: rm[0].code_hash)
    for i, (r, m) in enumerate(members):
        first = min(r.attempts, key=lambda a: (a.turn or 0, a.repo, a.run))
        obs = observation_of(first)
        out.append(
            R2GExample(
                task_id=pool.problem,
                suite=f"kernelbench-L{pool.level}",
                prompt=build_prompt(obs, r.code, max_prompt_chars),
                target=format_target(value[r.code_hash]),
                value=value[r.code_hash],
                run_id=f"{pool.label_source}:{pool.problem}",
                step=0,
                proposal_index=i,
                candidate_id=r.key,
                reward=reward(m),
                observation_text=obs,
                source=r.code,
            )
        )
    return out


def held_out_problems(pools: list[Pool], test_fraction: float, seed: int) -> set[str]:
    """The problems ("L2/12_Gemm.py") the hash split holds out, per level, of these pools."""
    tasks = {(f"kernelbench-L{p.level}", p.problem) for p in pools}
    return {problem for _, problem in split_tasks(tasks, test_fraction, seed)}


def corpus_dataset(
    pools: list[Pool],
    gamma: float,
    test_fraction: float,
    seed: int,
    max_prompt_chars: int,
    held_out: list[str] | None = None,
) -> R2GDataset:
    """Examples split by problem (per level, by hash of the problem and the seed), or with
    exactly the ``held_out`` problems held out."""
    params = DatasetParams(
        gamma=gamma,
        test_fraction=test_fraction,
        seed=seed,
        max_prompt_chars=max_prompt_chars,
        with_descriptions=False,
    )
    tasks = {(f"kernelbench-L{p.level}", p.problem) for p in pools}
    held = set(held_out) if held_out is not None else held_out_problems(pools, test_fraction, seed)
    test = {(s, p) for s, p in tasks if p in held}
    train, held = [], []
    for p in pools:
        examples = pool_examples(p, gamma, max_prompt_chars)
        (held if (f"kernelbench-L{p.level}", p.problem) in test else train).extend(examples)
    return R2GDataset(train=train, test=held, params=params)
