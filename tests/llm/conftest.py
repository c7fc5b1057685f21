from tests.fakes.llm_server import api_keys, fake_llm_server  # noqa: F401
