"""Replay: a policy that proposes a problem's real candidates, and an evaluator that returns
their recorded measurements.

``ReplayPolicy`` answers no prompt: for a task it draws programs without replacement from the
corpus pool of that problem (same level, file name and reference text), in an order fixed by
the seed, and records each program's code hash in the proposal. Tables made with it test
selection (reranking, best-of-n), never the observation: the trajectory, critique and
best-so-far ablations have no effect under replay.

``ReplayEvaluator`` stands in for the CUDA evaluator on a machine without a GPU: it returns the
measurement exported by ``maxcode eval runs`` for (code hash, task hash) and refuses a
candidate it has none for, so a replayed table holds only measured numbers.

``ReplayCorpus`` builds both for a pipeline run: the pools of ``maxcode.r2g.corpus`` (our
measurements where a problem has any, else the usable published labels of one GPU; a pool
never mixes label sources), the policy drawing only from a pool's scored programs, and the
evaluator serving each program's row of its pool's source.
"""

from __future__ import annotations

import hashlib
import random
from pathlib import Path

from maxcode.errors import UserError
from maxcode.evaluate.result import EvalResult, Status, Timing
from maxcode.runs.evaluate import read_measurements
from maxcode.runs.pools import INVERSE_RUNTIME, Measured, Pool, build_pools
from maxcode.runs.record import CorpusRecord, code_hash, read_corpus, text_hash
from maxcode.search.types import Observation, Proposal
from maxcode.tasks.model import Task

REPLAY_VERSION = "replay/1"
PUBLISHED_STATUS = {"compile_error": "compile_error", "runtime_error": "runtime_error"}


class ReplayMissing(UserError):
    """The replay evaluator holds no measurement for a candidate; the message names it."""


def pool_key(task: Task) -> tuple[int, str, str]:
    """(level, KernelBench file name, reference hash) of a KernelBench-format task."""
    meta = task.metadata or {}
    if "level" not in meta or "file_name" not in meta:
        raise UserError(
            f"task {task.task_id}: replay needs a KernelBench task (metadata level and file_name)"
        )
    return int(meta["level"]), str(meta["file_name"]), text_hash(task.reference_source)


class ReplayPolicy:
    """Proposes a problem's corpus programs, without replacement, in a seeded order."""

    offline = True

    def __init__(self, records: list[CorpusRecord], seed: int = 0):
        self.name = f"{REPLAY_VERSION}+seed{seed}"
        self.seed = seed
        self._pools: dict[tuple[int, str, str], list[CorpusRecord]] = {}
        for r in records:
            key = (r.problem.level, r.problem.file_name, r.problem.reference_hash)
            self._pools.setdefault(key, []).append(r)
        self._left: dict[tuple[int, str, str], list[CorpusRecord]] = {}

    @classmethod
    def from_corpus(cls, corpus: Path, seed: int = 0) -> ReplayPolicy:
        return cls(read_corpus(corpus), seed)

    def pool_size(self, task: Task) -> int:
        return len(self._pools.get(pool_key(task), []))

    def propose(self, obs: Observation, k: int, rng: random.Random) -> list[Proposal]:
        """``k`` programs not proposed before for this task; fewer, then none, when the pool
        runs out (said in the proposals' reason). ``rng`` is not used: the order depends
        only on the seed and the programs, so every method replays the same draws."""
        key = pool_key(obs.task)
        if key not in self._left:
            members = sorted(
                self._pools.get(key, []),
                key=lambda r: hashlib.sha256(f"{self.seed}:{r.code_hash}".encode()).hexdigest(),
            )
            self._left[key] = members
        left = self._left[key]
        drawn, self._left[key] = left[:k], left[k:]
        out = [
            Proposal(
                source=r.code,
                meta={
                    "replay": True,
                    "replay_seed": self.seed,
                    "code_hash": r.code_hash,
                    "sources": sorted({f"{a.repo}:{a.run}" for a in r.attempts}),
                },
            )
            for r in drawn
        ]
        if len(out) < k:
            out += Proposal.unsupported(
                k - len(out),
                f"replay: the corpus pool of {key[1]} (level {key[0]}) has no more programs",
            )
        return out


