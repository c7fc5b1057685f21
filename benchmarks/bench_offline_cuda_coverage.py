"""Which KernelBench problems the offline CUDA policy supports, CPU-side (no GPU needed).

For every problem file of the chosen levels of a KernelBench checkout: capture, both
lowerings (all-template and partial: library calls + fused kernels), rendering of each
variant's default candidate. Prints the supported share per level and per problem
family (the heaviest op kind in the reference: conv, gemm, normalization, pooling,
reduction, elementwise, loss/other), and each unsupported problem with its op-level
reason, and which problems offer the search a fusion-boundary choice or the 3xTF32
tensor-core GEMM; --markdown writes both tables for docs/offline-cuda-policy.md, --json every row,
--sources DIR each supported problem's first candidate (for nvcc or a GPU run).

    python benchmarks/bench_offline_cuda_coverage.py [--kb $KB/KernelBench] [--levels 1 2]
        [--json coverage.json] [--markdown coverage.md] [--sources DIR]

The default checkout is $KB/KernelBench (KB defaults to .kb); problems are read, never
copied into the repository.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from collections import Counter, defaultdict
from pathlib import Path

from result_json import add_json_argument, headline, write_result

from maxcode.policy.offline_cuda import space
from maxcode.policy.offline_cuda.lowering import export_graph
from maxcode.policy.offline_cuda.policy import analyze_source
from maxcode.policy.offline_cuda.render import render

_FAMILY_OPS = (  # first match wins: the heaviest op decides a problem's family
    ("conv", ("conv",)),
    ("gemm", ("matmul", "mm", "bmm", "linear", "addmm", "einsum", "baddbmm")),
    ("normalization", ("batch_norm", "group_norm", "instance_norm", "layer_norm")),
    ("pooling", ("pool",)),
    ("loss", ("loss", "cross_entropy", "kl_div")),
    (
        "reduction",
        (
            "sum",
            "mean",
            "amax",
            "amin",
            "max",
            "min",
            "logsumexp",
            "softmax",
            "cumsum",
            "cumprod",
            "argmax",
            "argmin",
            "norm",
            "prod",
        ),
    ),
)


def problem_family(source: str, where: str) -> str:
    """The problem's family from the aten ops of its forward (from the file name where the
    partial lowering refuses the graph, "other" where neither says)."""
    try:
        origins = " ".join(n.origin for n in export_graph(source, where).ops())
        fallback = "elementwise"
    except Exception:  # capture errors are reported by the analysis itself
        origins = Path(where).stem.lower().replace("gemm", "matmul").replace("norm", "_norm")
        fallback = "other"
    for family, needles in _FAMILY_OPS:
        if any(needle in origins for needle in needles):
            return family
    return fallback


def _number(path: Path) -> int:
    head = path.name.split("_", 1)[0]
    return int(head) if head.isdigit() else 10**9


def survey(kb: Path, levels: list[int], sources: Path | None) -> list[dict]:
    rows = []
    for level in levels:
        folder = kb / f"level{level}"
        if not folder.is_dir():
            raise SystemExit(
                f"--kb {kb}: no level{level}/ folder; point --kb at a KernelBench checkout"
            )
        for path in sorted(folder.glob("*.py"), key=_number):
            source = path.read_text()
            start = time.perf_counter()
            analysis = analyze_source(source, path.name)
            row = {
                "level": level,
                "problem": path.name,
                "family": problem_family(source, path.name),
                "supported": analysis.plan is not None,
                "variants": [p.describe() for p in analysis.variants],
                "reason": analysis.reason,
                # the search decisions this problem offers beyond template parameters
                "fusion_boundaries": sorted(
                    {b for plan in analysis.variants for b in plan.boundaries}
                ),
                "tensor_core_gemm": any(
                    "tf32x3" in space.default(s) for plan in analysis.variants for s in plan.stages
                ),
            }
            if analysis.plan is not None:
                try:
                    for vi, plan in enumerate(analysis.variants):
                        rendered = render(
                            plan, [space.default(s) for s in plan.stages], "offline-cuda/1"
                        )
                        if sources is not None:
                            out = sources / f"level{level}" / f"{path.stem}.v{vi}.py"
                            out.parent.mkdir(parents=True, exist_ok=True)
                            out.write_text(rendered.source)
                except Exception as err:  # a render failure is a defect: report it, keep going
                    row.update(
                        supported=False, reason=f"render failed: {type(err).__name__}: {err}"
                    )
            row["seconds"] = round(time.perf_counter() - start, 2)
            rows.append(row)
            print(
                f"L{level} {path.name:70s} {'yes' if row['supported'] else 'no ':3s} "
                f"{row['family']:13s} {'; '.join(row['variants']) or row['reason'][:90]}",
                flush=True,
            )
    return rows


def tables(rows: list[dict]) -> str:
    """Markdown: share per level and family, then every unsupported problem with its reason."""
    lines = ["| level | family | supported | share |", "|---|---|---|---|"]
    for level in sorted({r["level"] for r in rows}):
        mine = [r for r in rows if r["level"] == level]
        by_family: dict[str, list[dict]] = defaultdict(list)
        for r in mine:
            by_family[r["family"]].append(r)
        for family in sorted(by_family):
            group = by_family[family]
            ok = sum(r["supported"] for r in group)
            lines.append(f"| {level} | {family} | {ok}/{len(group)} | {ok / len(group):.0%} |")
        ok = sum(r["supported"] for r in mine)
        lines.append(f"| {level} | **all** | **{ok}/{len(mine)}** | **{ok / len(mine):.0%}** |")
    lines += ["", "| level | problem | family | reason |", "|---|---|---|---|"]
    for r in rows:
        if not r["supported"]:
            reason = (
                r["reason"].replace("unsupported by the offline policy: ", "").replace("|", "\\|")
            )
            lines.append(f"| {r['level']} | {r['problem']} | {r['family']} | {reason} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--kb", type=Path, default=Path(os.environ.get("KB", ".kb")) / "KernelBench"
    )
    parser.add_argument("--levels", type=int, nargs="+", default=[1, 2])
    add_json_argument(parser, "offline-cuda-coverage")
    parser.add_argument("--markdown", type=Path, help="write the coverage tables here")
    parser.add_argument(
        "--sources", type=Path, help="write each supported problem's first candidate here"
    )
    args = parser.parse_args(argv)
    if not args.kb.is_dir():
        print(
            f"--kb {args.kb}: not a folder; give a KernelBench checkout (level1/, level2/ ...)",
            file=sys.stderr,
        )
        return 2
    warnings.filterwarnings("ignore")
    rows = survey(args.kb, args.levels, args.sources)
    headlines = []
    for level in sorted({r["level"] for r in rows}):
        mine = [r for r in rows if r["level"] == level]
        ok = sum(r["supported"] for r in mine)
        fams = Counter(r["family"] for r in mine if r["supported"])
        fusion = sum(bool(r["supported"] and r["fusion_boundaries"]) for r in mine)
        tensor_cores = sum(bool(r["supported"] and r["tensor_core_gemm"]) for r in mine)
        print(
            f"level {level}: {ok}/{len(mine)} supported ({ok / len(mine):.0%}); by family {dict(fams)}; "
            f"with a fusion-boundary choice {fusion}, with the 3xTF32 GEMM choice {tensor_cores}"
        )
        headlines += [
            headline(f"KernelBench level {level} problems supported", f"{ok}/{len(mine)}"),
            headline(f"level {level} problems with a fusion-boundary choice", f"{fusion}/{ok}"),
            headline(f"level {level} problems with the 3xTF32 GEMM choice", f"{tensor_cores}/{ok}"),
        ]
    print("wrote", write_result("offline-cuda-coverage", rows, headlines, args.json))
    if args.markdown:
        args.markdown.write_text(tables(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
