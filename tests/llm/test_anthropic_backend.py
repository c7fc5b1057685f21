"""The real anthropic SDK against the fake server: thinking, usage, retries, critic."""

import time

import pytest

from maxcode.critique.llm_critic import LLMCritic
from maxcode.errors import LLMCallFailed
from maxcode.llm.fake_servers import Fault

from .helpers import client_for, compile_error, cpp_task, ok_result

MSGS = [
    {"role": "system", "content": "Write a critique. 1. Diagnose: the bottleneck."},
    {"role": "user", "content": "Execution feedback: compiled=True; correctness=True"},
]


def critic_client(server, **overrides):
    return client_for(
        server,
        "anthropic",
        role="critic",
        max_tokens=4096,
        thinking_budget=1024,
        temperature=1.0,
        **overrides,
    )


def test_thinking_block_and_usage(fake_llm_server, api_keys):
    client = critic_client(fake_llm_server)
    [c] = client.complete(MSGS)
    assert c.thinking and "Diagnosis" in c.text and "Diagnosis" not in c.thinking
    assert c.finish_reason == "end_turn"
    assert c.input_tokens > 0 and c.output_tokens > 0
    assert client.usage.calls == 1
    assert c.usage.cost_usd == pytest.approx((3 * c.input_tokens + 15 * c.output_tokens) / 1e6)


def test_retry_after_then_answer(fake_llm_server, api_keys):
    fake_llm_server.inject(
        Fault("status", status=429, retry_after=0.2), Fault("status", status=529)
    )
    client = critic_client(fake_llm_server, retry_base_s=0.0, retry_max_s=0.0)
    start = time.monotonic()
    [c] = client.complete(MSGS)
    assert time.monotonic() - start >= 0.2 and client.retries == 2 and c.text


@pytest.mark.parametrize(
    "fault",
    [Fault("malformed"), Fault("drop"), Fault("slow", delay_s=1.5)],
    ids=["malformed-json", "dropped-connection", "timeout"],
)
def test_garbled_dropped_or_slow_answers_are_retried(fake_llm_server, api_keys, fault):
    fake_llm_server.inject(fault)
    client = critic_client(fake_llm_server, timeout_s=0.5)
    [c] = client.complete(MSGS)
    assert c.text and client.retries == 1


def test_bad_request_is_a_clear_error(fake_llm_server, api_keys):
    fake_llm_server.inject(Fault("status", status=400))
    with pytest.raises(LLMCallFailed, match=r"anthropic:fake-model \(critic\).*HTTP 400") as err:
        critic_client(fake_llm_server).complete(MSGS)
    assert api_keys["ANTHROPIC_API_KEY"] not in str(err.value)
    assert fake_llm_server.count() == 1


def test_llm_critic_follows_feedback(fake_llm_server, api_keys):
    critic = LLMCritic(critic_client(fake_llm_server))
    broken = critic.critique(cpp_task(), "int main() { return 0 }", compile_error())
    assert "does not compile" in broken.text
    assert broken.critic == "anthropic:fake-model" and broken.offline is False
    assert broken.prompt_version.startswith("critique_cpp/v1+")
    assert broken.usage.calls == 1 and broken.usage.output_tokens > 0
    fine = critic.critique(cpp_task(), "int main() { return 0; }", ok_result(1.5))
    assert fine.text.startswith("Diagnosis:") and "does not compile" not in fine.text


def test_sampling_params_reach_the_api_only_when_set(fake_llm_server, api_keys):
    client_for(fake_llm_server, "anthropic", temperature=0.3, top_p=0.9).complete(MSGS)
    sent = fake_llm_server.requests[-1]["params"]
    assert sent["temperature"] == 0.3 and sent["top_p"] == 0.9 and "thinking" not in sent
    client_for(fake_llm_server, "anthropic", temperature=1.0).complete(MSGS)
    assert "temperature" not in fake_llm_server.requests[-1]["params"]  # the API default
    critic_client(fake_llm_server).complete(MSGS)
    sent = fake_llm_server.requests[-1]["params"]
    assert sent["thinking"] == {"type": "enabled", "budget_tokens": 1024}
    assert "temperature" not in sent and sent["max_tokens"] == 4096
