"""LLMPolicy end to end: prompt -> real openai SDK -> fake server -> extraction."""

import random
import subprocess

from maxcode.llm.cache import ResponseCache
from maxcode.llm.fake_servers import Fault
from maxcode.policy.llm_policy import LLMPolicy
from maxcode.search.types import Observation

from .helpers import client_for, cpp_task, cuda_task


def _obs(task):
    return Observation(task, 0, 4, [], None, 0.0, False, "cuda-llm")


def test_cpp_proposals_are_programs_with_usage_and_version(fake_llm_server, api_keys, tmp_path):
    policy = LLMPolicy(client_for(fake_llm_server))
    props = policy.propose(_obs(cpp_task()), 4, random.Random(0))
    assert len(props) == 4 and policy.name == "openai:fake-model"
    with_code = [p for p in props if p.source is not None]
    assert with_code, [p.reason for p in props]
    for p in props:
        assert p.prompt_version.startswith("generator_cpp/v1+")
        assert p.usage.calls == 1 and p.usage.output_tokens > 0
    assert [p.meta["sample_index"] for p in props] == [0, 1, 2, 3]
    fast = next(p for p in with_code if "sync_with_stdio" in p.source)
    src = tmp_path / "cand.cpp"
    src.write_text(fast.source)
    subprocess.run(["g++", "-fsyntax-only", "-std=c++17", str(src)], check=True, timeout=60)


def test_truncated_completion_is_a_recorded_no_code_proposal(fake_llm_server, api_keys):
    fake_llm_server.inject(Fault("truncate"))
    policy = LLMPolicy(client_for(fake_llm_server))
    [p] = policy.propose(_obs(cpp_task()), 1, random.Random(0))
    assert p.source is None and p.status_hint == "no_code"
    assert "unterminated fence" in p.reason and p.meta["finish_reason"] == "length"
    assert p.meta["completion_excerpt"]
    assert p.usage.calls == 1  # the failed sample still cost a call


def test_cuda_task_gets_model_new(fake_llm_server, api_keys):
    policy = LLMPolicy(client_for(fake_llm_server))
    [p] = policy.propose(_obs(cuda_task()), 1, random.Random(0))
    assert p.source is not None and "class ModelNew(Model)" in p.source
    assert p.prompt_version.startswith("generator_cuda/")


def test_same_seed_replays_from_cache(fake_llm_server, api_keys, tmp_path):
    cache = ResponseCache(tmp_path / "c.sqlite")
    first = LLMPolicy(client_for(fake_llm_server, cache=cache)).propose(
        _obs(cpp_task()), 3, random.Random(7)
    )
    calls = fake_llm_server.count()
    again = LLMPolicy(client_for(fake_llm_server, cache=cache)).propose(
        _obs(cpp_task()), 3, random.Random(7)
    )
    assert fake_llm_server.count() == calls
    assert [p.source for p in again] == [p.source for p in first]
    assert all(p.usage.cached_calls == 1 and p.usage.calls == 0 for p in again)
    other_seed = LLMPolicy(client_for(fake_llm_server, cache=cache)).propose(
        _obs(cpp_task()), 3, random.Random(8)
    )
    assert fake_llm_server.count() == calls + 3 and len(other_seed) == 3
