"""Token and cost accounting, summed per call, task, method and run."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass
class Usage:
    calls: int = 0  # backend calls actually made (cache hits excluded)
    cached_calls: int = 0  # calls answered by the response cache
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.calls + other.calls,
            self.cached_calls + other.cached_calls,
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cost_usd + other.cost_usd,
        )

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict | None) -> Usage:
        return cls(**d) if d else cls()
