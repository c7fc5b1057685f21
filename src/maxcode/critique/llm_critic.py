"""The LLM critic: the seeds' critique prompt over the attempt and its execution
feedback (extended thinking on the anthropic backend, as in the paper)."""

from __future__ import annotations

import re

from maxcode.evaluate.result import EvalResult
from maxcode.llm.client import LLMClient
from maxcode.policy.prompts import critique_prompt
from maxcode.search.types import Critique
from maxcode.tasks.model import Task

_THINK = re.compile(r"<think>.*?(?:</think>|\Z)", re.S | re.I)


class LLMCritic:
    """Critic protocol over any chat backend; one completion per critique."""

    offline = False

    def __init__(self, client: LLMClient):
        self.client = client
        self.name = client.identity

    def critique(self, task: Task, source: str, result: EvalResult) -> Critique:
        prompt = critique_prompt(task, source, result)
        [c] = self.client.complete(prompt.messages, n=1, seed=0)
        text = _THINK.sub("", c.text).strip()
        if not text:
            cut = ", cut at the token limit" if c.truncated else ""
            text = f"(the critic returned no text{cut}; no diagnosis for this attempt)"
        return Critique(
            text=text,
            critic=self.name,
            offline=False,
            usage=c.usage,
            prompt_version=prompt.version,
        )
