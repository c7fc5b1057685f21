from __future__ import annotations

from pathlib import Path

import pytest

from maxcode.kernelcompare.models import ModelSpec
from tests.fakes.llm_server import api_keys, fake_llm_server  # noqa: F401


@pytest.fixture
def tiny_model() -> ModelSpec:
    """A Qwen2 model small enough to train in seconds on a CPU; same module names as the real one."""
    return ModelSpec(
        from_config={
            "hidden_size": 64,
            "intermediate_size": 128,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "max_position_embeddings": 4096,
        },
        tokenizer_vocab_size=400,
    )


@pytest.fixture(scope="module")
def cpp_tasks(tmp_path_factory):
    """Two of the project's built-in C++ tasks with one test each (real g++ and tests)."""
    from maxcode.tasks.builtin import materialize_builtin_cpp

    out = tmp_path_factory.mktemp("suite") / "cpp"
    return materialize_builtin_cpp(
        out, n_tests=1, seed=0, problems=["algo_strlen_loop", "mem_column_sum"]
    )


@pytest.fixture(scope="module")
def cpp_evaluator(tmp_path_factory):
    from maxcode.evaluate.cpp import CppEvalConfig, CppEvaluator

    return CppEvaluator(
        CppEvalConfig(repeats=1, workers=1), Path(tmp_path_factory.mktemp("evcache"))
    )
