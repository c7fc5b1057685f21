"""The ``tables:`` block of params.yaml: which methods each table compares, and how.

A light module of its own, so the plan (``maxcode.params``) loads the block without
importing the table writer (scipy, matplotlib), and the writer takes it typed.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class TablesParams:
    """What the tables compare."""

    main: tuple[str, ...] = field(default=(), metadata={"help": "methods of the main table"})
    ablation: tuple[str, ...] = field(default=(), metadata={"help": "methods of the ablation"})
    rerank: tuple[str, ...] = field(default=(), metadata={"help": "methods of the rerank table"})
    floor_speedup_at_1: bool = field(
        default=False, metadata={"help": "PIE's convention: never below the original's speed"}
    )
    bootstrap_samples: int = field(default=2000, metadata={"help": "resamples", "min": 100})
    confidence: float = field(
        default=0.95, metadata={"help": "interval level", "exclusive_min": 0, "max": 1}
    )
    reference: str | None = field(
        default=None, metadata={"help": "the papers' published numbers; null: none"}
    )
