"""Pytest fixtures: the fake OpenAI/Anthropic server on 127.0.0.1 in a thread, and
API keys in the environment whose values tests check never leak.

Use from any test package's conftest.py:
``from tests.fakes.llm_server import fake_llm_server, api_keys  # noqa: F401``
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from maxcode.llm.fake_servers import FakeLLMServer

OPENAI_SECRET = "sk-test-openai-4f9c2e71d0b8"
ANTHROPIC_SECRET = "sk-ant-test-8a1d37c5e92f"


@pytest.fixture
def fake_llm_server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as server:
        yield server


@pytest.fixture
def api_keys(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_SECRET)
    monkeypatch.setenv("ANTHROPIC_API_KEY", ANTHROPIC_SECRET)
    return {"OPENAI_API_KEY": OPENAI_SECRET, "ANTHROPIC_API_KEY": ANTHROPIC_SECRET}
