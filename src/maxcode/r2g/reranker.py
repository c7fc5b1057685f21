"""The search loop's view of a reward-to-go model, and the two entry points the pipeline calls.

Both model kinds score a list of :class:`Candidate` (observation text, code) and are
wrapped in the ``Reranker`` protocol of ``maxcode.search.types``: proposals without
code get a fallback score, flagged as such, and the loop never executes them anyway.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path

from maxcode.r2g.config import EncoderR2GConfig, GenerativeR2GConfig, R2GConfig
from maxcode.r2g.dataset import DatasetParams, R2GDataset, R2GExample
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
        from maxcode.search.observation import observation_summary

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


def train(dataset: R2GDataset, config: R2GConfig, out_dir: Path) -> dict:
    """Train the model kind that ``config`` names; writes model, config.json, metrics.json."""
    if not dataset.train:
        raise ValueError("the r2g train split is empty; the rollouts hold too few tasks")
    if isinstance(config, GenerativeR2GConfig):
        from maxcode.r2g.generative import train_generative

        return train_generative(dataset, config, Path(out_dir))
    if isinstance(config, EncoderR2GConfig):
        from maxcode.r2g.encoder import train_encoder

        return train_encoder(dataset, config, Path(out_dir))
    raise TypeError(f"unknown r2g config type {type(config).__name__}")


def load_reranker(model_dir: Path) -> R2GReranker:
    """The reranker saved by :func:`train` in ``model_dir`` (kind read from its manifest)."""
    model_dir = Path(model_dir)
    manifest_path = model_dir / MANIFEST
    if not manifest_path.is_file():
        raise FileNotFoundError(
            f"{manifest_path}: not a trained reward-to-go model; run the r2g training stage first"
        )
    manifest = json.loads(manifest_path.read_text())
    kind = manifest.get("kind")
    if kind == "generative":
        from maxcode.r2g.generative import GenerativeReranker

        return GenerativeReranker.load(model_dir, manifest)
    if kind == "encoder":
        from maxcode.r2g.encoder import EncoderReranker

        return EncoderReranker.load(model_dir, manifest)
    raise ValueError(f"{manifest_path}: unknown kind {kind!r}; expected one of {list(KINDS)}")
