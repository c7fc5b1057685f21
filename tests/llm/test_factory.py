import os
import random
import subprocess
import sys
import time

import httpx
import pytest

from maxcode.critique.llm_critic import LLMCritic
from maxcode.errors import LLMConfigError
from maxcode.llm.config import role_config_from_dict
from maxcode.llm.factory import create_backend
from maxcode.policy.llm_policy import LLMPolicy
from maxcode.roles import build_critic, build_policy
from maxcode.search.types import Observation

from .helpers import cpp_task, ok_result


def test_params_yaml_blocks_build_working_roles(fake_llm_server, api_keys, tmp_path):
    policy = build_policy(
        {"backend": "openai", "model": "qwen", "base_url": fake_llm_server.openai_base_url},
        language="cpp",
        cache_dir=tmp_path,
    )
    critic = build_critic(
        {
            "backend": "anthropic",
            "model": "claude-3-7-sonnet",
            "base_url": fake_llm_server.anthropic_base_url,
            "max_tokens": 4096,
            "thinking_budget": 2048,
            "temperature": 1.0,
        },
        cache_dir=tmp_path,
    )
    assert isinstance(policy, LLMPolicy) and isinstance(critic, LLMCritic)
    assert policy.client.cache is critic.client.cache  # one connection per file
    assert (tmp_path / "llm_responses.sqlite").is_file()
    [p] = policy.propose(
        Observation(cpp_task(), 0, 2, [], None, 0.0, False, "m"), 1, random.Random(0)
    )
    assert critic.critique(cpp_task(), p.source or "", ok_result()).text


def test_offline_backend_is_not_a_chat_model():
    with pytest.raises(LLMConfigError, match="not a chat model"):
        create_backend(role_config_from_dict("generator", {}))


def test_offline_roles_build_the_offline_programs():
    pytest.importorskip("maxcode.policy.offline_cpp")
    pytest.importorskip("maxcode.critique.offline")
    policy = build_policy({"backend": "offline"}, language="cpp")
    critic = build_critic(None, language="cpp")
    assert policy.offline and critic.offline
    assert type(policy).__name__ == "OfflineCppPolicy" and type(critic).__name__ == "OfflineCritic"


def test_offline_policy_for_unknown_language_is_a_clear_error():
    with pytest.raises(LLMConfigError, match="no offline policy for language 'rust'"):
        build_policy({"backend": "offline"}, language="rust")


def test_standalone_fake_server_entry_point(tmp_path):
    port = 20000 + os.getpid() % 20000
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "maxcode.llm.fake_servers", "--port", str(port)],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert f"http://127.0.0.1:{port}/v1" in proc.stdout.readline()
        body = {"model": "m", "max_tokens": 50, "messages": [{"role": "user", "content": "hi"}]}
        for _ in range(50):
            try:
                r = httpx.post(
                    f"http://127.0.0.1:{port}/v1/messages", json=body, headers={"x-api-key": "k"}
                )
                break
            except httpx.ConnectError:
                time.sleep(0.1)
        assert r.status_code == 200 and r.json()["usage"]["output_tokens"] > 0
    finally:
        proc.terminate()
        proc.wait(10)


def test_cli_cache_info_counts_per_model(tmp_path):
    from typer.testing import CliRunner

    from maxcode.llm.backend import Completion
    from maxcode.llm.cache import ResponseCache
    from maxcode.llm.cli import app

    cache = ResponseCache(tmp_path / "c.sqlite")
    for i in range(3):
        cache.put(f"k{i}", "openai:gen", Completion("x"))
    cache.put("k9", "anthropic:crit", Completion("y"))
    out = CliRunner().invoke(app, ["cache-info", str(tmp_path / "c.sqlite")])
    assert out.exit_code == 0, out.output
    assert "3  openai:gen" in out.output and "1  anthropic:crit" in out.output
    assert "4  total" in out.output
    missing = CliRunner().invoke(app, ["cache-info", str(tmp_path / "none.sqlite")])
    # typer's error panel wraps a long path's message across lines inside its box
    words = " ".join(missing.output.replace("│", " ").split())
    assert missing.exit_code != 0 and "no such cache file" in words, missing.output
    assert "none.sqlite" in "".join(words.split()), missing.output  # names the file
