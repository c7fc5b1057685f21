"""The search loop's view of a reward-to-go model: what both model kinds implement.

Both model kinds score a list of :class:`Candidate` (observation text, code) and are
wrapped in the ``Reranker`` protocol of ``maxcode.search.types``: proposals without
code get a fallback score, flagged as such, and the loop never executes them anyway.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

from maxcode.r2g.dataset import DatasetParams, R2GExample
from maxcode.search.observation import observation_summary
from maxcode.search.types import Observation, Proposal, Score

MANIFEST = "r2g.json"
KINDS = ("generative", "encoder")


@dataclass(frozen=True)
class Candidate:
    """What a reward-to-go model sees of one proposal: the same fields at train and search time."""

    observation_text: str
    source: str
    description: str = ""

    @classmethod
    def of(cls, example: R2GExample) -> Candidate:
        return cls(example.observation_text, example.source, example.description)


class R2GReranker(ABC):
    """Scores candidates; ``score`` adapts the search loop's observation and proposals."""

    name: str
    params: DatasetParams  # how the training prompts were built
    fallback_value: float  # train-set mean return: the score when the model's output is unusable

    def score(self, obs: Observation, proposals: list[Proposal]) -> list[Score]:
        text = observation_summary(obs)
        description = obs.task.description if self.params.with_descriptions else ""
        with_code = [i for i, p in enumerate(proposals) if p.source is not None]
        scores = [Score(self.fallback_value, fallback=True) for _ in proposals]
        if with_code:
            cands = [Candidate(text, proposals[i].source or "", description) for i in with_code]
            for i, s in zip(with_code, self.score_candidates(cands), strict=True):
                scores[i] = s
        return scores

    @abstractmethod
    def score_candidates(self, candidates: list[Candidate]) -> list[Score]:
        """One score per candidate, in order; scored together as one batch where possible."""
