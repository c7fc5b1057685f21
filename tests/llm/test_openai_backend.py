"""The real openai SDK against the fake server: answers, replay, retries, failures."""

import logging
import time

import pytest

from maxcode.errors import LLMCallFailed
from maxcode.llm.cache import ResponseCache
from maxcode.llm.fake_servers import Fault

from .helpers import CPP_REFERENCE, client_for

PATH = "/v1/chat/completions"
MSGS = [
    {"role": "system", "content": "You optimize C++ programs for speed."},
    {"role": "user", "content": f"# The program\n```cpp\n{CPP_REFERENCE}```\n"},
]


def test_n_samples_with_usage_and_cost(fake_llm_server, api_keys):
    client = client_for(fake_llm_server)
    got = client.complete(MSGS, n=3, seed=11)
    assert len(got) == 3 and fake_llm_server.count(PATH) == 3
    assert all("int main" in c.text and c.finish_reason == "stop" for c in got)
    assert len({c.text for c in got}) > 1  # sample index reaches the server as a seed
    for c in got:
        assert c.usage.calls == 1 and c.usage.cached_calls == 0
        assert c.input_tokens > 0 and c.output_tokens > 0
        assert c.usage.cost_usd == pytest.approx((3 * c.input_tokens + 15 * c.output_tokens) / 1e6)
    assert client.usage.calls == 3
    assert client.usage.output_tokens == sum(c.output_tokens for c in got)


def test_rerun_is_exact_replay_with_zero_calls(fake_llm_server, api_keys, tmp_path):
    cache = ResponseCache(tmp_path / "cache.sqlite")
    first = client_for(fake_llm_server, cache=cache).complete(MSGS, n=4, seed=5)
    assert fake_llm_server.count() == 4
    again = client_for(fake_llm_server, cache=ResponseCache(tmp_path / "cache.sqlite"))
    replay = again.complete(MSGS, n=4, seed=5)
    assert fake_llm_server.count() == 4  # no new request
    assert [c.text for c in replay] == [c.text for c in first]
    assert all(c.cached for c in replay)
    assert again.usage.calls == 0 and again.usage.cached_calls == 4
    # tokens and cost are those of the original calls, so replayed tables are identical
    assert again.usage.output_tokens == sum(c.output_tokens for c in first)
    # a larger n pays only for the new sample index
    again.complete(MSGS, n=5, seed=5)
    assert fake_llm_server.count() == 5


def test_429_respects_retry_after(fake_llm_server, api_keys):
    fake_llm_server.inject(Fault("status", status=429, retry_after=0.3))
    client = client_for(fake_llm_server, retry_base_s=0.0, retry_max_s=0.0)
    start = time.monotonic()
    [c] = client.complete(MSGS)
    assert time.monotonic() - start >= 0.3
    assert c.text and client.retries == 1 and fake_llm_server.count() == 2


@pytest.mark.parametrize(
    "fault",
    [
        Fault("status", status=500),
        Fault("status", status=503),
        Fault("malformed"),
        Fault("drop"),
        Fault("slow", delay_s=1.5),
    ],
    ids=["500", "503", "malformed-json", "dropped-connection", "timeout"],
)
def test_transient_failures_are_retried(fake_llm_server, api_keys, fault):
    fake_llm_server.inject(fault, fault)
    client = client_for(fake_llm_server, timeout_s=0.5)
    [c] = client.complete(MSGS)
    assert "```cpp" in c.text
    assert client.retries == 2 and client.usage.calls == 1


def test_exhausted_retries_raise_clear_error_and_keep_finished_samples(
    fake_llm_server, api_keys, tmp_path
):
    cache = ResponseCache(tmp_path / "cache.sqlite")
    # sequential samples: sample 0 fails twice (max_retries=1), samples 1 and 2 succeed
    fake_llm_server.inject(Fault("status", status=500), Fault("status", status=500))
    client = client_for(fake_llm_server, cache=cache, max_retries=1, concurrency=1)
    with pytest.raises(LLMCallFailed, match=r"after 2 attempt\(s\).*HTTP 500.*max_retries=1"):
        client.complete(MSGS, n=3)
    assert len(cache) == 2
    before = fake_llm_server.count()
    client_for(fake_llm_server, cache=cache).complete(MSGS, n=3)
    assert fake_llm_server.count() == before + 1  # only the missing sample is paid for


def test_auth_error_is_not_retried_and_names_the_variable(fake_llm_server, api_keys):
    fake_llm_server.inject(Fault("status", status=401))
    client = client_for(fake_llm_server)
    with pytest.raises(LLMCallFailed, match="environment variable OPENAI_API_KEY") as err:
        client.complete(MSGS)
    assert fake_llm_server.count() == 1
    assert api_keys["OPENAI_API_KEY"] not in str(err.value)


def test_key_never_reaches_logs_errors_or_cache(fake_llm_server, api_keys, tmp_path, caplog):
    secret = api_keys["OPENAI_API_KEY"]
    caplog.set_level(logging.DEBUG)
    cache_path = tmp_path / "cache.sqlite"
    fake_llm_server.inject(*[Fault("status", status=500)] * 3, Fault("drop"))
    client = client_for(fake_llm_server, cache=ResponseCache(cache_path), max_retries=2)
    with pytest.raises(LLMCallFailed) as err:
        client.complete(MSGS)
    client.complete(MSGS)  # the drop is retried; the answer is cached
    seen = caplog.text + str(err.value) + repr(err.value.__cause__) + repr(client.cfg)
    assert "retry" in caplog.text and secret not in seen
    for f in tmp_path.iterdir():
        assert secret.encode() not in f.read_bytes()
    # the server did receive a key: the SDK really sent it
    assert "authorization" in fake_llm_server.requests[-1]["headers"]


def test_concurrency_is_bounded_per_endpoint(fake_llm_server, api_keys):
    fake_llm_server.inject(*[Fault("slow", delay_s=0.15)] * 8)
    client = client_for(fake_llm_server, concurrency=3)
    start = time.monotonic()
    client.complete(MSGS, n=8)
    assert fake_llm_server.max_in_flight == 3
    assert time.monotonic() - start < 8 * 0.15  # but calls do overlap


def test_request_carries_model_sampling_and_per_sample_seed(fake_llm_server, api_keys):
    client_for(fake_llm_server, temperature=0.2, top_p=0.95, max_tokens=321).complete(
        MSGS, n=2, seed=40
    )
    sent = sorted((r["params"] for r in fake_llm_server.requests), key=lambda p: p["seed"])
    assert [p["seed"] for p in sent] == [40, 41]
    for p in sent:
        assert p["model"] == "fake-model" and p["max_tokens"] == 321
        assert p["temperature"] == 0.2 and p["top_p"] == 0.95 and p["n"] == 1
