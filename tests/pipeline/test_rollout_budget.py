"""The pipeline's rollouts keep a dollar budget the way `maxcode optimize` does."""

from __future__ import annotations

from pathlib import Path

import pytest

from maxcode.errors import LLMConfigError
from maxcode.llm.fake_servers import FakeLLMServer
from maxcode.params import BuiltinCppSuite
from maxcode.pipeline import build_suite, run_rollout
from maxcode.records import read_jsonl


def rollout(tmp_path: Path, server: FakeLLMServer, model: str, cap: float) -> dict:
    suite = tmp_path / "suite"
    if not (suite / "tasks.jsonl").exists():
        build_suite("s", BuiltinCppSuite(n_tests=2, problems=("io_prefix_sums_endl",)), suite)
    role = {
        "backend": "openai",
        "model": model,
        "base_url": server.openai_base_url,
        "max_tokens": 256,
    }
    method = {
        "name": "m",
        "depth": 6,
        "k": 2,
        "critique": True,
        "trajectory": "all",
        "budget": {"max_cost_usd": cap},
    }
    out = tmp_path / "out" / f"{model}.jsonl"
    return run_rollout(
        suite_dir=suite,
        task_id="io_prefix_sums_endl",
        method=method,
        seed=0,
        llm={"generator": role, "critic": role},
        evaluation={"cpp": {"timing": "wall", "repeats": 1}},
        inflight=out.with_suffix(".inflight"),
        output=out,
        cache_dir=tmp_path / "cache",
        model_dir=None,
        params={},
    )


@pytest.mark.slow
def test_a_rollout_stops_before_its_dollar_cap(tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)  # a local server needs no key
    cap = 0.03
    with FakeLLMServer() as server:
        end = rollout(tmp_path, server, "gpt-4o", cap)
        calls = server.count()
    assert end["stopped_by"].startswith("budget") and len(end["step_rewards"]) < 6
    assert calls == end["usage"]["calls"] > 0
    assert 0 < end["usage"]["cost_usd"] <= cap
    records = list(read_jsonl(tmp_path / "out" / "gpt-4o.jsonl"))
    assert records[-1] == end and records[-2]["kind"] == "step_end"


def test_a_rollout_with_a_dollar_cap_and_no_price_is_refused_before_any_call(tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with FakeLLMServer() as server:
        with pytest.raises(LLMConfigError, match="price_input_per_mtok"):
            rollout(tmp_path, server, "no-such-model", 1.0)
        assert server.count() == 0
