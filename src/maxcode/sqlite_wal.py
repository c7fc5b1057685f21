"""Open the project's SQLite caches in WAL mode, safely under concurrent first opens.

Many rollout jobs open the same cache file at once. Switching a database to WAL needs a
moment of exclusive access and SQLite does not always wait for it with the busy handler,
so a job could fail with "database is locked" on its very first statement; here that
switch is retried until the busy timeout, like every other statement.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any


def connect_wal(path: Path, busy_timeout_s: float, **connect_args: Any) -> sqlite3.Connection:
    conn = sqlite3.connect(path, timeout=busy_timeout_s, **connect_args)
    try:
        conn.execute(f"PRAGMA busy_timeout={int(busy_timeout_s * 1000)}")
        deadline = time.monotonic() + busy_timeout_s
        while True:
            try:
                conn.execute("PRAGMA journal_mode=WAL")
                break
            except sqlite3.OperationalError as err:
                if "locked" not in str(err) or time.monotonic() > deadline:
                    raise
                time.sleep(0.02)
        conn.execute("PRAGMA synchronous=NORMAL")
    except sqlite3.DatabaseError:
        conn.close()
        raise
    return conn
