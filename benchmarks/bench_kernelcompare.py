"""KernelCompare benchmarks; every figure is measured in the run that prints it.

``extract``: the parse-tree extraction against the report's approach (regular
expressions plus brace counting) on the same files in the same run: time per file,
the speed ratio, and how often the two disagree on the kernels a file defines.

``train``: SFT then single-turn GRPO on a model built from a config (``--preset``),
reporting tokens per second and peak GPU memory; run it on the GPU machine.

    python benchmarks/bench_kernelcompare.py extract --tree PARBOIL_OR_RODINIA_ROOT ...
    python benchmarks/bench_kernelcompare.py train --pairs pairs.jsonl --out results/bench_kc
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import tempfile
import time
from pathlib import Path

from result_json import add_json_argument, write_result

# The report's cleaning step, reimplemented as the baseline: find a qualifier, then the
# function head, then count braces (ignores comments, strings and the preprocessor).
_HEAD = re.compile(r"__global__[^;{]*?(\w+)\s*\([^;{]*\)\s*\{", re.S)

PRESETS = {
    # DeepSeek-R1-Distill-Qwen-1.5B's shape (the report's base model) with random weights.
    "qwen1.5b": {
        "hidden_size": 1536,
        "intermediate_size": 8960,
        "num_hidden_layers": 28,
        "num_attention_heads": 12,
        "num_key_value_heads": 2,
        "max_position_embeddings": 8192,
    },
    "tiny": {
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "max_position_embeddings": 8192,
    },
}


def regex_kernels(text: str) -> tuple[list[str], str]:
    names, parts = [], []
    for match in _HEAD.finditer(text):
        depth, end = 0, match.end() - 1
        for end in range(match.end() - 1, len(text)):
            depth += {"{": 1, "}": -1}.get(text[end], 0)
            if depth == 0:
                break
        names.append(match.group(1))
        parts.append(text[match.start() : end + 1])
    return names, "\n\n".join(parts)


def bench_extract(trees: list[Path], repeats: int) -> dict:
    from maxcode.kernelcompare.cudaparse import isolate

    files = [
        p for tree in trees for p in sorted(Path(tree).rglob("*")) if p.suffix in (".cu", ".cuh")
    ]
    if not files:
        raise SystemExit(f"no .cu/.cuh files under {[str(t) for t in trees]}")
    texts = [p.read_text(errors="replace") for p in files]
    parser_s, regex_s = [], []
    for _ in range(repeats):
        start = time.perf_counter()
        parsed = [isolate(t) for t in texts]
        parser_s.append(time.perf_counter() - start)
        start = time.perf_counter()
        regexed = [regex_kernels(t) for t in texts]
        regex_s.append(time.perf_counter() - start)
    disagree = [
        str(path)
        for path, p, (names, _) in zip(files, parsed, regexed, strict=True)
        if sorted(p.kernel_names) != sorted(names)
    ]
    parser, regex = statistics.median(parser_s), statistics.median(regex_s)
    return {
        "files": len(files),
        "repeats": repeats,
        "parser_ms_per_file": 1e3 * parser / len(files),
        "regex_ms_per_file": 1e3 * regex / len(files),
        "parser_over_regex_time": parser / regex,
        "kernels_parser": sum(len(p.kernel_names) for p in parsed),
        "kernels_regex": sum(len(n) for n, _ in regexed),
        "files_disagreeing": len(disagree),
        "disagreeing_examples": disagree[:10],
    }


def bench_train(args: argparse.Namespace) -> dict:
    import torch

    from maxcode.evaluate.cpp import CppEvalConfig, CppEvaluator
    from maxcode.kernelcompare.grpo import KernelCompareGRPOConfig, run_grpo
    from maxcode.kernelcompare.models import ModelSpec
    from maxcode.kernelcompare.sft import KernelCompareSFTConfig, run_sft
    from maxcode.tasks.builtin import materialize_builtin_cpp

    gpu = torch.cuda.is_available()
    spec = ModelSpec(from_config=PRESETS[args.preset], tokenizer_vocab_size=args.vocab)
    out = Path(args.out)
    common = {"use_cpu": not gpu, "bf16": gpu, "disable_tqdm": True}
    sft_cfg = KernelCompareSFTConfig(
        output_dir=str(out / "sft"), num_train_epochs=args.epochs, **common
    )  # the report's recipe otherwise: LoRA 32/64/0.1, lr 2e-4, batch 4, seq 4096, 100 warm-up
    sft = run_sft(Path(args.pairs), spec, sft_cfg, out / "sft")
    with tempfile.TemporaryDirectory() as tmp:
        tasks = materialize_builtin_cpp(
            Path(tmp) / "suite", n_tests=2, seed=0, problems=args.problems
        )
        evaluator = CppEvaluator(CppEvalConfig(repeats=1), Path(tmp) / "evcache")
        grpo_cfg = KernelCompareGRPOConfig(
            output_dir=str(out / "grpo"),
            max_steps=args.grpo_steps,
            per_device_train_batch_size=args.generations,
            num_generations=args.generations,
            max_completion_length=args.completion_tokens,
            **common,
        )
        grpo = run_grpo(tasks, evaluator, spec, grpo_cfg, out / "grpo", out / "sft")
    keep = ("steps", "train_seconds", "peak_memory_bytes", "peak_rss_bytes", "device")
    return {
        "preset": args.preset,
        "parameters": sft["total_parameters"],
        "trainable_parameters": sft["trainable_parameters"],
        "gpu": torch.cuda.get_device_name(0) if gpu else None,
        "sft": {
            k: sft[k] for k in (*keep, "pairs", "tokens_per_second", "first_loss", "last_loss")
        },
        "grpo": {
            k: grpo[k]
            for k in (
                *keep,
                "tasks",
                "completion_tokens",
                "completion_tokens_per_second",
                "rewards",
            )
        },
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="mode", required=True)
    ex = sub.add_parser("extract")
    ex.add_argument("--tree", type=Path, action="append", required=True, help="source tree root")
    ex.add_argument("--repeats", type=int, default=5)
    add_json_argument(ex, "kernelcompare-extract")
    tr = sub.add_parser("train")
    tr.add_argument("--pairs", type=Path, required=True)
    tr.add_argument("--out", type=Path, required=True, help="folder for the trained adapters")
    add_json_argument(tr, "kernelcompare-train")
    tr.add_argument("--preset", choices=sorted(PRESETS), default="qwen1.5b")
    tr.add_argument("--vocab", type=int, default=4096, help="BPE vocabulary of the built model")
    tr.add_argument("--epochs", type=float, default=8.0)
    tr.add_argument("--grpo-steps", type=int, default=3)
    tr.add_argument("--generations", type=int, default=4)
    tr.add_argument("--completion-tokens", type=int, default=256)
    tr.add_argument("--problems", nargs="+", default=["algo_strlen_loop", "mem_column_sum"])
    args = parser.parse_args(argv)
    figures = (
        bench_extract(args.tree, args.repeats) if args.mode == "extract" else bench_train(args)
    )
    print(json.dumps(figures, indent=2))
    print("wrote", write_result(f"kernelcompare-{args.mode}", figures, None, args.json))


if __name__ == "__main__":
    main()
