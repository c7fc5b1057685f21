"""Everything around a backend call, done once for all backends: the response cache,
a concurrency bound per endpoint, retries with backoff, the run's hard budget and
token/cost accounting."""

from __future__ import annotations

import logging
import os
import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from maxcode.errors import BudgetExceeded, LLMCallFailed, LLMConfigError
from maxcode.llm.backend import ChatBackend, Completion, SamplingParams
from maxcode.llm.cache import ResponseCache, cache_key
from maxcode.llm.config import LLMBudget, RoleConfig
from maxcode.llm.usage import Usage

log = logging.getLogger(__name__)

_SEMAPHORES: dict[str, threading.BoundedSemaphore] = {}  # endpoint#limit -> bound
_SEMAPHORES_LOCK = threading.Lock()


def endpoint_semaphore(endpoint: str, limit: int) -> threading.BoundedSemaphore:
    """One bound per endpoint and limit, shared by every client in the process that
    reaches that endpoint with that ``concurrency`` setting."""
    key = f"{endpoint}#{limit}"
    with _SEMAPHORES_LOCK:
        if key not in _SEMAPHORES:
            _SEMAPHORES[key] = threading.BoundedSemaphore(limit)
        return _SEMAPHORES[key]


class BudgetTracker:
    """Hard limits, checked before every request against the request's worst case.

    A request is admitted only if what is spent, plus what admitted requests still in
    flight may cost, plus this request's worst case (its prompt's bound and ``max_tokens``
    of output per completion) stays within each limit, so a run stops *before* it crosses
    one. Cache hits count at their original price, so a replay stops where the run did.
    ``fix`` says which setting raises the limits (it ends every refusal message).
    """

    def __init__(self, role: str, budget: LLMBudget, fix: str | None = None):
        self.role, self.budget = role, budget
        self.fix = fix or f"raise llm.{role}.budget.{{field}} in params.yaml to allow more"
        self.spent = Usage()
        self.pending = Usage()
        self._lock = threading.Lock()

    def reserve(self, n: int, worst: Usage) -> Usage:
        """Admit n completions of at most ``worst`` each, or raise before anything is called."""
        b = self.budget
        want = Usage(
            calls=n,
            input_tokens=n * worst.input_tokens,
            output_tokens=n * worst.output_tokens,
            cost_usd=n * worst.cost_usd,
        )
        with self._lock:
            held = self.spent + self.pending
            done = held.calls + held.cached_calls
            if b.max_calls is not None and done + n > b.max_calls:
                raise BudgetExceeded(self.role, "calls", done + n, b.max_calls, self.fix)
            tokens = held.input_tokens + held.output_tokens
            if (
                b.max_tokens is not None
                and tokens + want.input_tokens + want.output_tokens > b.max_tokens
            ):
                raise BudgetExceeded(
                    self.role,
                    "tokens",
                    tokens,
                    b.max_tokens,
                    self.fix,
                    next_worst=want.input_tokens + want.output_tokens,
                )
            if b.max_cost_usd is not None and held.cost_usd + want.cost_usd > b.max_cost_usd:
                raise BudgetExceeded(
                    self.role,
                    "cost_usd",
                    held.cost_usd,
                    b.max_cost_usd,
                    self.fix,
                    next_worst=want.cost_usd,
                )
            self.pending = self.pending + want
        return want

    def release(self, reserved: Usage) -> None:
        """The request is over (answered or failed): its actual usage is charged separately."""
        with self._lock:
            p = self.pending
            self.pending = Usage(
                p.calls - reserved.calls,
                p.cached_calls,
                p.input_tokens - reserved.input_tokens,
                p.output_tokens - reserved.output_tokens,
                p.cost_usd - reserved.cost_usd,
            )

    def charge(self, usage: Usage) -> None:
        with self._lock:
            self.spent = self.spent + usage

    def start_from(self, spent: Usage) -> None:
        """A resumed run: what its replayed steps spent counts against the limits."""
        with self._lock:
            self.spent = Usage.from_dict(spent.to_dict())


def prompt_token_bound(messages: list[dict]) -> int:
    """An upper bound on the prompt's tokens: byte-level BPE tokens are at least one byte,
    plus a few framing tokens per message."""
    return sum(len(m["content"].encode()) + 8 for m in messages)


