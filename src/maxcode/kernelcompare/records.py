"""KernelCompare pairs as chat JSONL (the report's format) and a dataset card.

Each line: ``messages`` (system, user with the slow kernel, assistant with the fast
one) plus the metadata a reader needs to audit it: suite, benchmark, source file,
techniques, origin, measured checks and a content hash.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from maxcode.kernelcompare.extract import DROP_REASONS, Extraction, Pair, deduplicate
from maxcode.kernelcompare.techniques import TECHNIQUES
from maxcode.records import atomic_write_json, atomic_write_text, code_version

RECORD_VERSION = 1


def chat_record(pair: Pair, system_prompt: str) -> dict:
    user = (
        f"Optimize this CUDA kernel from the {pair.benchmark} benchmark ({pair.source_file}):\n\n"
        f"**Description**: {pair.description}\n\n"
        f"**Current Kernel (Unoptimized)**:\n\n```cuda\n{pair.slow_code}```\n"
    )
    assistant = (
        "Here's the optimized CUDA kernel with improved performance:\n\n"
        f"```cuda\n{pair.fast_code}```\n"
    )
    return {
        "messages": [
            {"role": "system", "content": system_prompt},
            {"role": "user", "content": user},
            {"role": "assistant", "content": assistant},
        ],
        "suite": pair.suite,
        "benchmark": pair.benchmark,
        "source_file": pair.source_file,
        "naive_file": pair.naive_file,
        "description": pair.description,
        "techniques": pair.techniques,
        "origin": pair.origin,
        "changes": pair.changes,
        "checks": pair.checks,
        "content_hash": pair.content_hash,
        "record_version": RECORD_VERSION,
    }


def card_stats(extractions: list[Extraction]) -> dict:
    """Counts per suite (raw, kept, each drop reason), per benchmark and per technique."""
    suites = {}
    for ex in extractions:
        suites[ex.suite] = {
            "root": ex.root,
            "raw": ex.raw,
            "kept": len(ex.pairs),
            "dropped": dict(sorted(Counter(d.reason for d in ex.drops).items())),
            "per_benchmark": ex.per_benchmark(),
        }
    techniques = Counter(t for ex in extractions for p in ex.pairs for t in p.techniques)
    return {
        "suites": suites,
        "total_pairs": sum(len(ex.pairs) for ex in extractions),
        "techniques": {t: techniques.get(t, 0) for t in TECHNIQUES},
        "drops": [
            {
                "suite": d.suite,
                "benchmark": d.benchmark,
                "file": d.file,
                "reason": d.reason,
                "detail": d.detail,
            }
            for ex in extractions
            for d in ex.drops
        ],
        "code_version": code_version(),
    }


def render_card(stats: dict) -> str:
    lines = [
        "# KernelCompare dataset card",
        "",
        f"{stats['total_pairs']} slow/fast CUDA kernel pairs in chat JSONL "
        "(system, user with the slow kernel, assistant with the fast kernel).",
        "Techniques are detected from each kernel's parse tree; a pair lists those that differ.",
        "",
        "## Per suite",
        "",
        "| suite | raw | kept | dropped (reason: count) |",
        "|---|---:|---:|---|",
    ]
    for suite, row in stats["suites"].items():
        dropped = ", ".join(f"{k}: {v}" for k, v in row["dropped"].items()) or "none"
        lines.append(f"| {suite} | {row['raw']} | {row['kept']} | {dropped} |")
    lines += ["", "## Per technique", "", "| technique | pairs |", "|---|---:|"]
    lines += [f"| {t} | {n} |" for t, n in stats["techniques"].items()]
    for suite, row in stats["suites"].items():
        lines += [
            "",
            f"## {suite} per benchmark",
            "",
            "| benchmark | kept | dropped |",
            "|---|---:|---|",
        ]
        for bench, counts in row["per_benchmark"].items():
            dropped = ", ".join(f"{k}: {v}" for k, v in counts.items() if k != "kept") or "-"
            lines.append(f"| {bench} | {counts['kept']} | {dropped} |")
    lines += ["", "## Drop reasons", ""]
    lines += [f"- `{k}`: {v}" for k, v in DROP_REASONS.items()]
    lines += ["", f"Produced by maxcode {stats['code_version']}.", ""]
    return "\n".join(lines)


def write_dataset(
    extractions: list[Extraction], out: Path, system_prompt: str, card: Path | None = None
) -> dict:
    """Deduplicate, then publish the JSONL, ``<out>.stats.json`` and the card atomically."""
    out = Path(out)
    pairs = deduplicate(extractions)
    text = "".join(json.dumps(chat_record(p, system_prompt), sort_keys=True) + "\n" for p in pairs)
    atomic_write_text(out, text)
    stats = card_stats(extractions)
    atomic_write_json(out.with_suffix(".stats.json"), stats)
    atomic_write_text(card or out.with_suffix(".card.md"), render_card(stats))
    return stats


def read_dataset(path: Path) -> list[dict]:
    """Records of a pairs file; a malformed line is an error naming file and line."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"{path}: pairs file not found; run `maxcode kernelcompare extract`"
        )
    records = []
    for lineno, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            raise ValueError(f"{path}:{lineno}: not JSON ({err})") from err
        roles = [m.get("role") for m in record.get("messages", [])]
        if roles != ["system", "user", "assistant"]:
            raise ValueError(
                f"{path}:{lineno}: messages must be system, user, assistant; got {roles}"
            )
        records.append(record)
    return records
