"""A search method is a configuration of one loop (MaxCode's unifying claim).

CUDA-LLM, Effi-Learner, best-of-N, the "+MaxCode" variants and the ablations differ
only in these fields; ``params.yaml`` names them under ``methods:``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from maxcode.errors import ConfigError
from maxcode.loader import load, merge

TRAJECTORY_MODES = ("all", "best_per_step", "last", "none")
RERANK_MODES = ("none", "model", "random")
SHARED_KEYS = ("depth", "k", "gamma", "target_speedup")  # search: defaults every method inherits


@dataclass(frozen=True)
class Budget:
    """Hard limits per run; None means unlimited. The loop stops cleanly at the first hit."""

    max_evaluations: int | None = field(
        default=None, metadata={"help": "executed candidates", "min": 1}
    )
    max_llm_calls: int | None = field(
        default=None, metadata={"help": "backend calls (cache hits excluded)", "min": 1}
    )
    max_tokens: int | None = field(
        default=None, metadata={"help": "input + output tokens", "min": 1}
    )
    max_cost_usd: float | None = field(
        default=None, metadata={"help": "money spent on LLM calls", "exclusive_min": 0}
    )
    max_wall_s: float | None = field(
        default=None, metadata={"help": "wall-clock seconds", "exclusive_min": 0}
    )


@dataclass(frozen=True)
class MethodConfig:
    name: str = field(metadata={"help": "method name used in paths and tables"})
    depth: int = field(default=4, metadata={"help": "search steps", "min": 1})
    k: int = field(default=4, metadata={"help": "proposals per step", "min": 1})
    execute_top_m: int | None = field(
        default=None, metadata={"help": "execute only m of the k proposals (None: all k)", "min": 1}
    )
    rerank: str = field(
        default="none",
        metadata={"help": "how the m executed proposals are chosen", "choices": RERANK_MODES},
    )
    trajectory: str = field(
        default="all",
        metadata={"help": "previous attempts shown to the policy", "choices": TRAJECTORY_MODES},
    )
    critique: bool = field(default=False, metadata={"help": "critique each attempt and show it"})
    best: bool = field(
        default=False, metadata={"help": "show the best code so far and its feedback"}
    )
    profile: bool = field(
        default=False,
        metadata={"help": "feedback carries an execution-overhead profile (Effi-Learner)"},
    )
    gamma: float = field(
        default=0.9,
        metadata={"help": "discount of the max-reward return", "exclusive_min": 0, "max": 1},
    )
    target_speedup: float | None = field(
        default=None, metadata={"help": "stop once reached", "exclusive_min": 0}
    )
    budget: Budget = field(default_factory=Budget)

    def __post_init__(self) -> None:
        where = f"methods.{self.name}"
        if self.depth < 1 or self.k < 1:
            raise ConfigError(
                f"{where}: depth and k must be >= 1 (got depth={self.depth}, k={self.k})"
            )
        if self.trajectory not in TRAJECTORY_MODES:
            raise ConfigError(
                f"{where}.trajectory: {self.trajectory!r} is not one of {list(TRAJECTORY_MODES)}"
            )
        if self.rerank not in RERANK_MODES:
            raise ConfigError(f"{where}.rerank: {self.rerank!r} is not one of {list(RERANK_MODES)}")
        if self.execute_top_m is not None and not 1 <= self.execute_top_m <= self.k:
            raise ConfigError(
                f"{where}.execute_top_m: must be between 1 and k={self.k}, got {self.execute_top_m}"
            )
        if self.rerank != "none" and self.execute_top_m is None:
            raise ConfigError(
                f"{where}: rerank={self.rerank!r} needs execute_top_m (how many of k to execute)"
            )
        if not 0.0 < self.gamma <= 1.0:
            raise ConfigError(f"{where}.gamma: must be in (0, 1], got {self.gamma}")

    @property
    def executed_per_step(self) -> int:
        return self.execute_top_m or self.k

    @property
    def evaluations_budget(self) -> int:
        """Executions the method makes at full depth: the equal-budget currency."""
        return self.depth * self.executed_per_step

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> MethodConfig:
        """A method as ``to_dict`` wrote it, through the one strict loader."""
        d = dict(d)
        name = d.pop("name", "")
        return load(cls, d, f"methods.{name}", name=name)


def method_from_params(name: str, search: dict, override: dict | None) -> MethodConfig:
    """Method = the shared ``search:`` defaults overlaid with its ``methods.<name>`` entry."""
    if override is not None and not isinstance(override, dict):
        raise ConfigError(f"methods.{name}: expected a mapping, got {override!r}")
    shared = {key: search[key] for key in SHARED_KEYS if key in search}
    if "budget" in search:
        shared["budget"] = search["budget"]
    return load(MethodConfig, merge(shared, override or {}), f"methods.{name}", name=name)
