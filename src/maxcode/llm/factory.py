"""An LLM role's client from its ``params.yaml`` block: backend, response cache, budgets.

The policy and critic around a client (or the offline programs for ``backend:
offline``) are built by ``maxcode.roles``, which sits above this layer.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from maxcode.errors import LLMConfigError
from maxcode.llm.backend import ChatBackend
from maxcode.llm.cache import ResponseCache
from maxcode.llm.client import BudgetTracker, LLMClient
from maxcode.llm.config import RoleConfig, role_config_from_dict

CACHE_FILE = "llm_responses.sqlite"
CHAT_BACKENDS = {"openai": "openai", "anthropic": "anthropic", "hf": "transformers"}  # -> its SDK

_CACHES: dict[Path, ResponseCache] = {}
_CACHES_LOCK = threading.Lock()


def open_cache(path: str | Path) -> ResponseCache:
    """One connection per cache file per process, shared by all roles."""
    resolved = Path(path).resolve()
    with _CACHES_LOCK:
        if resolved not in _CACHES:
            _CACHES[resolved] = ResponseCache(resolved)
        return _CACHES[resolved]


def _role(cfg: RoleConfig | dict[str, Any] | None, role: str) -> RoleConfig:
    if isinstance(cfg, RoleConfig):
        return cfg
    return role_config_from_dict(role, cfg)


def build_client(
    cfg: RoleConfig | dict[str, Any] | None,
    role: str = "generator",
    *,
    cache_dir: Path | None = None,
    cache: ResponseCache | None = None,
    run_budget: BudgetTracker | None = None,
) -> LLMClient:
    """Backend + response cache + the run's budget.

    The cache is ``cache`` if given, else the role's ``cache_path``, else
    ``cache_dir/llm_responses.sqlite``; with none of them, nothing is cached.
    """
    cfg = _role(cfg, role)
    if cache is None and (cfg.cache_path or cache_dir is not None):
        cache = open_cache(cfg.cache_path or Path(cache_dir) / CACHE_FILE)  # type: ignore[arg-type]
    return LLMClient(create_backend(cfg), cache=cache, run_budget=run_budget)


def create_backend(cfg: RoleConfig) -> ChatBackend:
    """The role's chat backend. Its module is imported only here, when a role uses it, so a
    missing SDK hurts only its users (one line naming the package to install)."""
    if cfg.backend not in CHAT_BACKENDS:
        raise LLMConfigError(
            f"llm.{cfg.role}: backend {cfg.backend!r} is not a chat model; chat backends are "
            f"{sorted(CHAT_BACKENDS)} (offline roles are built by maxcode.roles)"
        )
    try:
        if cfg.backend == "openai":
            from maxcode.llm.openai_backend import OpenAIBackend as backend
        elif cfg.backend == "anthropic":
            from maxcode.llm.anthropic_backend import AnthropicBackend as backend
        else:
            from maxcode.llm.hf_backend import HFBackend as backend
    except ImportError as err:
        raise LLMConfigError(
            f"llm.{cfg.role}: backend {cfg.backend!r} needs the {CHAT_BACKENDS[cfg.backend]!r} "
            f"package ({err}); install it with pip install 'maxcode[llm,train]'"
        ) from None
    return backend(cfg)
