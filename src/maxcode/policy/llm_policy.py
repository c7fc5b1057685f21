"""The LLM generator as a search policy: render the observation with the versioned
generator prompt, sample k completions, extract one candidate from each."""

from __future__ import annotations

import random

from maxcode.llm.client import LLMClient
from maxcode.llm.extract import extract_code
from maxcode.policy.prompts import generator_prompt
from maxcode.search.types import Observation, Proposal

_EXCERPT_CHARS = 2000


class LLMPolicy:
    """Policy protocol over any chat backend; proposal i is sample index i of the request."""

    offline = False

    def __init__(self, client: LLMClient):
        self.client = client
        self.name = client.identity

    def propose(self, obs: Observation, k: int, rng: random.Random) -> list[Proposal]:
        """k proposals; one without usable code is a ``no_code`` proposal, not an error.

        The sampling seed is drawn from ``rng`` (the loop's seeded generator), so a
        rerun with the same seed asks for the same cache keys and replays exactly.
        """
        if k < 1:
            raise ValueError(f"{self.name}: k must be >= 1, got {k}")
        prompt = generator_prompt(obs)
        seed = rng.getrandbits(31)
        proposals = []
        for i, c in enumerate(self.client.complete(prompt.messages, n=k, seed=seed)):
            found = extract_code(c.text, obs.task.language, truncated=c.truncated)
            meta = {
                "sample_index": i,
                "seed": seed,
                "finish_reason": c.finish_reason,
                "extraction": found.reason,
            }
            if found.source is None:
                meta["completion_excerpt"] = c.text[:_EXCERPT_CHARS]
                proposals.append(
                    Proposal(
                        source=None,
                        reason=found.reason,
                        status_hint="no_code",
                        meta=meta,
                        usage=c.usage,
                        prompt_version=prompt.version,
                    )
                )
            else:
                proposals.append(
                    Proposal(
                        source=found.source, meta=meta, usage=c.usage, prompt_version=prompt.version
                    )
                )
        return proposals
