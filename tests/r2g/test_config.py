from __future__ import annotations

import pytest

from maxcode.errors import ConfigError
from maxcode.r2g.config import EncoderR2GConfig, GenerativeR2GConfig, load_config


def test_unknown_keys_fail_naming_them() -> None:
    with pytest.raises(ConfigError, match=r"r2g\.generative\.lora: unknown key\(s\) 'rank'"):
        load_config(GenerativeR2GConfig, {"lora": {"rank": 8}}, "r2g.generative")
    with pytest.raises(ConfigError, match=r"unknown key\(s\) 'alpha'"):
        load_config(EncoderR2GConfig, {"alpha": 1.0}, "r2g.encoder")


def test_paper_preset_and_overrides() -> None:
    cfg = load_config(GenerativeR2GConfig, {"preset": "paper", "epochs": 1}, "r2g.generative")
    assert cfg.base_model == "Qwen/Qwen2.5-7B-Instruct"
    assert cfg.finetune == "lora" and cfg.precision == "bf16" and cfg.epochs == 1.0
    assert cfg.lora.target_modules[0] == "q_proj"  # tuple default survives the nested merge
    with pytest.raises(ConfigError, match="preset: 'huge' is not one of"):
        load_config(GenerativeR2GConfig, {"preset": "huge"}, "r2g.generative")


def test_values_are_checked_with_a_fix() -> None:
    with pytest.raises(ConfigError, match="score_mode: 'mean' is not one of"):
        load_config(GenerativeR2GConfig, {"score_mode": "mean"}, "r2g.generative")
    with pytest.raises(ConfigError, match="full fine-tuning of 'Qwen/x' is not supported"):
        GenerativeR2GConfig(base_model="Qwen/x", finetune="full")
    with pytest.raises(ConfigError, match="hidden_size=100 must divide by num_heads=3"):
        load_config(GenerativeR2GConfig, {"tiny": {"hidden_size": 100, "num_heads": 3}}, "g")
    with pytest.raises(ConfigError, match=r"g\.batch_size: expected an integer, got 'eight'"):
        load_config(GenerativeR2GConfig, {"batch_size": "eight"}, "g")
    enc = load_config(EncoderR2GConfig, {"ridge_alphas": [1, 10]}, "e")
    assert enc.ridge_alphas == (1, 10)
