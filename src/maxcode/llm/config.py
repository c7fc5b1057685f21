"""Which backend and model serve each role (generator, critic, reward_to_go), and its limits.

``params.yaml`` holds one block per role under ``llm:``; loading is strict so that a
misspelled key fails instead of silently running with a default. API keys are never
configured here: ``api_key_env`` names the environment variable that holds the key.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field, fields
from typing import Any
from urllib.parse import urlsplit

from maxcode.errors import LLMConfigError
from maxcode.llm.prices import Price, lookup
from maxcode.loader import load, reject_unknown

BACKEND_NAMES = ("offline", "openai", "anthropic", "hf", "replay")
ROLES = ("generator", "critic", "reward_to_go")
# Sent to a local server when no key is set: the SDKs refuse an empty key, the servers ignore it.
LOCAL_SERVER_KEY = "no-key-needed"
_DEFAULT_KEY_ENV = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}


@dataclass(frozen=True)
class LLMBudget:
    """Hard limits per run for one role; None means unlimited.

    Cache hits count at their original price so that a replay stops exactly where
    the original run stopped.
    """

    max_calls: int | None = field(
        default=None, metadata={"help": "completions (calls + cache hits)"}
    )
    max_tokens: int | None = field(default=None, metadata={"help": "input + output tokens"})
    max_cost_usd: float | None = field(
        default=None, metadata={"help": "money, from the role's prices"}
    )

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if value is not None and value <= 0:
                raise LLMConfigError(
                    f"budget.{f.name}: must be > 0 or null (unlimited), got {value}"
                )


@dataclass(frozen=True)
class RoleConfig:
    """One role's backend, model, sampling, limits and prices."""

    role: str = field(default="generator", metadata={"help": "generator | critic | reward_to_go"})
    backend: str = field(
        default="offline", metadata={"help": "which backend", "choices": BACKEND_NAMES}
    )
    model: str = field(
        default="",
        metadata={"help": "API model id, or a local model directory for hf; empty for offline"},
    )
    base_url: str | None = field(
        default=None,
        metadata={
            "help": "server URL (openai: any OpenAI-compatible server, e.g. vLLM at http://host:8000/v1)"
        },
    )
    api_key_env: str | None = field(
        default=None,
        metadata={"help": "NAME of the environment variable holding the key (default per backend)"},
    )
    adapter: str | None = field(default=None, metadata={"help": "hf: directory of a peft adapter"})
    device: str = field(
        default="auto", metadata={"help": "hf: auto (cuda when present) | cpu | cuda"}
    )
    max_tokens: int = field(
        default=4096, metadata={"help": "completion tokens per call (thinking included)"}
    )
    temperature: float = field(default=0.8, metadata={"help": "sampling temperature; 0 = greedy"})
    top_p: float = field(default=1.0, metadata={"help": "nucleus sampling mass"})
    thinking_budget: int | None = field(
        default=None, metadata={"help": "anthropic: extended-thinking token budget (>= 1024)"}
    )
    concurrency: int = field(
        default=8, metadata={"help": "calls in flight at once per backend endpoint"}
    )
    timeout_s: float = field(default=600.0, metadata={"help": "per-call timeout"})
    max_retries: int = field(
        default=6, metadata={"help": "retries on 429, 5xx, timeouts and dropped connections"}
    )
    retry_base_s: float = field(
        default=1.0, metadata={"help": "first backoff delay; doubles per retry"}
    )
    retry_max_s: float = field(default=60.0, metadata={"help": "cap on one backoff delay"})
    price_input_per_mtok: float | None = field(
        default=None,
        metadata={
            "help": "USD per 1M input tokens; null: the price table (maxcode.llm.prices)",
            "min": 0,
        },
    )
    price_output_per_mtok: float | None = field(
        default=None,
        metadata={"help": "USD per 1M output tokens; null: the price table", "min": 0},
    )
    price_cached_input_per_mtok: float | None = field(
        default=None,
        metadata={
            "help": "USD per 1M prompt-cache-hit input tokens; null: the input price",
            "min": 0,
        },
    )
    cache_path: str | None = field(
        default=None,
        metadata={
            "help": "SQLite response cache shared by parallel jobs; null: "
            "<pipeline cache dir>/llm_responses.sqlite"
        },
    )
    budget: LLMBudget = field(default_factory=LLMBudget)

    def __post_init__(self) -> None:
        where = f"llm.{self.role}"
        if self.role not in ROLES:
            raise LLMConfigError(f"{where}: role must be one of {list(ROLES)}")
        if self.backend not in BACKEND_NAMES:
            raise LLMConfigError(
                f"{where}.backend: {self.backend!r} is not one of {list(BACKEND_NAMES)}"
            )
        if self.backend == "replay" and self.role != "generator":
            raise LLMConfigError(
                f"{where}.backend: replay proposes corpus programs as the generator only; "
                "set this role's backend to offline or an LLM"
            )
        if self.backend in ("openai", "anthropic", "hf") and not self.model:
            raise LLMConfigError(
                f"{where}.model: backend {self.backend!r} needs a model id or path"
            )
        if self.max_tokens < 1:
            raise LLMConfigError(f"{where}.max_tokens: must be >= 1, got {self.max_tokens}")
        if not 0.0 <= self.temperature <= 2.0:
            raise LLMConfigError(f"{where}.temperature: must be in [0, 2], got {self.temperature}")
        if not 0.0 < self.top_p <= 1.0:
            raise LLMConfigError(f"{where}.top_p: must be in (0, 1], got {self.top_p}")
        if self.concurrency < 1 or self.max_retries < 0 or self.timeout_s <= 0:
            raise LLMConfigError(
                f"{where}: concurrency >= 1, max_retries >= 0 and timeout_s > 0 are required "
                f"(got {self.concurrency}, {self.max_retries}, {self.timeout_s})"
            )
        if self.retry_base_s < 0 or self.retry_max_s < self.retry_base_s:
            raise LLMConfigError(f"{where}: need 0 <= retry_base_s <= retry_max_s")
        prices = (self.price_input_per_mtok, self.price_output_per_mtok)
        if (prices[0] is None) != (prices[1] is None):
            raise LLMConfigError(
                f"{where}: set both price_input_per_mtok and price_output_per_mtok, or neither "
                "(then the price table decides)"
            )
        given = [*prices, self.price_cached_input_per_mtok]
        if any(p is not None and p < 0 for p in given):
            raise LLMConfigError(f"{where}: prices must be >= 0 USD per 1M tokens")
        if self.thinking_budget is not None:
            if self.backend != "anthropic":
                raise LLMConfigError(
                    f"{where}.thinking_budget: extended thinking is an anthropic feature; "
                    f"set it to null for backend {self.backend!r}"
                )
            if not 1024 <= self.thinking_budget < self.max_tokens:
                raise LLMConfigError(
                    f"{where}.thinking_budget: must be >= 1024 and below max_tokens={self.max_tokens} "
                    f"(the answer needs room too), got {self.thinking_budget}"
                )
            if self.temperature != 1.0:
                raise LLMConfigError(
                    f"{where}.temperature: the Messages API requires temperature 1.0 with "
                    f"extended thinking, got {self.temperature}"
                )
        if self.adapter is not None and self.backend != "hf":
            raise LLMConfigError(f"{where}.adapter: only the hf backend loads peft adapters")
        if self.device not in ("auto", "cpu", "cuda"):
            raise LLMConfigError(f"{where}.device: auto | cpu | cuda, got {self.device!r}")

    @property
    def key_env(self) -> str | None:
        """Environment variable read for the API key (None for local backends)."""
        return self.api_key_env or _DEFAULT_KEY_ENV.get(self.backend)

    def api_key(self) -> str:
        """The key from the environment; the error names the variable, never a value."""
        name = self.key_env
        value = os.environ.get(name or "", "")
        if not value and self.local_server:
            return LOCAL_SERVER_KEY
        if not name or not value:
            raise LLMConfigError(
                f"llm.{self.role}: backend {self.backend!r} needs an API key in the environment "
                f"variable {name}; export it (or set api_key_env to the variable that holds it)"
            )
        return value

    @property
    def local_server(self) -> bool:
        """A server on this machine (vLLM, SGLang, llama.cpp): they take any key or none."""
        host = urlsplit(self.base_url).hostname if self.base_url else None
        return host in ("localhost", "127.0.0.1", "::1", "0.0.0.0")

    @property
    def model_id(self) -> str:
        """The model as part of cache keys: a local model with an adapter is another model."""
        return self.model + (f"+{self.adapter}" if self.adapter else "")

    @property
    def identity(self) -> str:
        """Backend and model as recorded in rollouts, e.g. ``anthropic:claude-3-7-sonnet``."""
        return f"{self.backend}:{self.model_id}" if self.model_id else self.backend

    @property
    def price(self) -> Price | None:
        """The role's own prices, else the table's; None: unknown (a dollar budget refuses)."""
        if self.price_input_per_mtok is not None and self.price_output_per_mtok is not None:
            cached = self.price_cached_input_per_mtok
            return Price(
                self.price_input_per_mtok,
                self.price_output_per_mtok,
                self.price_input_per_mtok if cached is None else cached,
                source=f"llm.{self.role}.price_*_per_mtok",
            )
        return lookup(self.backend, self.model)

    def cost(self, input_tokens: int, output_tokens: int, cached_input_tokens: int = 0) -> float:
        """USD of one call; 0.0 when the price is unknown (runs with a dollar budget refuse)."""
        price = self.price
        return price.cost(input_tokens, output_tokens, cached_input_tokens) if price else 0.0

    def to_dict(self) -> dict:
        return asdict(self)


def role_config_from_dict(role: str, d: dict[str, Any] | None) -> RoleConfig:
    """The ``llm.<role>`` block through the one strict loader (budget included)."""
    return load(RoleConfig, d, f"llm.{role}", role=role)


def llm_config_from_dict(d: dict[str, Any] | None) -> dict[str, RoleConfig]:
    """The whole ``llm:`` block: one RoleConfig per role (missing roles are offline)."""
    d = dict(d or {})
    reject_unknown(d, list(ROLES), "llm", extra=[])
    return {role: role_config_from_dict(role, d.get(role)) for role in ROLES}
