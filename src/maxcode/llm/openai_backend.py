"""Chat Completions through the real ``openai`` SDK; ``base_url`` reaches any
OpenAI-compatible server (vLLM, SGLang, llama.cpp). SDK retries are off: the client's
own retries are the only ones, so they are counted and testable."""

from __future__ import annotations

import json

import openai

from maxcode.llm.backend import (
    ChatBackend,
    Completion,
    RetryableError,
    SamplingParams,
    parse_retry_after,
    transient_status,
)
from maxcode.llm.config import RoleConfig


class OpenAIBackend(ChatBackend):
    name = "openai"

    def __init__(self, cfg: RoleConfig):
        super().__init__(cfg)
        self._client = openai.OpenAI(
            api_key=cfg.api_key(), base_url=cfg.base_url, max_retries=0, timeout=cfg.timeout_s
        )

    def generate(
        self, messages: list[dict], params: SamplingParams, sample_indices: list[int]
    ) -> list[Completion]:
        return [self._one(messages, params, i) for i in sample_indices]

    def _one(self, messages: list[dict], params: SamplingParams, index: int) -> Completion:
        resp = self._client.chat.completions.create(
            model=self.cfg.model,
            messages=messages,
            max_tokens=params.max_tokens,
            temperature=params.temperature,
            top_p=params.top_p,
            seed=(params.seed + index) % 2**31,
            n=1,
        )
        if not resp.choices:
            raise RetryableError("the server answered without choices")
        choice = resp.choices[0]
        message = choice.message
        reasoning = (message.model_extra or {}).get("reasoning_content") or ""
        usage = resp.usage
        details = getattr(usage, "prompt_tokens_details", None) if usage else None
        return Completion(
            text=message.content or "",
            thinking=reasoning,
            finish_reason=choice.finish_reason or "",
            input_tokens=usage.prompt_tokens if usage else 0,
            output_tokens=usage.completion_tokens if usage else 0,
            cached_input_tokens=(getattr(details, "cached_tokens", None) or 0) if details else 0,
            meta={"response_model": resp.model, **({} if usage else {"usage_missing": True})},
        )

    def retry_after(self, exc: BaseException) -> float | None:
        if isinstance(exc, openai.APIStatusError):
            return (
                parse_retry_after(exc.response.headers)
                if transient_status(exc.status_code)
                else None
            )
        if isinstance(exc, openai.APIConnectionError | openai.APIResponseValidationError):
            return 0.0  # timeouts, dropped connections, a garbled body: transient
        if isinstance(exc, json.JSONDecodeError):
            return 0.0
        return super().retry_after(exc)

    def close(self) -> None:
        self._client.close()
