"""Caches opened by many jobs at once: the switch to WAL must wait, not fail."""

from __future__ import annotations

import multiprocessing
import time
from pathlib import Path

from maxcode.evaluate.cache import EvalCache

OPENERS = 12


def _open_at(args: tuple[str, float]) -> str | None:
    path, start = args
    while time.time() < start:  # all processes open the new file at the same moment
        pass
    try:
        EvalCache(Path(path))
    except Exception as err:  # the verdict is the message, checked below
        return str(err)
    return None


def test_simultaneous_first_opens_of_one_file_all_succeed(tmp_path):
    """Without retrying the WAL switch, about 5% of such opens failed with 'database is locked'."""
    failures = []
    with multiprocessing.get_context("fork").Pool(OPENERS) as pool:
        for round_ in range(20):
            path = str(tmp_path / f"cache{round_}.sqlite")
            start = time.time() + 0.2
            results = pool.map(_open_at, [(path, start)] * OPENERS, chunksize=1)
            failures += [r for r in results if r]
    assert failures == []
