"""On a GPU: each supported built-in task's default proposal goes through the real
CUDA evaluator (build, correctness trials, shape perturbation, anti-cheat checks)."""

from __future__ import annotations

import random
import shutil

import pytest

from maxcode.evaluate.cuda import CudaEvalConfig, CudaEvaluator
from maxcode.evaluate.cuda.figures import detect_cuda_arch
from maxcode.evaluate.result import Status
from maxcode.policy.offline_cuda import OfflineCudaPolicy
from maxcode.search.types import Observation
from maxcode.tasks.builtin_cuda import load_builtin_cuda

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(
        shutil.which("nvidia-smi") is None or not detect_cuda_arch(),
        reason="needs an NVIDIA GPU",
    ),
]


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    policy = OfflineCudaPolicy()
    items = []
    for task in load_builtin_cuda():
        if policy.analyze(task.reference_source).plan is None:
            continue
        obs = Observation(task, 0, 1, [], None, 0.0, False, "best-of-n")
        items.append((task, policy.propose(obs, 1, random.Random(0))[0].source))
    with CudaEvaluator(
        CudaEvalConfig(timing_trials=20), tmp_path_factory.mktemp("offline-cuda-cache")
    ) as evaluator:
        outcomes = evaluator.evaluate_items(items)
    return {t.metadata["file_name"]: r for (t, _), r in zip(items, outcomes, strict=True)}


def test_fifteen_tasks_are_evaluated(results):
    assert len(results) == 15  # every built-in task but the bare convolution


@pytest.mark.parametrize(
    "file_name",
    [
        "1_Scaled_vector_add.py",
        "2_GELU_tanh.py",
        "3_Row_sum.py",
        "4_Mean_over_middle_dim.py",
        "5_Softmax.py",
        "6_LayerNorm.py",
        "7_RMSNorm.py",
        "8_Square_matmul.py",
        "9_Batched_matmul.py",
        "1_Linear_ReLU_BiasAdd.py",
        "2_Conv2d_ReLU_Scale.py",
        "3_Scale_Add_Clamp.py",
        "4_Residual_LayerNorm.py",
        "5_Matmul_Scale_Softmax.py",
        "6_Sum_Div_Sigmoid.py",
    ],
)
def test_default_proposal_is_correct(results, file_name):
    result = results[file_name]
    assert result.status is Status.OK, (
        f"{result.status.value}: {result.reason}\n{result.compile_log[-2000:]}"
    )
    assert result.speedup is not None and result.speedup > 0
