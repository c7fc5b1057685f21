"""The Messages API through the real ``anthropic`` SDK, with extended thinking for the
critic (the paper's Claude-3.7-Sonnet critique model). SDK retries are off: the
client's own retries are the only ones."""

from __future__ import annotations

import json

import anthropic

from maxcode.llm.backend import (
    ChatBackend,
    Completion,
    SamplingParams,
    parse_retry_after,
    split_system,
    transient_status,
)
from maxcode.llm.config import RoleConfig


class AnthropicBackend(ChatBackend):
    name = "anthropic"

    def __init__(self, cfg: RoleConfig):
        super().__init__(cfg)
        self._client = anthropic.Anthropic(
            api_key=cfg.api_key(), base_url=cfg.base_url, max_retries=0, timeout=cfg.timeout_s
        )

    def generate(
        self, messages: list[dict], params: SamplingParams, sample_indices: list[int]
    ) -> list[Completion]:
        return [self._one(messages, params) for _ in sample_indices]

    def _one(self, messages: list[dict], params: SamplingParams) -> Completion:
        system, turns = split_system(messages)
        kwargs: dict = {"model": self.cfg.model, "max_tokens": params.max_tokens, "messages": turns}
        if system:
            kwargs["system"] = system
        if params.thinking_budget:
            kwargs["thinking"] = {"type": "enabled", "budget_tokens": params.thinking_budget}
        # SDK 1.x dropped the sampling arguments from its signature; the API still takes
        # them for the models that support them (newer ones accept only the default), so
        # they go in the body, and only when they differ from the API defaults.
        sampling = {}
        if params.temperature != 1.0:
            sampling["temperature"] = params.temperature
        if params.top_p < 1.0:
            sampling["top_p"] = params.top_p
        if sampling:
            kwargs["extra_body"] = sampling
        resp = self._client.messages.create(**kwargs)
        text = "".join(b.text for b in resp.content if b.type == "text")
        thinking = "".join(b.thinking for b in resp.content if b.type == "thinking")
        cache_read = getattr(resp.usage, "cache_read_input_tokens", None) or 0
        return Completion(
            text=text,
            thinking=thinking,
            finish_reason=resp.stop_reason or "",
            input_tokens=resp.usage.input_tokens + cache_read,  # all prompt tokens, as openai
            cached_input_tokens=cache_read,
            output_tokens=resp.usage.output_tokens,
            meta={"response_model": resp.model},
        )

    def retry_after(self, exc: BaseException) -> float | None:
        if isinstance(exc, anthropic.APIStatusError):
            return (
                parse_retry_after(exc.response.headers)
                if transient_status(exc.status_code)
                else None
            )
        if isinstance(exc, anthropic.APIConnectionError | anthropic.APIResponseValidationError):
            return 0.0
        if isinstance(exc, json.JSONDecodeError):
            return 0.0
        return super().retry_after(exc)

    def close(self) -> None:
        self._client.close()
