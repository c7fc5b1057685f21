"""KernelBench semantics as config: each row names its commit; bad settings say what to set."""

from __future__ import annotations

import pytest
import torch

from maxcode.evaluate.cuda import CudaEvalConfig
from maxcode.evaluate.cuda.semantics import PRECISIONS, SEMANTICS
from maxcode.evaluate.cuda.worker import kernelbench_trial_seeds


def test_each_semantics_names_the_kernelbench_commit_and_file_it_mirrors():
    assert SEMANTICS["kernelbench-v0.1"].kernelbench_commit == "88df56b"
    assert SEMANTICS["kernelbench-v0.1"].eval_path == "src/eval.py"
    assert SEMANTICS["kernelbench-head"].kernelbench_commit == "423217d"
    assert SEMANTICS["kernelbench-head"].eval_path == "src/kernelbench/eval.py"


def test_both_versions_keep_modules_in_training_mode_and_seed_cpu_inputs():
    for row in SEMANTICS.values():
        assert row.train_mode and row.inputs_on_cpu and not row.equal_nan


@pytest.mark.parametrize(
    ("semantics", "precision", "tolerance"),
    [
        ("kernelbench-v0.1", "fp32", 1e-2),
        ("kernelbench-head", "fp32", 1e-4),
        ("kernelbench-head", "fp16", 1e-2),
        ("kernelbench-head", "bf16", 1e-2),
    ],
)
def test_tolerance_per_precision_is_kernelbench_s(semantics, precision, tolerance):
    cfg = CudaEvalConfig(semantics=semantics, precision=precision)
    assert SEMANTICS[cfg.semantics].tolerance(cfg.precision) == tolerance


def test_only_head_casts_to_the_precision():
    assert not SEMANTICS["kernelbench-v0.1"].casts_to_precision
    assert SEMANTICS["kernelbench-head"].casts_to_precision
    assert set(SEMANTICS["kernelbench-head"].tolerances) == set(PRECISIONS)


def test_half_precision_under_v01_says_to_switch_to_head():
    with pytest.raises(ValueError, match="semantics: kernelbench-head for fp16/bf16"):
        CudaEvalConfig(semantics="kernelbench-v0.1", precision="fp16")


def test_unknown_semantics_and_precision_list_the_choices():
    with pytest.raises(ValueError, match=r"semantics = 'kernelbench-v2' is unknown; choose one of"):
        CudaEvalConfig(semantics="kernelbench-v2")
    with pytest.raises(ValueError, match=r"precision = 'fp8' is unknown; choose one of"):
        CudaEvalConfig(semantics="kernelbench-head", precision="fp8")


def test_params_select_semantics_and_the_old_tolerance_keys_are_gone():
    cfg = CudaEvalConfig.from_dict({"semantics": "kernelbench-head", "precision": "bf16"})
    assert (cfg.semantics, cfg.precision) == ("kernelbench-head", "bf16")
    with pytest.raises(ValueError, match=r"evaluation\.cuda: unknown key\(s\) 'atol_fp32'"):
        CudaEvalConfig.from_dict({"atol_fp32": 1e-3}, "params.yaml evaluation.cuda")
    with pytest.raises(ValueError, match=r"evaluation\.cuda\.precision: 'fp8' is not one of"):
        CudaEvalConfig.from_dict({"precision": "fp8"})


def test_paper_preset_names_its_semantics():
    from pathlib import Path

    import yaml

    preset = yaml.safe_load((Path(__file__).parents[3] / "presets" / "paper.yaml").read_text())
    cfg = CudaEvalConfig.from_dict(preset["evaluation"]["cuda"])
    assert cfg.semantics == "kernelbench-v0.1" and cfg.precision == "fp32"


def test_trial_seeds_follow_kernelbench_s_generator():
    """run_and_check_correctness: torch.manual_seed(seed), then randint(0, 2**32 - 1) per trial."""
    torch.manual_seed(42)
    expected = [int(torch.randint(0, 2**32 - 1, (1,)).item()) for _ in range(5)]
    assert kernelbench_trial_seeds(42, 5) == expected
    assert len(set(expected)) == 5
    assert kernelbench_trial_seeds(42, 2) == expected[:2]  # the same prefix for fewer trials


def test_timing_and_watchdog_settings_are_checked():
    with pytest.raises(ValueError, match="timing_max_trials"):
        CudaEvalConfig(timing_trials=50, timing_max_trials=10)
    with pytest.raises(ValueError, match="watchdog_factor must be > 1"):
        CudaEvalConfig(watchdog_factor=1.0)
