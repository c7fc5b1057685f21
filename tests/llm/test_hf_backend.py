"""The hf backend on a tiny Qwen2 built from a config (no download), with a peft adapter."""

import pytest

from maxcode.errors import LLMConfigError
from maxcode.llm.cache import ResponseCache
from maxcode.llm.factory import build_client
from tests.fakes.tiny_lm import build_lora_adapter, build_tiny_lm

MSGS = [{"role": "system", "content": "Score it."}, {"role": "user", "content": "int main() {}"}]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiny")
    model = build_tiny_lm(root / "model")
    adapter = build_lora_adapter(model, root / "adapter")
    return str(model), str(adapter)


def _client(model, adapter=None, cache=None, temperature=0.0):
    cfg = {
        "backend": "hf",
        "model": model,
        "adapter": adapter,
        "device": "cpu",
        "max_tokens": 12,
        "temperature": temperature,
        "cache_path": None,
    }
    return build_client(cfg, "reward_to_go", cache=cache)


def test_batched_generation_counts_tokens(tiny, monkeypatch):
    client = _client(tiny[0], temperature=1.0)
    calls = []
    real = client.backend.generate
    monkeypatch.setattr(client.backend, "generate", lambda *a: calls.append(a[2]) or real(*a))
    got = client.complete(MSGS, n=3, seed=4)
    assert calls == [[0, 1, 2]]  # one batched generate for all samples
    assert len(got) == 3 and len({c.text for c in got}) > 1
    prompt_len = len(client.backend.tokenizer(client.backend.prompt_text(MSGS))["input_ids"])
    for c in got:
        assert c.input_tokens == prompt_len and 1 <= c.output_tokens <= 12
        assert c.usage.calls == 1 and c.usage.cost_usd == 0.0
    assert client.identity == f"hf:{tiny[0]}"


def test_greedy_is_deterministic_and_the_adapter_changes_it(tiny):
    base = _client(tiny[0]).complete(MSGS, n=2)
    assert base[0].text == base[1].text
    assert _client(tiny[0]).complete(MSGS)[0].text == base[0].text
    tuned_client = _client(*tiny)
    assert type(tuned_client.backend.model).__name__.startswith("Peft")
    tuned = tuned_client.complete(MSGS)
    assert tuned[0].text != base[0].text
    assert tuned_client.identity == f"hf:{tiny[0]}+{tiny[1]}"


def test_replay_does_not_run_the_model(tiny, tmp_path, monkeypatch):
    cache = ResponseCache(tmp_path / "c.sqlite")
    first = _client(tiny[0], cache=cache, temperature=1.0).complete(MSGS, n=2, seed=9)
    again = _client(tiny[0], cache=cache, temperature=1.0)

    def refuse(*args):
        raise AssertionError("the model ran during a replay")

    monkeypatch.setattr(again.backend, "generate", refuse)
    replay = again.complete(MSGS, n=2, seed=9)
    assert [c.text for c in replay] == [c.text for c in first]
    assert again.usage.cached_calls == 2 and again.usage.calls == 0


def test_bad_adapter_directory_is_a_clear_error(tiny, tmp_path):
    with pytest.raises(LLMConfigError, match=r"no adapter_config\.json"):
        _client(tiny[0], adapter=str(tmp_path))
    with pytest.raises(LLMConfigError, match="cannot load"):
        _client(str(tmp_path / "missing"))


@pytest.mark.gpu
def test_generates_on_the_gpu_in_bf16(tiny):
    import torch

    if not torch.cuda.is_available():
        pytest.skip("no CUDA device visible")
    cfg = {"backend": "hf", "model": tiny[0], "adapter": tiny[1], "max_tokens": 12}
    client = build_client({**cfg, "device": "auto", "temperature": 1.0}, "reward_to_go")
    assert client.backend.device.type == "cuda"
    assert next(client.backend.model.parameters()).dtype == torch.bfloat16
    got = client.complete(MSGS, n=4, seed=1)
    assert len(got) == 4 and all(1 <= c.output_tokens <= 12 for c in got)
