"""Evaluation cache shared by every evaluator and every process of a run.

Key: (task content hash, sha256 of the candidate source, evaluator name + config hash);
value: the EvalResult as JSON. SQLite in WAL mode with a busy timeout lets parallel
Snakemake jobs read and write one file; a result served from here carries ``cached=True``.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from dataclasses import dataclass
from pathlib import Path

from maxcode.evaluate.result import EvalResult
from maxcode.sqlite_wal import connect_wal
from maxcode.tasks.model import Task

SCHEMA = """
CREATE TABLE IF NOT EXISTS results (
    task_hash TEXT NOT NULL,
    source_sha256 TEXT NOT NULL,
    evaluator TEXT NOT NULL,
    result TEXT NOT NULL,
    created REAL NOT NULL DEFAULT (julianday('now')),
    PRIMARY KEY (task_hash, source_sha256, evaluator)
)
"""


@dataclass(frozen=True)
class CacheKey:
    task_hash: str
    source_sha256: str
    evaluator: str  # evaluator name (with version) + "#" + its config hash

    @classmethod
    def of(cls, task: Task, source: str, evaluator: str, config_hash: str = "") -> CacheKey:
        digest = hashlib.sha256(source.encode()).hexdigest()
        return cls(task.content_hash(), digest, f"{evaluator}#{config_hash}")


class EvalCache:
    """``get``/``put`` EvalResults by :class:`CacheKey`; one connection per thread."""

    def __init__(self, path: Path, busy_timeout_s: float = 60.0):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.busy_timeout_s = busy_timeout_s
        self._local = threading.local()
        with self._conn() as conn:
            conn.execute(SCHEMA)

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            try:
                conn = connect_wal(self.path, self.busy_timeout_s)
            except sqlite3.DatabaseError as err:
                hint = (
                    f"another process held it locked for over {self.busy_timeout_s:g} s"
                    if "locked" in str(err)
                    else "delete the file to start an empty cache"
                )
                raise RuntimeError(
                    f"{self.path}: cannot open the evaluation cache ({err}); {hint}"
                ) from err
            self._local.conn = conn
        return conn

    def get(self, key: CacheKey) -> EvalResult | None:
        row = (
            self._conn()
            .execute(
                "SELECT result FROM results WHERE task_hash=? AND source_sha256=? AND evaluator=?",
                (key.task_hash, key.source_sha256, key.evaluator),
            )
            .fetchone()
        )
        if row is None:
            return None
        result = EvalResult.from_dict(json.loads(row[0]))
        result.cached = True
        return result

    def put(self, key: CacheKey, result: EvalResult) -> EvalResult:
        """Store ``result`` unless another process stored one first; return the stored one.

        First writer wins, so every job that asks afterwards, and every replay, sees the
        same verdict and timing for the same candidate.
        """
        d = result.to_dict()
        d["cached"] = False
        with self._conn() as conn:  # one transaction; concurrent writers wait (busy timeout)
            inserted = conn.execute(
                "INSERT OR IGNORE INTO results (task_hash, source_sha256, evaluator, result) "
                "VALUES (?, ?, ?, ?)",
                (key.task_hash, key.source_sha256, key.evaluator, json.dumps(d, sort_keys=True)),
            ).rowcount
        return result if inserted else self.get(key) or result

    def __len__(self) -> int:
        return self._conn().execute("SELECT COUNT(*) FROM results").fetchone()[0]


class CachedEvaluator:
    """Wraps any evaluator; same protocol, results looked up before evaluating."""

    def __init__(self, evaluator, cache: EvalCache):
        self.evaluator = evaluator
        self.cache = cache
        self.name = evaluator.name
        config = getattr(evaluator, "config", None)
        self.config_hash = config.hash() if config is not None and hasattr(config, "hash") else ""

    def key(self, task: Task, source: str) -> CacheKey:
        return CacheKey.of(task, source, self.name, self.config_hash)

    def evaluate(self, task: Task, source: str) -> EvalResult:
        key = self.key(task, source)
        hit = self.cache.get(key)
        if hit is not None:
            return hit
        return self.cache.put(key, self.evaluator.evaluate(task, source))

    def evaluate_many(
        self, task: Task, sources: list[str], progress: bool = False
    ) -> list[EvalResult]:
        """Cached ones from the cache; each distinct new source evaluated once, in parallel."""
        keys = [self.key(task, s) for s in sources]
        found = {k: self.cache.get(k) for k in dict.fromkeys(keys)}
        todo = [k for k, r in found.items() if r is None]
        if todo:
            source_of = dict(zip(keys, sources, strict=True))
            many = getattr(self.evaluator, "evaluate_many", None)
            fresh = (
                many(task, [source_of[k] for k in todo], progress=progress)
                if many is not None
                else [self.evaluator.evaluate(task, source_of[k]) for k in todo]
            )
            for k, r in zip(todo, fresh, strict=True):
                found[k] = self.cache.put(k, r)
        return [found[k] for k in keys]  # type: ignore[misc]
