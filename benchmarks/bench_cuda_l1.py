"""CUDA-L1's H100 candidates through CudaEvaluator: what we make of each technique class.

Each candidate (``custom_code`` against its ``ref_code``, or ``--variant``) is classified
statically (public_candidates.py: CUDA graphs, stored output, TF32, cudnn.benchmark, custom kernel,
lower precision, torch.compile, torch rewrite), then evaluated. Prints, per primary class
and per technique, the candidates' count, our verdicts, the check ids that rejected them,
and our median speedup next to CUDA-L1's reported one. ``--dry-run`` prints only the
classes (no GPU). ``--set key=value`` overrides CudaEvalConfig fields; ``--json`` keeps every row.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from bench_real_cuda import parse_overrides
from public_candidates import (
    CUDA_L1_VARIANTS,
    PRIMARY_ORDER,
    CorpusError,
    first_line,
    load_cuda_l1,
    primary_class,
    techniques,
)
from result_json import add_json_argument, write_result

from maxcode.evaluate.cuda import CudaEvalConfig, CudaEvaluator
from maxcode.evaluate.cuda.checks import static_findings

CLASSES = (*PRIMARY_ORDER, "torch rewrite")


def per_class_table(rows: list[dict[str, Any]], key: str) -> dict[str, dict[str, Any]]:
    """Per class (``key``: 'class' or 'techniques'): count, verdicts, check ids, median speedups."""
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        names = row[key] if isinstance(row[key], list) else [row[key]]
        for name in names or ["torch rewrite"]:
            groups[name].append(row)
    table = {}
    for name in CLASSES:
        members = groups.get(name, [])
        if not members:
            continue
        ours = [r["speedup"] for r in members if r.get("speedup")]
        theirs = [r["score"] for r in members if r.get("speedup") and r["score"]]
        table[name] = {
            "n": len(members),
            "verdicts": dict(Counter(r.get("ours", "not run") for r in members)),
            "checks": dict(Counter(r["failed_check"] for r in members if r.get("failed_check"))),
            "our_median_speedup": round(statistics.median(ours), 3) if ours else None,
            "their_median_speedup": round(statistics.median(theirs), 3) if theirs else None,
        }
    return table


def print_table(title: str, table: dict[str, dict[str, Any]]) -> None:
    print(f"\n{title}")
    print(
        f"  {'class':18s} {'n':>4s}  {'ours / theirs (median speedup)':32s} verdicts; rejecting checks"
    )
    for name, t in table.items():
        ours = "n/a" if t["our_median_speedup"] is None else f"{t['our_median_speedup']:.2f}x"
        theirs = "n/a" if t["their_median_speedup"] is None else f"{t['their_median_speedup']:.2f}x"
        verdicts = ", ".join(f"{v} {n}" for v, n in sorted(t["verdicts"].items()))
        checks = ", ".join(f"{c} {n}" for c, n in sorted(t["checks"].items())) or "-"
        print(f"  {name:18s} {t['n']:4d}  {ours:>9s} / {theirs:<20s} {verdicts}; {checks}")


def main(argv: list[str] | None = None) -> int:
    kb = Path(os.environ.get("KB", ".kb"))
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--h100", type=Path, default=kb / "cuda-l1" / "optimized_cuda_code" / "h100.json"
    )
    parser.add_argument("--variant", choices=CUDA_L1_VARIANTS, default="custom_code")
    parser.add_argument("--levels", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument(
        "-n",
        type=int,
        default=0,
        help="evaluate at most N candidates, spread over the classes (0 = all)",
    )
    parser.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="CudaEvalConfig override"
    )
    parser.add_argument(
        "--work", type=Path, default=Path(tempfile.gettempdir()) / "maxcode-cuda-l1"
    )
    parser.add_argument(
        "--cache", type=Path, help="build cache to reuse (default: a fresh one under --work)"
    )
    parser.add_argument(
        "--with-kernel",
        action="store_true",
        help="only candidates that define a kernel of their own (pass the static no_custom_kernel check), so the dynamic checks decide them",
    )
    add_json_argument(parser, "cuda-l1")
    parser.add_argument("--dry-run", action="store_true", help="classify only; no GPU")
    args = parser.parse_args(argv)
    try:
        cands = load_cuda_l1(args.h100, args.variant, tuple(args.levels))
        config = CudaEvalConfig.from_dict(parse_overrides(args.set), origin="--set")
    except (CorpusError, ValueError, TypeError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if args.with_kernel:
        cands = [c for c in cands if defines_a_kernel(c.source)]
    if args.n:
        cands = spread(cands, args.n)
    rows: list[dict[str, Any]] = [
        {
            "candidate": c.key,
            "class": primary_class(c.source),
            "techniques": techniques(c.source),
            "score": c.score,
        }
        for c in cands
    ]
    print(f"{len(cands)} CUDA-L1 candidates ({args.variant}, levels {args.levels})")
    report: dict[str, Any] = {"argv": sys.argv, "variant": args.variant, "rows": rows}
    if not args.dry_run:
        args.work.mkdir(parents=True, exist_ok=True)
        cache = args.cache or Path(tempfile.mkdtemp(prefix="cache-", dir=args.work))
        t0 = time.monotonic()

        def on_result(index: int, result: Any) -> None:
            rows[index].update(
                ours=result.status.value,
                reason=first_line(result.reason),
                failed_check=result.figures.get("failed_check"),
                speedup=result.speedup,
                warnings=result.figures.get("warnings", []),
            )
            sp = (
                ""
                if result.speedup is None
                else f" {result.speedup:.2f}x (theirs {rows[index]['score']})"
            )
            print(
                f"  [{time.monotonic() - t0:6.1f} s] {rows[index]['candidate']:9s} {rows[index]['class']:16s} {result.status.value}{sp} {rows[index]['reason'][:100]}",
                flush=True,
            )

        with CudaEvaluator(config, cache) as ev:
            ev.evaluate_items([(c.task(), c.source) for c in cands], on_result=on_result)
        report["wall_s"] = round(time.monotonic() - t0, 1)
        report["config"] = config.to_dict()
    report["by_class"] = per_class_table(rows, "class")
    report["by_technique"] = per_class_table(rows, "techniques")
    print_table("per primary class (a candidate counts once):", report["by_class"])
    print_table(
        "per technique (a candidate counts under each technique it uses):", report["by_technique"]
    )
    if args.json or not args.dry_run:  # a dry run measures nothing: written only on request
        print("wrote", write_result("cuda-l1", report, None, args.json))
    return 0


def defines_a_kernel(source: str) -> bool:
    """Whether the static ``no_custom_kernel`` check lets the candidate through."""
    try:
        findings = static_findings(source, reference_is_fp32=True)
    except (SyntaxError, ValueError):
        return False
    return all(f.check_id != "no_custom_kernel" for f in findings)


def spread(cands: list, n: int) -> list:
    """At most ``n`` candidates, round-robin over primary classes, in level/task order within each."""
    by_class: dict[str, list] = defaultdict(list)
    for c in cands:
        by_class[primary_class(c.source)].append(c)
    picked: list = []
    while len(picked) < n and any(by_class.values()):
        for name in CLASSES:
            if by_class.get(name) and len(picked) < n:
                picked.append(by_class[name].pop(0))
    return sorted(picked, key=lambda c: (c.level, c.task_id))


if __name__ == "__main__":
    sys.exit(main())
