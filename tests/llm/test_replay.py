"""A whole rollout through the search loop, twice: the rerun replays every LLM call
from the cache (zero requests) and writes the same records."""

import hashlib
import json

from maxcode.evaluate.result import EvalResult, Status, Timing
from maxcode.records import read_jsonl
from maxcode.roles import build_critic, build_policy
from maxcode.search.config import MethodConfig
from maxcode.search.loop import RunContext, run_search

from .helpers import cpp_task


class HashTimedEvaluator:
    """Deterministic stand-in for the C++ evaluator: the run time is a hash of the source."""

    name = "hash-timed/1"

    def evaluate(self, task, source):
        if "int main" not in source:
            return EvalResult(Status.COMPILE_ERROR, reason="no main", evaluator=self.name)
        h = int(hashlib.sha256(source.encode()).hexdigest()[:6], 16) / 0xFFFFFF
        return EvalResult(Status.OK, timing=Timing("wall", "s", 0.5 + h, 1.0), evaluator=self.name)


def _run(server, tmp_path, out):
    llm_gen = {"backend": "openai", "model": "gen", "base_url": server.openai_base_url}
    llm_crit = {"backend": "anthropic", "model": "crit", "base_url": server.anthropic_base_url}
    method = MethodConfig(name="traj-critique-best-perf", depth=3, k=3, critique=True, best=True)
    ctx = RunContext(
        task=cpp_task(),
        method=method,
        seed=1,
        policy=build_policy(llm_gen, language="cpp", cache_dir=tmp_path),
        evaluator=HashTimedEvaluator(),
        critic=build_critic(llm_crit, language="cpp", cache_dir=tmp_path),
    )
    return run_search(ctx, out)


def _strip(records):
    """Records without what legitimately differs on replay (wall time, usage split)."""
    drop = {"wall_s", "usage", "provenance"}

    def clean(x):
        if isinstance(x, dict):
            return {k: clean(v) for k, v in x.items() if k not in drop}
        if isinstance(x, list):
            return [clean(v) for v in x]
        return x

    return [clean(r) for r in records]


def test_rerun_makes_zero_calls_and_same_records(fake_llm_server, api_keys, tmp_path):
    first = _run(fake_llm_server, tmp_path, tmp_path / "a.jsonl")
    calls = fake_llm_server.count()
    assert first["usage"]["calls"] == calls > 0
    again = _run(fake_llm_server, tmp_path, tmp_path / "b.jsonl")
    assert fake_llm_server.count() == calls
    assert again["usage"]["calls"] == 0
    assert (
        again["usage"]["cached_calls"] == first["usage"]["calls"] + first["usage"]["cached_calls"]
    )
    # tokens and cost are those of the original calls: tables are identical on replay
    for field in ("input_tokens", "output_tokens", "cost_usd"):
        assert again["usage"][field] == first["usage"][field]
    a, b = list(read_jsonl(tmp_path / "a.jsonl")), list(read_jsonl(tmp_path / "b.jsonl"))
    assert json.dumps(_strip(a), sort_keys=True) == json.dumps(_strip(b), sort_keys=True)
    for f in tmp_path.iterdir():  # records and caches never hold a key
        assert all(v.encode() not in f.read_bytes() for v in api_keys.values())
    versions = {r["prompt_version"] for r in a if r["kind"] == "candidate"}
    assert len(versions) == 1 and versions.pop().startswith("generator_cpp/v1+")