class LLMClient:
    """A role's way to its model: ``complete(messages, n, seed)`` -> n completions."""

    def __init__(
        self,
        backend: ChatBackend,
        cache: ResponseCache | None = None,
        run_budget: BudgetTracker | None = None,
    ):
        self.backend = backend
        self.cfg: RoleConfig = backend.cfg
        self.cache = cache
        self.budget = BudgetTracker(self.cfg.role, self.cfg.budget)
        # The role's own limits, then the run's (shared by every role of one search).
        self.budgets = [self.budget] + ([run_budget] if run_budget is not None else [])
        self.usage = Usage()  # everything this client answered, hits included
        self.retries = 0
        self._jitter = random.Random()
        self._lock = threading.Lock()
        self._sem = endpoint_semaphore(backend.endpoint, self.cfg.concurrency)

    @property
    def identity(self) -> str:
        return self.cfg.identity

    def complete(self, messages: list[dict], n: int = 1, seed: int = 0) -> list[Completion]:
        """n samples (sample index i is part of the cache key); hits cost no call.

        Raises BudgetExceeded before calling when the run's budget is spent, and
        LLMCallFailed when a sample fails for good; finished samples stay cached.
        """
        _check_messages(messages, self.cfg.role)
        params = SamplingParams.from_role(self.cfg, seed)
        reserved = self._reserve(messages, n)
        try:
            return self._complete(messages, n, seed, params)
        finally:
            for tracker, held in zip(self.budgets, reserved, strict=False):
                tracker.release(held)

    def worst_case(self, messages: list[dict]) -> Usage:
        """The most one completion of this request can cost: its prompt's bound, max_tokens out."""
        tokens_in = prompt_token_bound(messages)
        return Usage(
            calls=1,
            input_tokens=tokens_in,
            output_tokens=self.cfg.max_tokens,
            cost_usd=self.cfg.cost(tokens_in, self.cfg.max_tokens),
        )

    def _reserve(self, messages: list[dict], n: int) -> list[Usage]:
        worst = self.worst_case(messages)
        reserved: list[Usage] = []
        try:
            for tracker in self.budgets:
                reserved.append(tracker.reserve(n, worst))
        except BudgetExceeded:
            for tracker, held in zip(self.budgets, reserved, strict=False):
                tracker.release(held)
            raise
        return reserved

    def _complete(
        self, messages: list[dict], n: int, seed: int, params: SamplingParams
    ) -> list[Completion]:
        keys = [
            cache_key(self.cfg.backend, self.cfg.model_id, messages, params, i) for i in range(n)
        ]
        out: list[Completion | None] = [
            self.cache.get(k) if self.cache is not None else None for k in keys
        ]
        missing = [i for i, c in enumerate(out) if c is None]
        for c in out:
            if c is not None:
                self._account(c)
        if not missing:
            return out  # type: ignore[return-value]
        errors: list[LLMCallFailed] = []
        groups = [missing] if self.backend.batched else [[i] for i in missing]

        def run(indices: list[int]) -> None:
            try:
                got = self._call_with_retries(messages, params, indices)
            except LLMCallFailed as err:
                errors.append(err)
                return
            for i, c in zip(indices, got, strict=True):
                if self.cache is not None:
                    c = self.cache.put(keys[i], self.identity, c)
                out[i] = c
                self._account(c)

        if len(groups) == 1:
            run(groups[0])
        else:
            with ThreadPoolExecutor(max_workers=min(len(groups), self.cfg.concurrency)) as pool:
                list(pool.map(run, groups))
        if errors:
            raise errors[0]
        return out  # type: ignore[return-value]

    def _account(self, c: Completion) -> None:
        cost = self.cfg.cost(c.input_tokens, c.output_tokens, c.cached_input_tokens)
        c.usage = Usage(
            calls=0 if c.cached else 1,
            cached_calls=1 if c.cached else 0,
            input_tokens=c.input_tokens,
            output_tokens=c.output_tokens,
            cost_usd=cost,
        )
        for tracker in self.budgets:
            tracker.charge(c.usage)
        with self._lock:
            self.usage = self.usage + c.usage

    def _call_with_retries(
        self, messages: list[dict], params: SamplingParams, indices: list[int]
    ) -> list[Completion]:
        attempts = self.cfg.max_retries + 1
        for attempt in range(attempts):
            try:
                with self._sem:
                    got = self.backend.generate(messages, params, indices)
                if len(got) != len(indices):
                    raise LLMCallFailed(
                        f"{self.identity}: backend returned {len(got)} completions for "
                        f"{len(indices)} samples"
                    )
                return got
            except LLMCallFailed:
                raise
            except LLMConfigError:
                raise
            except Exception as exc:  # SDK and transport errors: classified by the backend
                hint = self.backend.retry_after(exc)
                if hint is None or attempt == attempts - 1:
                    raise LLMCallFailed(
                        self._describe(exc, attempt + 1, hint is not None)
                    ) from None
                delay = hint if hint > 0 else self._backoff(attempt)
                with self._lock:
                    self.retries += 1
                log.warning(
                    "%s: %s; retry %d/%d in %.2fs",
                    self.identity,
                    self._scrub(f"{type(exc).__name__}: {exc}")[:300],
                    attempt + 1,
                    attempts - 1,
                    delay,
                )
                time.sleep(delay)
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _backoff(self, attempt: int) -> float:
        """Exponential backoff with jitter in [50%, 100%] of the capped delay."""
        delay = min(self.cfg.retry_max_s, self.cfg.retry_base_s * 2**attempt)
        return delay * (0.5 + 0.5 * self._jitter.random())

    def _describe(self, exc: BaseException, attempts: int, retryable: bool) -> str:
        status = getattr(exc, "status_code", None)
        what = f"{type(exc).__name__}" + (f" (HTTP {status})" if status else "")
        msg = (
            f"{self.identity} ({self.cfg.role}): call failed after {attempts} attempt(s): {what}: "
        )
        msg += self._scrub(str(exc))[:500]
        if status in (401, 403):
            msg += f"; check the key in the environment variable {self.cfg.key_env}"
        elif status == 404:
            msg += f"; check llm.{self.cfg.role}.model and base_url"
        elif retryable:
            msg += f"; retries exhausted (llm.{self.cfg.role}.max_retries={self.cfg.max_retries})"
        return msg

    def _scrub(self, text: str) -> str:
        """Remove the API key's value from any text that may reach a log or an error."""
        key = os.environ.get(self.cfg.key_env or "", "")
        return text.replace(key, "[redacted]") if len(key) >= 4 else text

    def close(self) -> None:
        self.backend.close()


def _check_messages(messages: list[dict], role: str) -> None:
    if not messages:
        raise ValueError(f"llm.{role}: no messages to send")
    for i, m in enumerate(messages):
        if m.get("role") not in ("system", "user", "assistant") or not isinstance(
            m.get("content"), str
        ):
            raise ValueError(
                f"llm.{role}: message {i} must be {{'role': system|user|assistant, 'content': str}}"
            )
