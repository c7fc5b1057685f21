"""Response cache keyed by content: a rerun is an exact replay with zero API calls.

SQLite in WAL mode with a busy timeout, so parallel Snakemake jobs share one file
safely; the first writer of a key wins and every reader sees the same completion.
Each completion is stored the moment it arrives, so an interrupted run never pays
twice for what it already got.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from pathlib import Path

from maxcode.llm.backend import Completion, SamplingParams
from maxcode.sqlite_wal import connect_wal

SCHEMA_VERSION = 1


def cache_key(
    backend: str, model: str, messages: list[dict], params: SamplingParams, sample_index: int
) -> str:
    """sha256 of the canonical JSON of everything that decides a completion."""
    payload = {
        "v": SCHEMA_VERSION,
        "backend": backend,
        "model": model,
        "messages": messages,
        "params": params.to_dict(),
        "sample": sample_index,
    }
    blob = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()


class ResponseCache:
    def __init__(self, path: Path | str, busy_timeout_s: float = 60.0):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        try:
            self._db = connect_wal(
                self.path, busy_timeout_s, check_same_thread=False, isolation_level=None
            )
        except sqlite3.DatabaseError as err:
            raise sqlite3.DatabaseError(
                f"{self.path}: not a usable response cache ({err}); move it away to start a new one"
            ) from err
        with self._lock:
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS completions ("
                " key TEXT PRIMARY KEY, identity TEXT NOT NULL,"
                " completion TEXT NOT NULL, created REAL NOT NULL)"
            )

    def get(self, key: str) -> Completion | None:
        with self._lock:
            row = self._db.execute(
                "SELECT completion FROM completions WHERE key = ?", (key,)
            ).fetchone()
        if row is None:
            return None
        completion = Completion.from_dict(json.loads(row[0]))
        completion.cached = True
        return completion

    def put(self, key: str, identity: str, completion: Completion) -> Completion:
        """Store unless present; returns the stored completion (another job may have won)."""
        blob = json.dumps(completion.to_dict(), sort_keys=True, ensure_ascii=False)
        with self._lock:
            self._db.execute(
                "INSERT OR IGNORE INTO completions (key, identity, completion, created)"
                " VALUES (?, ?, ?, ?)",
                (key, identity, blob, time.time()),
            )
            stored = self._db.execute(
                "SELECT completion FROM completions WHERE key = ?", (key,)
            ).fetchone()[0]
        if stored == blob:
            return completion
        return Completion.from_dict(json.loads(stored))

    def __len__(self) -> int:
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM completions").fetchone()[0]

    def close(self) -> None:
        with self._lock:
            self._db.close()
