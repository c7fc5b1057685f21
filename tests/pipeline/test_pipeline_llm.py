"""The same tables from the real SDK clients against the fake OpenAI and Anthropic servers."""

from __future__ import annotations

import csv
import os
from pathlib import Path

import pytest

from maxcode.llm.fake_servers import FakeLLMServer
from tests.workflow_copy import make_workdir, snakemake, tiny_params

pytestmark = pytest.mark.slow


def test_llm_generator_and_critic_fill_cost_columns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fake-not-a-key")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-fake-not-a-key")
    with FakeLLMServer() as server:
        params = tiny_params()
        params["llm"] = {
            "generator": {
                "backend": "openai",
                "model": "fake-generator",
                "base_url": server.openai_base_url,
                "price_input_per_mtok": 2.5,
                "price_output_per_mtok": 10.0,
            },
            "critic": {
                "backend": "anthropic",
                "model": "fake-critic",
                "base_url": server.anthropic_base_url,
                "max_tokens": 4096,
                "thinking_budget": 1024,
                "temperature": 1.0,  # the Messages API requires it with extended thinking
                "price_input_per_mtok": 3.0,
                "price_output_per_mtok": 15.0,
            },
        }
        params["tables"].update(
            main=["cuda-llm", "cuda-llm+maxcode"], ablation=[], rerank=["maxcode+random-m"]
        )
        params["r2g"]["train_methods"] = ["cuda-llm"]
        workdir = make_workdir(tmp_path / "w", params)
        proc = snakemake(workdir, env={**os.environ})
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = {
        r["method"]: r
        for r in csv.DictReader((workdir / "results/tables/main.csv").read_text().splitlines())
    }
    for method, row in rows.items():
        assert float(row["LLM calls/run"]) > 0, method
        assert float(row["tokens/run"]) > 0 and float(row["cost USD/run"]) > 0, method
        assert "(offline)" not in row["policy"]
    # the MaxCode variant pays for critiques too
    assert float(rows["cuda-llm+maxcode"]["cost USD/run"]) > float(rows["cuda-llm"]["cost USD/run"])
    assert "openai:fake-generator" in (workdir / "results/tables/main.md").read_text()
