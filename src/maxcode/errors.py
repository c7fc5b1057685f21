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


class CorpusFormatError(UserError, ValueError):
    """A public run folder or a corpus file cannot be read; the message names the path,
    the field and the fix."""


class RunMismatch(UserError, ValueError):
    """Records on disk were made by another task, method or setting: not resumable as they are.

    ``differences`` names each one (``"k: 4 in the records, 2 now"``)."""

    def __init__(self, path: object, differences: list[str]):
        self.differences = differences
        super().__init__(f"{path}: a different run (" + "; ".join(differences) + ")")


class SandboxUnavailable(UserError):
    """Candidate code would run with less than the full sandbox where the user required it;
    the message names the setting and why this host cannot give it."""


class GpuUnavailable(UserError, RuntimeError):
    """Work that needs an NVIDIA GPU was asked for where none is visible; the message says what
    can still be done here."""


class CompilerError(UserError, RuntimeError):
    """The C++ compiler itself cannot run (missing, broken, killed): not a candidate's compile
    error, and never cached as one."""


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
    """The run's hard LLM budget (calls, tokens or money) is spent; the loop stops cleanly.

    ``fix`` says how to allow more (``{role}`` and ``{field}`` filled in); ``next_worst`` is
    the worst case of the request that was refused, when admission refused it beforehand.
    """

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
            role=role, field=_BUDGET_FIELD[what]
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


_BUDGET_FIELD = {"calls": "max_calls", "tokens": "max_tokens", "cost_usd": "max_cost_usd"}