class ReplayEvaluator:
    """Returns the exported measurement of (code hash, task hash); refuses the rest."""

    def __init__(self, measurements: dict[tuple[str, str], dict], source: str = ""):
        evaluators = sorted(
            {f"{row['evaluator']} on {row['gpu']}" for row in measurements.values()}
        )
        self.name = f"{REPLAY_VERSION}({'; '.join(evaluators)})"
        self.measurements = measurements
        self.source = source

    @classmethod
    def from_file(cls, path: Path) -> ReplayEvaluator:
        return cls(read_measurements(path), str(path))

    def evaluate(self, task: Task, source: str) -> EvalResult:
        key = (code_hash(source), text_hash(task.reference_source))
        row = self.measurements.get(key)
        if row is None:
            raise ReplayMissing(
                f"{self.source or 'measurements'}: no measurement of program {key[0][:12]} on "
                f"task {task.task_id} ({key[1][:12]}); measure it with `maxcode eval runs` on a GPU"
            )
        timing = None
        if row.get("reference_ms") is not None and row.get("runtime_ms") is not None:
            timing = Timing("replayed", "ms", row["runtime_ms"], row["reference_ms"])
        return EvalResult(
            status=Status(row["status"]),
            reason=row.get("reason", ""),
            timing=timing,
            evaluator=f"{REPLAY_VERSION}: {row['evaluator']} on {row['gpu']}",
        )

    def evaluate_many(
        self, task: Task, sources: list[str], progress: bool = False
    ) -> list[EvalResult]:
        return [self.evaluate(task, s) for s in sources]


class ReplayCorpus:
    """The programs a replayed run may propose, and the rows that score them when
    recorded outcomes stand in for the evaluator (``rows`` is None: measure them here)."""

    def __init__(self, records: list[CorpusRecord], rows: dict[tuple[str, str], dict] | None):
        self.records = records
        self.rows = rows

    @classmethod
    def load(
        cls, corpus: Path, measurements: list[Path] | tuple[Path, ...] = (), published=False
    ) -> ReplayCorpus:
        """Every program of ``corpus`` when nothing is replayed; else the programs of each
        problem's pool, with our measurements (the first file holding a program wins) taking
        precedence over the published labels."""
        records = read_corpus(Path(corpus) / "corpus.jsonl")
        if not measurements and not published:
            return cls(records, None)
        ours: dict[tuple[str, str], dict] = {}
        for path in measurements:
            for key, row in read_measurements(Path(path)).items():
                ours.setdefault(key, row)
        members, rows = [], {}
        for pool in build_pools(records, ours, published=published):
            for record, measured in pool.members:
                key = (record.code_hash, record.problem.reference_hash)
                members.append(record)
                rows[key] = (
                    {**ours[key], "label_source": pool.label_source}
                    if pool.label_source.startswith("ours/")
                    else _published_row(pool, record, measured)
                )
        return cls(members, rows)

    def policy(self, seed: int) -> ReplayPolicy:
        return ReplayPolicy(self.records, seed)

    def evaluator(self, source: str) -> ReplayEvaluator | None:
        return ReplayEvaluator(self.rows, source) if self.rows is not None else None


def _published_row(pool: Pool, record: CorpusRecord, measured: Measured) -> dict:
    """A published label as a measurement row: times such that reference / candidate is the
    pool's reward (``1000 / runtime_ms`` where the label has no reference time)."""
    gpu = pool.label_source.removeprefix("published/")
    label = next(a.label for a in record.attempts if a.label.usable and a.label.gpu == gpu)
    runtime = reference = None
    if measured.correct:
        status = "ok"
        runtime = measured.runtime_ms or 1.0
        reference = (
            1000.0 if pool.reward_kind == INVERSE_RUNTIME else float(measured.speedup) * runtime
        )
    else:
        status = PUBLISHED_STATUS.get(label.verdict, "wrong_answer")
    inverse = " (reward 1000/runtime_ms)" if pool.reward_kind == INVERSE_RUNTIME else ""
    return {
        "status": status,
        "reason": label.error,
        "runtime_ms": runtime,
        "reference_ms": reference,
        "evaluator": f"published label, {label.harness}{inverse}",
        "gpu": gpu,
        "label_source": pool.label_source,
    }
