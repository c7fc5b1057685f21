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
from maxcode.llm.config import RoleConfig, role_config_from_dict
from maxcode.llm.factory import build_client
from maxcode.params import EvaluationParams
from maxcode.policy.llm_policy import LLMPolicy
from maxcode.policy.offline_cpp import OfflineCppPolicy
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
    language: str, evaluation: EvaluationParams, cache_dir: Path, profile: bool = False
) -> CachedEvaluator:
    """The evaluator for a task's language, behind the shared evaluation cache.

    ``profile`` (the method's Effi-Learner flag) adds profiling; it never turns off a
    profile the user asked for in ``evaluation.<language>.profile``.
    """
    cache_dir = Path(cache_dir).resolve()
    if language == "cpp":
        cpp = replace(evaluation.cpp, profile=evaluation.cpp.profile or profile)
        inner: Any = CppEvaluator(cpp, cache_dir / "cpp")
    else:
        cuda = replace(evaluation.cuda, profile=evaluation.cuda.profile or profile)
        inner = CudaEvaluator(cuda, cache_dir / "cuda")
    return CachedEvaluator(inner, EvalCache(cache_dir / "evaluations.sqlite"))


def build_policy(
    cfg: RoleConfig | dict[str, Any] | None,
    language: str = "cpp",
    cache_dir: Path | None = None,
    *,
    cache: ResponseCache | None = None,
    budget: BudgetTracker | None = None,
) -> Policy:
    """The generator role for tasks in ``language``; a new budget per call: once per run."""
    cfg = _role(cfg, "generator")
    if cfg.backend == "offline":
        if language not in OFFLINE_POLICIES:
            raise LLMConfigError(f"llm.generator: no offline policy for language {language!r}")
        return OFFLINE_POLICIES[language]()
    return LLMPolicy(
        build_client(cfg, "generator", cache_dir=cache_dir, cache=cache, budget=budget)
    )


def build_critic(
    cfg: RoleConfig | dict[str, Any] | None,
    language: str = "cpp",
    cache_dir: Path | None = None,
    *,
    cache: ResponseCache | None = None,
    budget: BudgetTracker | None = None,
) -> Critic:
    """The critic role (the paper's critique model); the offline critic reads any language."""
    cfg = _role(cfg, "critic")
    if cfg.backend == "offline":
        return OfflineCritic()
    return LLMCritic(build_client(cfg, "critic", cache_dir=cache_dir, cache=cache, budget=budget))


def _role(cfg: RoleConfig | dict[str, Any] | None, role: str) -> RoleConfig:
    return cfg if isinstance(cfg, RoleConfig) else role_config_from_dict(role, cfg)
