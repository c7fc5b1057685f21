"""What each model costs, so that a budget in dollars means dollars.

Prices are USD per million tokens for the provider's public price page (``source``) as of
``as_of``. They were entered by hand and have not been checked against the live pages (this
project's build machines have no internet): check them before relying on a dollar cap.
Prices change, so a role's own ``price_*`` fields (or
``maxcode optimize --price-in/--price-out/--prices``) override this table. Local models (hf,
offline) cost nothing; an API model that is in neither place has no price, and a run with a
dollar budget refuses to start with it rather than count its calls as free.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from maxcode.errors import LLMConfigError


@dataclass(frozen=True)
class Price:
    """USD per 1M tokens; ``cached_input`` is what a provider-side prompt-cache hit costs."""

    input: float
    output: float
    cached_input: float
    as_of: str = ""
    source: str = ""

    def __post_init__(self) -> None:
        if min(self.input, self.output, self.cached_input) < 0:
            raise LLMConfigError(f"prices must be >= 0 USD per 1M tokens, got {self}")

    def cost(self, input_tokens: int, output_tokens: int, cached_input_tokens: int = 0) -> float:
        """``input_tokens`` includes the cached ones (as both APIs count prompt tokens)."""
        fresh = max(0, input_tokens - cached_input_tokens)
        return (
            fresh * self.input
            + cached_input_tokens * self.cached_input
            + output_tokens * self.output
        ) / 1e6

    def to_dict(self) -> dict:
        return asdict(self)


_OPENAI = "https://developers.openai.com/api/docs/pricing"
_ANTHROPIC = "https://platform.claude.com/docs/en/about-claude/pricing"

# Keyed by BACKEND:MODEL exactly as a role names it (dated model ids are separate entries).
PRICES: dict[str, Price] = {
    "openai:gpt-4o": Price(2.50, 10.00, 1.25, "2025-06", _OPENAI),
    "openai:gpt-4o-2024-08-06": Price(2.50, 10.00, 1.25, "2025-06", _OPENAI),
    "openai:gpt-4o-mini": Price(0.15, 0.60, 0.075, "2025-06", _OPENAI),
    "openai:gpt-4.1": Price(2.00, 8.00, 0.50, "2025-06", _OPENAI),
    "openai:o1": Price(15.00, 60.00, 7.50, "2025-06", _OPENAI),
    "anthropic:claude-3-7-sonnet-20250219": Price(3.00, 15.00, 0.30, "2025-06", _ANTHROPIC),
    "anthropic:claude-sonnet-4-20250514": Price(3.00, 15.00, 0.30, "2025-06", _ANTHROPIC),
    "anthropic:claude-3-5-haiku-20241022": Price(0.80, 4.00, 0.08, "2025-06", _ANTHROPIC),
}

FREE = Price(0.0, 0.0, 0.0, source="local model: no per-token charge")
LOCAL_BACKENDS = ("offline", "hf")


def lookup(backend: str, model: str, table: dict[str, Price] | None = None) -> Price | None:
    """The table's price for a model, free for local backends, None when unknown."""
    if backend in LOCAL_BACKENDS:
        return FREE
    return (PRICES if table is None else table).get(f"{backend}:{model}")


def load_prices_file(path: Path) -> dict[str, Price]:
    """A JSON object ``{"BACKEND:MODEL": {"input": .., "output": .., "cached_input": ..}}``."""
    where = f"--prices {path}"
    try:
        raw = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise LLMConfigError(f"{where}: no such file") from None
    except (OSError, json.JSONDecodeError) as err:
        raise LLMConfigError(f"{where}: not readable JSON ({err})") from None
    if not isinstance(raw, dict):
        raise LLMConfigError(f"{where}: must be a JSON object keyed by BACKEND:MODEL")
    table = {}
    for key, entry in raw.items():
        if ":" not in key or not isinstance(entry, dict):
            raise LLMConfigError(
                f'{where}: entry {key!r} must be "BACKEND:MODEL": {{"input": USD, "output": USD}}'
            )
        unknown = set(entry) - {"input", "output", "cached_input", "as_of", "source"}
        if unknown or not {"input", "output"} <= set(entry):
            raise LLMConfigError(
                f"{where}: {key}: needs input and output (USD per 1M tokens); "
                f"optional cached_input, as_of, source; unknown keys {sorted(unknown)}"
            )
        try:
            table[key] = Price(
                float(entry["input"]),
                float(entry["output"]),
                float(entry.get("cached_input", entry["input"])),
                str(entry.get("as_of", "")),
                str(entry.get("source", str(path))),
            )
        except (TypeError, ValueError) as err:
            raise LLMConfigError(f"{where}: {key}: {err}") from None
    return table
