import pytest

from maxcode.errors import ConfigError, LLMConfigError
from maxcode.llm.config import llm_config_from_dict, role_config_from_dict


def test_unknown_key_fails_and_lists_allowed_keys():
    with pytest.raises(
        ConfigError,
        match=r"llm.generator: unknown key\(s\) 'temprature' \(did you mean 'temperature'\?\)",
    ):
        role_config_from_dict("generator", {"backend": "openai", "model": "m", "temprature": 0.5})


def test_unknown_budget_key_fails():
    with pytest.raises(ConfigError, match=r"llm.critic.budget: unknown key\(s\) 'max_usd'"):
        role_config_from_dict("critic", {"budget": {"max_usd": 3}})


def test_unknown_role_fails():
    with pytest.raises(
        ConfigError, match=r"llm: unknown key\(s\) 'generatr' \(did you mean 'generator'"
    ):
        llm_config_from_dict({"generatr": {}})


def test_missing_roles_are_offline():
    roles = llm_config_from_dict({"generator": {"backend": "openai", "model": "gpt-4o"}})
    assert roles["generator"].backend == "openai"
    assert roles["critic"].backend == "offline"
    assert roles["reward_to_go"].backend == "offline"


def test_api_backend_needs_model():
    with pytest.raises(LLMConfigError, match="needs a model"):
        role_config_from_dict("generator", {"backend": "anthropic"})


def test_thinking_rules_say_how_to_fix():
    base = {"backend": "anthropic", "model": "claude", "max_tokens": 4096}
    with pytest.raises(LLMConfigError, match=r"temperature 1\.0"):
        role_config_from_dict("critic", {**base, "thinking_budget": 2048, "temperature": 0.5})
    with pytest.raises(LLMConfigError, match=">= 1024 and below max_tokens"):
        role_config_from_dict("critic", {**base, "thinking_budget": 8192, "temperature": 1.0})
    with pytest.raises(LLMConfigError, match="anthropic feature"):
        role_config_from_dict(
            "critic", {"backend": "openai", "model": "m", "thinking_budget": 2048}
        )
    ok = role_config_from_dict("critic", {**base, "thinking_budget": 2048, "temperature": 1.0})
    assert ok.thinking_budget == 2048


def test_negative_budget_names_the_field():
    with pytest.raises(LLMConfigError, match=r"llm.generator.budget.max_calls"):
        role_config_from_dict("generator", {"budget": {"max_calls": 0}})


def test_missing_key_error_names_variable(monkeypatch):
    monkeypatch.delenv("MY_LLM_KEY", raising=False)
    cfg = role_config_from_dict(
        "generator", {"backend": "openai", "model": "m", "api_key_env": "MY_LLM_KEY"}
    )
    with pytest.raises(LLMConfigError, match="environment variable MY_LLM_KEY"):
        cfg.api_key()
    monkeypatch.setenv("MY_LLM_KEY", "sk-value-never-shown")
    assert cfg.api_key() == "sk-value-never-shown"
    assert "sk-value-never-shown" not in repr(cfg) + str(cfg.to_dict())


def test_default_key_variables_and_cost():
    cfg = role_config_from_dict(
        "generator",
        {
            "backend": "anthropic",
            "model": "claude",
            "price_input_per_mtok": 3.0,
            "price_output_per_mtok": 15.0,
        },
    )
    assert cfg.key_env == "ANTHROPIC_API_KEY"
    assert cfg.cost(1_000_000, 100_000) == pytest.approx(3.0 + 1.5)
    assert cfg.identity == "anthropic:claude"
