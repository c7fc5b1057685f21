"""The report's 80/20 split of KernelBench level-1 tasks with seed 42, the same everywhere.

The order before shuffling is the natural order of task ids (problem numbers compared
as numbers), not the file system's, and the shuffle is ``random.Random(seed)``, whose
Mersenne Twister sequence Python guarantees across platforms; the split file carries
a hash of its ids so two machines can compare it at a glance.
"""

from __future__ import annotations

import hashlib
import random
import re
from dataclasses import dataclass

from maxcode.kernelcompare.config import SplitConfig
from maxcode.tasks.model import Task

_NUMBER = re.compile(r"(\d+)")


def natural_key(task_id: str) -> tuple:
    """``kernelbench-L1-10`` sorts after ``kernelbench-L1-9``."""
    return tuple(int(part) if part.isdigit() else part for part in _NUMBER.split(task_id))


@dataclass(frozen=True)
class Split:
    train: tuple[str, ...]
    test: tuple[str, ...]
    seed: int
    train_fraction: float

    @property
    def fingerprint(self) -> str:
        text = "|".join(self.train) + "#" + "|".join(self.test)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def to_dict(self) -> dict:
        return {
            "train": list(self.train),
            "test": list(self.test),
            "seed": self.seed,
            "train_fraction": self.train_fraction,
            "fingerprint": self.fingerprint,
        }

    @classmethod
    def from_dict(cls, d: dict, source: str = "split") -> Split:
        try:
            split = cls(tuple(d["train"]), tuple(d["test"]), d["seed"], d["train_fraction"])
        except KeyError as err:
            raise ValueError(
                f"{source}: split file lacks key {err}; rerun the split stage"
            ) from err
        if d.get("fingerprint") not in (None, split.fingerprint):
            raise ValueError(f"{source}: fingerprint does not match its ids; the file was edited")
        return split


def split_ids(task_ids: list[str], config: SplitConfig | None = None) -> Split:
    config = config or SplitConfig()
    if len(set(task_ids)) != len(task_ids):
        dupes = sorted({t for t in task_ids if task_ids.count(t) > 1})
        raise ValueError(f"task ids must be unique to split them; repeated: {dupes[:5]}")
    if len(task_ids) < 2:
        raise ValueError(f"need at least 2 tasks to split, got {len(task_ids)}")
    ordered = sorted(task_ids, key=natural_key)
    random.Random(config.seed).shuffle(ordered)
    n_train = min(max(round(len(ordered) * config.train_fraction), 1), len(ordered) - 1)
    return Split(
        tuple(ordered[:n_train]), tuple(ordered[n_train:]), config.seed, config.train_fraction
    )


def split_tasks(tasks: list[Task], config: SplitConfig | None = None) -> Split:
    return split_ids([t.task_id for t in tasks], config)
