"""The project's exceptions, in one module every package may import.

Each message is for a human: it names the file, flag or key path at fault and the
fix. The command line turns a ``UserError`` into one line and exit code 2.
"""

from __future__ import annotations


class UserError(Exception):
    """Bad input from the user (a file, a flag, a parameter); never a bug in maxcode."""


class ConfigError(UserError, ValueError):
    """A parameter is missing, unknown or out of range; the message names its key path."""


class ReferenceFormatError(ConfigError):
    """The papers' reference-number file is malformed; the message names file, entry and field."""


class TaskFormatError(UserError, ValueError):
    """A task record or task directory is malformed; the message names file and field."""


class RolloutFormatError(UserError, ValueError):
    """A rollout file does not follow docs/records.md; the message names file, line and field."""


class RolloutIncompleteError(RolloutFormatError):
    """A rollout file has no run_end record; a table would silently drop a run."""


class BudgetExhausted(Exception):
    """A part (an LLM backend, an evaluator) reached a hard budget; the loop stops cleanly."""


class LLMError(RuntimeError):
    """Something in the LLM layer failed; the message says what and how to fix, never a key."""


class LLMConfigError(LLMError, ConfigError):
    """A role config is invalid (unknown key, bad value, missing API key variable)."""


class LLMCallFailed(LLMError):
    """A backend call failed for good: not retryable, or retries were exhausted.

    Completions that finished before the failure are already in the response cache,
    so a rerun pays only for the missing ones.
    """


class BudgetExceeded(LLMError, BudgetExhausted):
    """The run's hard LLM budget (calls, tokens or money) is spent; the loop stops cleanly."""

    def __init__(self, role: str, what: str, spent: float, limit: float):
        self.role, self.what, self.spent, self.limit = role, what, spent, limit
        super().__init__(
            f"LLM budget of role {role!r} reached: {what} at {spent:g} of limit {limit:g}; "
            f"raise llm.{role}.budget.{_BUDGET_FIELD[what]} in params.yaml to allow more"
        )


_BUDGET_FIELD = {"calls": "max_calls", "tokens": "max_tokens", "cost_usd": "max_cost_usd"}
