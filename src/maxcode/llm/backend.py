"""One interface for every model: given chat messages and sampling params, return completions.

Backends only talk to their model. Caching, retries, concurrency bounds, budgets and
cost accounting live in :class:`maxcode.llm.client.LLMClient`, so they behave the same
for every backend and are tested once.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, field

from maxcode.llm.config import RoleConfig
from maxcode.llm.usage import Usage


@dataclass(frozen=True)
class SamplingParams:
    """Everything besides the messages that decides a completion (part of the cache key)."""

    max_tokens: int
    temperature: float
    top_p: float = 1.0
    thinking_budget: int | None = None
    seed: int = 0  # per request; the sample index is added per completion

    @classmethod
    def from_role(cls, cfg: RoleConfig, seed: int = 0) -> SamplingParams:
        return cls(cfg.max_tokens, cfg.temperature, cfg.top_p, cfg.thinking_budget, seed)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class Completion:
    """One sampled completion with its own token counts."""

    text: str
    thinking: str = ""  # extended-thinking text (anthropic), kept for the record
    finish_reason: str = ""  # "stop" | "length" | ... as the backend reports it
    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0  # of input_tokens, served by the provider's prompt cache
    cached: bool = False  # answered by the response cache in this run
    meta: dict = field(default_factory=dict)
    usage: Usage = field(default_factory=Usage)  # set by the client: calls, tokens, cost

    @property
    def truncated(self) -> bool:
        return self.finish_reason in ("length", "max_tokens")

    def to_dict(self) -> dict:
        d = asdict(self)
        del d["cached"], d["usage"]
        return d

    @classmethod
    def from_dict(cls, d: dict) -> Completion:
        return cls(**d)


class RetryableError(Exception):
    """A backend-neutral transient failure; ``retry_after`` is the server's hint in seconds."""

    def __init__(self, message: str, retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after


class ChatBackend(ABC):
    """A model behind messages-in, completions-out.

    ``batched`` backends (local models) generate all samples of a request in one call;
    the others are called once per sample, concurrently, by the client.
    """

    name: str
    batched: bool = False

    def __init__(self, cfg: RoleConfig):
        self.cfg = cfg

    @property
    def endpoint(self) -> str:
        """What the concurrency bound is shared over: one server (or one local model)."""
        return f"{self.name}:{self.cfg.base_url or self.cfg.model}"

    @abstractmethod
    def generate(
        self, messages: list[dict], params: SamplingParams, sample_indices: list[int]
    ) -> list[Completion]:
        """One completion per sample index; raise RetryableError (or an SDK error that
        :meth:`retry_after` accepts) for transient failures."""

    def retry_after(self, exc: BaseException) -> float | None:
        """Seconds the server asked to wait (0.0: retry with backoff); None: not retryable."""
        if isinstance(exc, RetryableError):
            return exc.retry_after or 0.0
        return None

    @abstractmethod
    def close(self) -> None:
        """Release connections or model memory."""


def parse_retry_after(headers: object) -> float:
    """Seconds from ``retry-after-ms`` / ``retry-after`` (number or HTTP date); 0.0 if absent."""
    import email.utils
    import time

    get = getattr(headers, "get", None)
    if get is None:
        return 0.0
    ms = get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    value = get("retry-after")
    if not value:
        return 0.0
    try:
        return max(0.0, float(value))
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value).timestamp()
        except (TypeError, ValueError):
            return 0.0
        return max(0.0, when - time.time())


def transient_status(status: int) -> bool:
    """HTTP statuses worth retrying: timeout, conflict, rate limit, server errors."""
    return status in (408, 409, 429) or status >= 500


def split_system(messages: list[dict]) -> tuple[str, list[dict]]:
    """System text apart from the turns (the Messages API takes it as a separate field)."""
    system = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
    return system, [m for m in messages if m["role"] != "system"]
