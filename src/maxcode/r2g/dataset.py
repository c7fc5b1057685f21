"""Reward-to-go training data from rollout records.

Each executed candidate becomes one example: the prompt (task description, the
observation text the search showed at that step, the candidate's code) and its
max-reward return over its descendants (``maxcode.search.returns.candidate_returns``).
Tasks, never candidates, are split between train and test, by a hash of the task id
and the seed, so the split is the same on every machine and for any file order.
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from maxcode.errors import RolloutFormatError
from maxcode.r2g.prompt import PROMPT_VERSION, build_prompt, format_target
from maxcode.records import atomic_write_json, atomic_write_text
from maxcode.search.records import CandidateRecord, RunEnd, RunStart, read_records
from maxcode.search.returns import candidate_returns

SPLITS = ("train", "test")
QUANTILES = (0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0)


@dataclass(frozen=True)
class R2GExample:
    task_id: str
    suite: str
    prompt: str
    target: str  # the return as the generative model writes it
    value: float  # the return G(c) = max(r(c), gamma * max over children)
    run_id: str  # suite/method/task_id/seed<k>: with step, the group the reranker chose from
    step: int
    proposal_index: int
    candidate_id: str
    reward: float  # the candidate's own measured reward
    observation_text: str
    source: str
    description: str = ""

    @property
    def group(self) -> tuple[str, int]:
        return (self.run_id, self.step)


@dataclass(frozen=True)
class DatasetParams:
    """What decides the examples; saved with every model so scoring builds the same prompts."""

    gamma: float
    test_fraction: float
    seed: int
    max_prompt_chars: int
    with_descriptions: bool
    prompt_version: str = PROMPT_VERSION


@dataclass
class R2GDataset:
    train: list[R2GExample]
    test: list[R2GExample]
    params: DatasetParams
    skipped: dict[str, int] = field(default_factory=dict)  # why rollout runs/records were left out
    sources: list[str] = field(default_factory=list)  # the rollout files read

    def split(self, name: str) -> list[R2GExample]:
        if name not in SPLITS:
            raise ValueError(f"unknown split {name!r}; choose one of {list(SPLITS)}")
        return self.train if name == "train" else self.test

    def card(self) -> dict:
        """Counts per split and suite, and the target distribution: what a reader must know."""
        splits = {}
        for name in SPLITS:
            rows = self.split(name)
            per_suite: dict[str, dict] = {}
            for suite in sorted({e.suite for e in rows}):
                ex = [e for e in rows if e.suite == suite]
                per_suite[suite] = {
                    "examples": len(ex),
                    "tasks": len({e.task_id for e in ex}),
                    "runs": len({e.run_id for e in ex}),
                    "groups": len({e.group for e in ex}),
                    "target": _distribution([e.value for e in ex]),
                }
            splits[name] = {
                "examples": len(rows),
                "tasks": len({(e.suite, e.task_id) for e in rows}),
                "target": _distribution([e.value for e in rows]),
                "suites": per_suite,
            }
        train_tasks = {(e.suite, e.task_id) for e in self.train}
        test_tasks = {(e.suite, e.task_id) for e in self.test}
        return {
            "params": asdict(self.params),
            "splits": splits,
            "task_overlap": len(train_tasks & test_tasks),
            "skipped": dict(sorted(self.skipped.items())),
            "rollout_files": len(self.sources),
        }


def build_dataset(
    rollout_paths: Iterable[Path],
    gamma: float,
    test_fraction: float,
    seed: int,
    max_prompt_chars: int,
    descriptions: Mapping[str, str] | None = None,
    all_tasks: set[tuple[str, str]] | None = None,
) -> R2GDataset:
    """Examples for every executed candidate of every complete run, split by task.

    ``descriptions`` maps ``"suite/task_id"`` to the task description; when given,
    every task must be in it (the reranker then reads ``obs.task.description``).
    ``all_tasks`` (suite, task_id) is the set the split is drawn over; pass the suites'
    full task list so the test split is exactly the held-out set that the reranked
    search runs on, even when some task left no executed candidate. Default: the tasks
    found in the rollouts.
    """
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction}")
    params = DatasetParams(
        gamma=gamma,
        test_fraction=test_fraction,
        seed=seed,
        max_prompt_chars=max_prompt_chars,
        with_descriptions=descriptions is not None,
    )
    paths = sorted({str(Path(p)) for p in rollout_paths})
    if not paths:
        raise ValueError("no rollout files given; run the rollouts stage first")
    examples: list[R2GExample] = []
    skipped: dict[str, int] = defaultdict(int)
    for path in paths:
        examples.extend(_examples_of_run(Path(path), params, descriptions, skipped))
    if not examples:
        raise ValueError(
            f"the {len(paths)} rollout files hold no executed candidate of a complete run "
            f"(skipped: {dict(skipped)}); check that the rollouts stage finished"
        )
    found = {(e.suite, e.task_id) for e in examples}
    if all_tasks is not None and not found <= all_tasks:
        extra = sorted(f"{s}/{t}" for s, t in found - all_tasks)
        raise ValueError(
            f"rollouts hold tasks {extra[:5]} that are not in the task list given for the "
            "split; pass every suite's tasks"
        )
    test_tasks = split_tasks(found if all_tasks is None else all_tasks, test_fraction, seed)
    key = lambda e: (e.suite, e.task_id, e.run_id, e.step, e.proposal_index)  # noqa: E731
    train = sorted((e for e in examples if (e.suite, e.task_id) not in test_tasks), key=key)
    test = sorted((e for e in examples if (e.suite, e.task_id) in test_tasks), key=key)
    return R2GDataset(train, test, params, dict(skipped), paths)


def split_tasks(
    tasks: set[tuple[str, str]], test_fraction: float, seed: int
) -> set[tuple[str, str]]:
    """Test tasks: per suite, the ``round(fraction * n)`` tasks with the smallest hash.

    Every suite with two or more tasks gets at least one test and one train task; a
    suite with one task stays in train (the card shows it has no test examples).
    """
    by_suite: dict[str, list[str]] = defaultdict(list)
    for suite, task_id in tasks:
        by_suite[suite].append(task_id)
    test: set[tuple[str, str]] = set()
    for suite, ids in by_suite.items():
        if len(ids) < 2:
            continue
        n_test = min(len(ids) - 1, max(1, round(test_fraction * len(ids))))
        ranked = sorted(ids, key=lambda t: hashlib.sha256(f"{seed}:{suite}/{t}".encode()).digest())
        test.update((suite, t) for t in ranked[:n_test])
    return test


def _examples_of_run(
    path: Path,
    params: DatasetParams,
    descriptions: Mapping[str, str] | None,
    skipped: dict[str, int],
) -> list[R2GExample]:
    records = read_records(path)
    starts = [r for r in records if isinstance(r, RunStart)]
    if len(starts) != 1:
        raise RolloutFormatError(
            f"{path}: expected one run_start record, found {len(starts)}; "
            "each rollout file holds one run (docs/records.md)"
        )
    if not any(isinstance(r, RunEnd) for r in records):
        skipped["incomplete_runs"] += 1
        return []
    run = starts[0].run
    suite, task_id = run.suite, run.task_id
    run_id = f"{suite}/{run.method}/{task_id}/seed{run.seed}"
    description = ""
    if descriptions is not None:
        if f"{suite}/{task_id}" not in descriptions:
            raise ValueError(
                f"{path}: task {suite}/{task_id} has no description in the task list given; "
                "pass the suite's tasks or no descriptions at all"
            )
        description = descriptions[f"{suite}/{task_id}"]

    executed: list[CandidateRecord] = []
    for lineno, r in enumerate(records, 1):
        if not isinstance(r, CandidateRecord):
            continue
        if not r.executed:
            skipped["unexecuted_candidates"] += 1
            continue
        for name in ("candidate_id", "source", "reward"):
            if getattr(r, name) is None:
                raise RolloutFormatError(
                    f"{path}: candidate record {lineno} is executed but has no {name!r}"
                )
        executed.append(r)
    returns = candidate_returns(
        ((r.candidate_id, r.parent_id, float(r.reward)) for r in executed), params.gamma
    )
    out = []
    for r in executed:
        value = returns[r.candidate_id]
        out.append(
            R2GExample(
                task_id=task_id,
                suite=suite,
                prompt=build_prompt(
                    r.observation_text, r.source, params.max_prompt_chars, description
                ),
                target=format_target(value),
                value=value,
                run_id=run_id,
                step=r.step,
                proposal_index=r.proposal_index,
                candidate_id=r.candidate_id,
                reward=float(r.reward),
                observation_text=r.observation_text,
                source=r.source,
                description=description,
            )
        )
    return out


def _distribution(values: list[float]) -> dict:
    if not values:
        return {"n": 0}
    arr = np.asarray(values, dtype=float)
    return {
        "n": len(values),
        "mean": round(float(arr.mean()), 4),
        "zero_share": round(float((arr == 0.0).mean()), 4),
        "quantiles": {f"p{int(q * 100)}": round(float(np.quantile(arr, q)), 4) for q in QUANTILES},
    }


def write_dataset(dataset: R2GDataset, out_dir: Path) -> None:
    """``train.jsonl``, ``test.jsonl``, ``card.json`` and ``card.md``, each published atomically."""
    out_dir = Path(out_dir)
    for name in SPLITS:
        rows = dataset.split(name)
        atomic_write_text(
            out_dir / f"{name}.jsonl",
            "".join(json.dumps(asdict(e), sort_keys=True) + "\n" for e in rows),
        )
    card = dataset.card()
    atomic_write_json(out_dir / "card.json", {**card, "files": dataset.sources})
    atomic_write_text(out_dir / "card.md", card_markdown(card))


def read_dataset(out_dir: Path) -> R2GDataset:
    out_dir = Path(out_dir)
    card_path = out_dir / "card.json"
    if not card_path.is_file():
        raise FileNotFoundError(f"{card_path}: no dataset card; build the r2g dataset first")
    card = json.loads(card_path.read_text())
    splits = {}
    for name in SPLITS:
        path = out_dir / f"{name}.jsonl"
        if not path.is_file():
            raise FileNotFoundError(f"{path}: missing split file; rebuild the r2g dataset")
        rows = []
        for lineno, line in enumerate(path.read_text().splitlines(), 1):
            try:
                rows.append(R2GExample(**json.loads(line)))
            except (json.JSONDecodeError, TypeError) as err:
                raise RolloutFormatError(f"{path}:{lineno}: not an r2g example ({err})") from err
        splits[name] = rows
    return R2GDataset(
        splits["train"],
        splits["test"],
        DatasetParams(**card["params"]),
        dict(card.get("skipped", {})),
        list(card.get("files", [])),
    )


def card_markdown(card: dict) -> str:
    p = card["params"]
    lines = [
        "# Reward-to-go dataset card",
        "",
        f"Targets are max-reward returns over each executed candidate's descendants "
        f"(gamma={p['gamma']}). Split by task with seed {p['seed']}, "
        f"test fraction {p['test_fraction']}; prompts cut to {p['max_prompt_chars']} characters "
        f"({p['prompt_version']}, task descriptions: {'yes' if p['with_descriptions'] else 'no'}).",
        f"Rollout files read: {card['rollout_files']}; tasks in both splits: {card['task_overlap']}; "
        f"left out: {card['skipped'] or 'nothing'}.",
        "",
        "| split | suite | examples | tasks | runs | groups | mean | zero share | p10 | p50 | p90 | max |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, s in card["splits"].items():
        for suite, row in s["suites"].items():
            t = row["target"]
            q = t["quantiles"]
            lines.append(
                f"| {name} | {suite} | {row['examples']} | {row['tasks']} | {row['runs']} | "
                f"{row['groups']} | {t['mean']:.3f} | {t['zero_share']:.2f} | {q['p10']:.3f} | "
                f"{q['p50']:.3f} | {q['p90']:.3f} | {q['p100']:.3f} |"
            )
    return "\n".join(lines) + "\n"
