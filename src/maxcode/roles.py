"""The parts a search run is made of, built from typed params: evaluator, policy, critic.

This module sits above ``evaluate``, ``llm``, ``policy`` and ``critique`` and imports
them at the top, so none of them needs to import another from below (the LLM layer
used to build the policies through string imports).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from maxcode.critique.llm_critic import LLMCritic
from maxcode.critique.offline import OfflineCritic
from maxcode.errors import LLMConfigError
from maxcode.evaluate.cache import CachedEvaluator, EvalCache
from maxcode.evaluate.cpp import CppEvaluator
from maxcode.evaluate.cuda import CudaEvaluator
from maxcode.llm.cache import ResponseCache
from maxcode.llm.client import BudgetTracker
from maxcode.llm.config import LLMBudget, RoleConfig, role_config_from_dict
from maxcode.llm.factory import build_client
from maxcode.params import EvaluationParams
from maxcode.policy.llm_policy import LLMPolicy
from maxcode.policy.offline_cpp import OfflineCppPolicy
from maxcode.search.config import Budget
from maxcode.search.types import Critic, Policy


def _offline_cuda_policy() -> Policy:
    # torch (seconds to import) only for CUDA tasks: every rollout job imports this module.
    from maxcode.policy.offline_cuda import OfflineCudaPolicy

    return OfflineCudaPolicy()


# The non-LLM policy per task language, built without arguments.
OFFLINE_POLICIES: dict[str, Callable[[], Policy]] = {
    "cpp": OfflineCppPolicy,
    "cuda": _offline_cuda_policy,
}


def build_evaluator(
    language: str,
    evaluation: EvaluationParams,
    cache_dir: Path,
    profile: bool = False,
    replayed: Any = None,
) -> CachedEvaluator:
    """The evaluator for a task's language, behind the shared evaluation cache.

    ``profile`` (the method's Effi-Learner flag) adds profiling; it never turns off a
    profile the user asked for in ``evaluation.<language>.profile``. ``replayed`` (a
    ``ReplayEvaluator``) serves recorded outcomes instead of running candidates.
    """
    cache_dir = Path(cache_dir).resolve()
    if replayed is not None:
        inner: Any = replayed
    elif language == "cpp":
        cpp = replace(evaluation.cpp, profile=evaluation.cpp.profile or profile)
        inner = CppEvaluator(cpp, cache_dir / "cpp")
    else:
        cuda = replace(evaluation.cuda, profile=evaluation.cuda.profile or profile)
        inner = CudaEvaluator(cuda, cache_dir / "cuda")
        inner.prepare_build_cache()  # its headers build while the first candidates are written
    return CachedEvaluator(inner, EvalCache(cache_dir / "evaluations.sqlite"))


def build_policy(
    cfg: RoleConfig | dict[str, Any] | None,
    language: str = "cpp",
    cache_dir: Path | None = None,
    *,
    cache: ResponseCache | None = None,
    run_budget: BudgetTracker | None = None,
) -> Policy:
    """The generator role for tasks in ``language``; its own budget is new per call (once
    per run); ``run_budget`` is the run's, shared with the critic."""
    cfg = _role(cfg, "generator")
    if cfg.backend == "replay":
        raise LLMConfigError(
            "llm.generator.backend: replay proposes corpus programs in pipeline rollouts only "
            "(params with a corpus block); choose offline or an LLM here"
        )
    if cfg.backend == "offline":
        if language not in OFFLINE_POLICIES:
            raise LLMConfigError(f"llm.generator: no offline policy for language {language!r}")
        return OFFLINE_POLICIES[language]()
    return LLMPolicy(
        build_client(cfg, "generator", cache_dir=cache_dir, cache=cache, run_budget=run_budget)
    )


def build_critic(
    cfg: RoleConfig | dict[str, Any] | None,
    language: str = "cpp",
    cache_dir: Path | None = None,
    *,
    cache: ResponseCache | None = None,
    run_budget: BudgetTracker | None = None,
) -> Critic:
    """The critic role (the paper's critique model); the offline critic reads any language."""
    cfg = _role(cfg, "critic")
    if cfg.backend == "offline":
        return OfflineCritic()
    return LLMCritic(
        build_client(cfg, "critic", cache_dir=cache_dir, cache=cache, run_budget=run_budget)
    )


def run_budget(budget: Budget, fix: str) -> BudgetTracker | None:
    """The search's own token and dollar limits, shared by every role of one run."""
    if budget.max_tokens is None and budget.max_cost_usd is None:
        return None
    limits = LLMBudget(max_tokens=budget.max_tokens, max_cost_usd=budget.max_cost_usd)
    return BudgetTracker("this run", limits, fix)


def require_prices(roles: list[RoleConfig], budget: Budget, how: str) -> None:
    """A dollar budget needs every LLM role's price: an unknown one would count as free."""
    if budget.max_cost_usd is None:
        return
    for cfg in roles:
        if cfg.price is None:
            raise LLMConfigError(
                f"a budget in dollars needs the price of {cfg.identity} ({cfg.role}), which is "
                f"not in the price table; {how}"
            )


def _role(cfg: RoleConfig | dict[str, Any] | None, role: str) -> RoleConfig:
    return cfg if isinstance(cfg, RoleConfig) else role_config_from_dict(role, cfg)
