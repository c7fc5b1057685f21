"""The reward-to-go stages as functions of typed params: the one front door.

The Snakemake rules (``workflow/scripts/*_r2g.py``) and ``maxcode r2g ...`` both call
these, so a stage runs the same way by hand and under Snakemake.
"""

from __future__ import annotations

import json
from pathlib import Path

from maxcode.params import R2GParams
from maxcode.r2g.corpus_ranking import flat_metrics
from maxcode.r2g.dataset import build_dataset, read_dataset, write_dataset
from maxcode.r2g.reranker import load_reranker, train
from maxcode.records import atomic_write_json
from maxcode.tasks.model import read_tasks_jsonl


def dataset_stage(
    rollouts: list[Path], r2g: R2GParams, gamma: float, suite_dirs: list[Path], out_dir: Path
) -> dict:
    """Examples from executed candidates of the training methods, split by task."""
    cfg = r2g.dataset
    tasks = [t for d in suite_dirs for t in read_tasks_jsonl(Path(d) / "tasks.jsonl")]
    descriptions = (
        {f"{t.suite}/{t.task_id}": t.description for t in tasks} if cfg.with_descriptions else None
    )
    dataset = build_dataset(
        rollouts,
        gamma,
        cfg.test_fraction,
        cfg.seed,
        cfg.max_prompt_chars,
        descriptions,
        all_tasks={(t.suite, t.task_id) for t in tasks},  # the split PipelinePlan.held_out uses
    )
    write_dataset(dataset, out_dir)
    return dataset.card()


def train_stage(dataset_dir: Path, r2g: R2GParams, out_dir: Path) -> dict:
    """Train the model of kind ``r2g.kind``; writes the model, config.json and metrics.json."""
    return train(read_dataset(dataset_dir), r2g.model, out_dir)


def ranking_stage(
    model_dir: Path, dataset_dir: Path, r2g: R2GParams, out: Path, split: str = "test"
) -> dict:
    """Ranking metrics on a split, and which model produced them, for the rerank table."""
    from maxcode.r2g.evaluate import evaluate_reranker  # scipy: seconds to import; only here

    reranker = load_reranker(model_dir)
    metrics = evaluate_reranker(reranker, read_dataset(dataset_dir).split(split))
    report = {
        "model": {"kind": r2g.kind, "name": reranker.name},
        "metrics": flat_metrics(metrics["all"]),
        "detail": json.loads(json.dumps(metrics, default=str)),
    }
    atomic_write_json(out, report)
    return report


def corpus_ranking_stage(
    corpus: Path,
    r2g: R2GParams,
    gamma: float,
    out_dir: Path,
    table_dir: Path,
    samples: int,
    confidence: float,
    reference: Path | None = None,
    measurements: Path | None = None,
    kinds: tuple[str, ...] = ("encoder", "generative"),
    reuse_models: bool = False,
    held_out: list[str] | None = None,
) -> dict:
    """Both model kinds trained on the corpus's training problems, ranked on held-out ones.

    ``reuse_models``: a kind whose folder already holds a trained model is scored, not
    retrained (for a model trained by an earlier call on the same corpus and params).
    ``held_out``: the problems ("L2/12_Gemm.py") to hold out instead of the hash split (the
    pipeline's held-out tasks, so reranked replay runs only on problems the model never saw).

    Writes ``out_dir/dataset``, ``out_dir/<kind>/`` (each model), ``out_dir/ranking.json``
    (per-problem rows and summaries) and the table ``table_dir/r2g_corpus.*``.
    """
    from maxcode.r2g.base import MANIFEST, Candidate
    from maxcode.r2g.config import EncoderR2GConfig, GenerativeR2GConfig
    from maxcode.r2g.corpus import corpus_dataset
    from maxcode.r2g.corpus_ranking import breakdown, per_problem
    from maxcode.report.corpus_table import corpus_ranking_table
    from maxcode.runs.evaluate import read_measurements
    from maxcode.runs.pools import build_pools
    from maxcode.runs.record import read_corpus

    measured = read_measurements(measurements) if measurements else None
    pools = build_pools(read_corpus(corpus), measured)
    cfg = r2g.dataset
    dataset = corpus_dataset(
        pools, gamma, cfg.test_fraction, cfg.seed, cfg.max_prompt_chars, held_out
    )
    write_dataset(dataset, Path(out_dir) / "dataset")
    test_problems = {e.task_id for e in dataset.test}
    report: dict = {
        "dataset": dataset.card(),
        "pools": {
            "problems": len(pools),
            "held_out": len(test_problems),
            "label_sources": _count_by(pools, lambda p: p.label_source),
            "reward_kinds": _count_by(pools, lambda p: f"{p.label_source}: {p.reward_kind}"),
        },
        "kinds": {},
    }
    configs = {"encoder": r2g.encoder, "generative": r2g.generative}
    for kind in kinds:
        config: EncoderR2GConfig | GenerativeR2GConfig = configs[kind]
        model_dir = Path(out_dir) / kind
        if not (reuse_models and (model_dir / MANIFEST).is_file()):
            train(dataset, config, model_dir)
        reranker = load_reranker(model_dir)
        scores = reranker.score_candidates([Candidate.of(e) for e in dataset.test])
        rows = per_problem(dataset.test, scores)
        report["kinds"][kind] = {
            "model": reranker.name,
            "summary": breakdown(rows, samples, confidence),
            "problems": rows,
        }
    atomic_write_json(Path(out_dir) / "ranking.json", report)
    corpus_ranking_table(report, reference, samples, confidence).write(
        Path(table_dir), "r2g_corpus"
    )
    return report


def _count_by(items, key) -> dict[str, int]:
    counts: dict[str, int] = {}
    for item in items:
        counts[key(item)] = counts.get(key(item), 0) + 1
    return dict(sorted(counts.items()))
