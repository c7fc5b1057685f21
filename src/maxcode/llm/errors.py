"""Errors of the LLM layer; every message is for a human and never carries an API key."""

from __future__ import annotations

from maxcode.search.types import BudgetExhausted


class LLMError(RuntimeError):
    """Base class: something in the LLM layer failed; the message says what and how to fix."""


class LLMConfigError(LLMError, ValueError):
    """A role config is invalid (unknown key, bad value, missing API key variable)."""


class LLMCallFailed(LLMError):
    """A backend call failed for good: not retryable, or retries were exhausted.

    Completions that finished before the failure are already in the response cache,
    so a rerun pays only for the missing ones.
    """


class BudgetExceeded(LLMError, BudgetExhausted):
    """The run's hard LLM budget (calls, tokens or money) is spent; the loop stops cleanly."""

    def __init__(
        self,
        role: str,
        what: str,
        spent: float,
        limit: float,
        fix: str | None = None,
        next_worst: float | None = None,
    ):
        self.role, self.what, self.spent, self.limit = role, what, spent, limit
        fix = (fix or "raise llm.{role}.budget.{field} in params.yaml to allow more").format(
            role=role, field=_FIELD[what]
        )
        if next_worst is None:
            told = f"{what} at {spent:g} of limit {limit:g}"
        elif what == "cost_usd":
            told = (
                f"${spent:.4f} of ${limit:.4f} spent and the next request may cost up to "
                f"${next_worst:.4f}"
            )
        else:
            told = f"{spent:g} of {limit:g} tokens used and the next request may use {next_worst:g}"
        who = f"role {role!r}" if role in ("generator", "critic", "reward_to_go") else role
        super().__init__(f"LLM budget of {who} reached: {told}; {fix}")


_FIELD = {"calls": "max_calls", "tokens": "max_tokens", "cost_usd": "max_cost_usd"}
