"""The kernelcompare block of params.yaml loads strictly into one dataclass per stage."""

from __future__ import annotations

import pytest

from maxcode.errors import ConfigError
from maxcode.kernelcompare.params import load_kernelcompare_params


def test_empty_block_gives_the_reports_defaults():
    kc = load_kernelcompare_params({})
    assert kc.split.seed == 42 and kc.split.train_fraction == 0.8
    assert kc.heldout.max_new_tokens == 4096 and kc.model is None
    sft = kc.sft_config(output_dir="x", use_cpu=True)
    assert (sft.learning_rate, sft.lora_r, sft.num_train_epochs) == (2e-4, 32, 8.0)
    assert kc.grpo_config(output_dir="x", use_cpu=True).beta == 0.04
    with pytest.raises(ConfigError, match=r"kernelcompare\.model: not set"):
        kc.require_model()


def test_values_come_from_params():
    kc = load_kernelcompare_params(
        {
            "kernelcompare": {
                "sft": {"learning_rate": 1e-4, "lora_target_modules": ["q_proj", "v_proj"]},
                "grpo": {"num_generations": 4},
                "model": {"from_config": {"hidden_size": 32}},
            }
        }
    )
    sft = kc.sft_config(output_dir="x", use_cpu=True)
    assert sft.learning_rate == 1e-4 and sft.lora_config().target_modules == {"q_proj", "v_proj"}
    assert kc.grpo_config(output_dir="x", use_cpu=True).num_generations == 4
    assert kc.require_model().from_config == {"hidden_size": 32}


@pytest.mark.parametrize(
    ("block", "needle"),
    [
        ({"sftt": {}}, "kernelcompare: unknown key"),
        ({"sft": {"lora_rank": 8}}, "'lora_r'.*fields of KernelCompareSFTConfig"),
        ({"model": {"name_or_path": "/nonexistent/ckpt"}}, "is not a directory"),
        ({"model": {"name_or_path": "/tmp", "from_config": {}}}, "exactly one of"),
        ({"heldout": {"max_new_tokens": 0}}, "max_new_tokens"),
        ({"sft": {"lora_dropout": 1.5}}, r"kernelcompare\.sft: lora_r and lora_alpha"),
        ({"sft": {"lora_target_modules": []}}, "name at least one projection"),
    ],
)
def test_bad_blocks_name_the_key(block, needle):
    with pytest.raises(ConfigError, match=needle):
        kc = load_kernelcompare_params({"kernelcompare": block})
        kc.sft_config(output_dir="x", use_cpu=True)
