"""The two entry points the pipeline calls: train a reward-to-go model, load a trained one.

The model kinds (``encoder``, ``generative``) import torch or sentence-transformers, so
each is imported only when its kind is trained or loaded; both build on ``r2g.base``.
"""

from __future__ import annotations

import json
from pathlib import Path

from maxcode.r2g.base import KINDS, MANIFEST, R2GReranker
from maxcode.r2g.config import EncoderR2GConfig, GenerativeR2GConfig, R2GConfig
from maxcode.r2g.dataset import R2GDataset


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
