"""Which ``.cu`` header tier real LLM-written candidates reach, and what each attempt costs.

For every ``load_inline`` call of the real one-shot generations under
``$KB/runs/*/level_*_kernel.py`` (its arguments read from the file's syntax tree, the
candidate's code is never run here), the build cache's tiers (``BuildCache._cuda_tiers``:
"cuda only", "ATen ops", "torch/types.h", "as written") are tried in order with nvcc's front
end only (``nvcc --cuda``: preprocessor and cudafe++, which parses and checks host and device
code, the step where a missing declaration fails), confined as the evaluator's compilers are.
The first tier accepted is the tier a build would reach (cicc can still reject a device-only
construct later; a build of every candidate is ``bench_cuda_compile.py``'s job, too slow for
hundreds of them on a small machine). Printed: the share per tier, the median front-end
seconds of each tier, and the most common first errors of the tiers that failed.

    python benchmarks/bench_cuda_header_tiers.py --limit 40 --jobs 2 --arch 9.0 --out tiers.json

The summary also counts the calls whose host functions the build first moves into the host
binding (``maxcode.evaluate.cuda.host_split``, read statically) and why the others are not.
``--split-check`` instead builds that split alone for each call (kernels without torch, host
functions in the binding with the PCH, linked; no fallback) and prints which calls take that
path and the first error of the others.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import csv
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from public_candidates import kernel_files, round_robin
from result_json import add_json_argument, write_result

from maxcode.evaluate.cuda.build import (
    HOST_ONLY_TIER,
    HOST_SPLIT_TIER,
    NVCC_TIME_DIR_VAR,
    BuildCache,
    BuildOutcome,
    ExtensionSpec,
    _flags_block_split,
    _needs_more_headers,
    _run_parallel,
    hide_host_code_from_device_pass,
    tiers_after_failure,
    torch_flags,
    trim_log,
)
from maxcode.evaluate.cuda.host_split import HostSplit, split_host_functions
from maxcode.evaluate.sandbox import confinement

HEADER_TAG = re.compile(r"4cuda3std|6thrust|3cub")  # mangled cuda::std, thrust, cub
_SPEC_ARGS = (
    "name", "cpp_sources", "cuda_sources", "functions", "extra_cflags", "extra_cuda_cflags",
    "extra_ldflags", "extra_include_paths", "no_implicit_headers",
)  # fmt: skip


def _value(node: ast.AST, names: dict[str, object]) -> object:
    """A string, list of strings or name bound to one at module level; else ValueError."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str | bool):
        return node.value
    if isinstance(node, ast.Name) and node.id in names:
        return names[node.id]
    if isinstance(node, ast.List):
        return [_value(e, names) for e in node.elts]
    if isinstance(node, ast.Dict):
        return {
            _value(k, names): _value(v, names) for k, v in zip(node.keys, node.values, strict=True)
        }  # type: ignore[arg-type]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _value(node.left, names), _value(node.right, names)
        if isinstance(left, str) and isinstance(right, str):
            return left + right
    raise ValueError(f"not a literal: {ast.unparse(node)[:60]}")


def specs_in(source: str) -> list[ExtensionSpec]:
    """The ``load_inline`` calls of a candidate whose arguments are literals or module-level
    names bound to them (every real candidate here; others raise ValueError)."""
    tree = ast.parse(source)
    names: dict[str, object] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name):
                with contextlib.suppress(ValueError):
                    names[target.id] = _value(node.value, names)
    specs = []
    for node in ast.walk(tree):
        func = getattr(node, "func", None)
        if (
            isinstance(node, ast.Call)
            and getattr(func, "id", getattr(func, "attr", "")) == "load_inline"
        ):
            kwargs = {k.arg: _value(k.value, names) for k in node.keywords if k.arg in _SPEC_ARGS}
            specs.append(ExtensionSpec.from_load_inline(**kwargs))  # type: ignore[arg-type]
    return specs


def _split_reason(split: HostSplit | str) -> str:
    return "" if isinstance(split, HostSplit) else split


def candidates(kb: Path, limit: int) -> list[tuple[str, ExtensionSpec]]:
    """(label, spec) for the first ``limit`` load_inline calls, the runs interleaved."""
    per_run = []
    for files in kernel_files(kb / "runs"):
        found = []
        for f in files:
            try:
                found += [(f.key, s) for s in specs_in(f.source)]
            except (SyntaxError, ValueError) as err:
                print(f"skipped {f.path}: {err}", file=sys.stderr)
        per_run.append([f for f in found if f[1].with_cuda])
    out = round_robin(per_run, limit)
    if not out:
        sys.exit(f"no load_inline candidates under {kb / 'runs'}; set --kb (or $KB)")
    return out


def reach(cache: BuildCache, spec: ExtensionSpec, root: Path, timeout_s: float) -> dict:
    """Try the tiers in order with the front end only; the first accepted one is reached."""
    flags = torch_flags(spec, cache.cuda_arch)
    attempts: list[dict] = []
    tiers = cache._cuda_tiers(spec)
    while tiers:
        tier, text = tiers.pop(0)
        work = Path(tempfile.mkdtemp(dir=root))
        (work / "cuda.cu").write_text(text)
        cmd = [*flags.nvcc, *flags.cuda_cflags, "--cuda", "cuda.cu", "-o", "cuda.ii"]
        with cache._confined(work):
            rc, log, secs = _run_parallel(
                {"front": [*cmd, *flags.cuda_post_cflags]}, work, time.monotonic() + timeout_s
            )["front"]
        first_error = "" if rc == 0 else trim_log(log or "timeout", work)[1]
        attempts.append({"tier": tier, "ok": rc == 0, "seconds": secs, "error": first_error})
        if rc == 0 or not _needs_more_headers(tier, (rc, log, secs)):
            break  # as the build does: an error the next tier would repeat ends it
        tiers = tiers_after_failure(tiers, tier, text, log or "")
    reached = attempts[-1]["tier"]
    missing = re.search(r"fatal error: (\S+): No such file", attempts[-1]["error"])
    if not attempts[-1]["ok"]:  # a header this machine lacks (CPU torch has no c10/cuda) or a bug
        reached = (
            f"unknown here: {missing.group(1)} missing" if missing else "none: fails as written"
        )
    return {"reached": reached, "attempts": attempts}


def _phases(csv_path: Path) -> dict[str, float]:
    """Seconds per nvcc phase from an ``nvcc --time`` CSV."""
    out: dict[str, float] = defaultdict(float)
    with csv_path.open() as f:
        rows = [[cell.strip() for cell in row] for row in csv.reader(f)]
    for row in rows[1:]:
        rec = dict(zip(rows[0], row, strict=False))
        if rec.get("phase name") and rec.get("unit") == "ms":
            out[rec["phase name"]] += float(rec["metric"]) / 1000.0
    return dict(out)


def defined_symbols(obj: Path) -> set[str]:
    """Names of the symbols an object file defines."""
    out = subprocess.run(["nm", "--defined-only", str(obj)], capture_output=True, text=True)
    return {line.split()[-1] for line in out.stdout.splitlines() if line.strip()}


def try_split(cache: BuildCache, spec: ExtensionSpec, root: Path, timeout_s: float) -> dict:
    """The build's first attempt alone (``BuildCache._compile_split``, no fallback): the
    kernels compiled without torch, the host functions in the binding with the PCH, linked.
    Whether it built, else why not (the splitter's reason or the first compiler error)."""
    flags = torch_flags(spec, cache.cuda_arch)
    work = Path(tempfile.mkdtemp(dir=root))
    outcome = BuildOutcome(key="split-check", name=spec.name, ok=False)
    t0 = time.monotonic()
    with cache._confined(work):
        cache._compile_split(spec, flags, work, outcome, time.monotonic() + timeout_s)
    why = outcome.host_split or outcome.first_error
    # compiled, and the link failed only for torch's CUDA libraries (a CPU-only torch): the
    # build settles there without a fallback, as the unsplit one would fail the same way
    compiled = outcome.cuda_headers == HOST_SPLIT_TIER and outcome.failed_step in ("", "link")
    return {
        "moved": compiled,
        "linked": outcome.ok,
        "why": why,
        "seconds": round(time.monotonic() - t0, 1),
        "steps": outcome.steps,
    }


def compile_both(cache: BuildCache, spec: ExtensionSpec, tier: str, root: Path) -> dict | None:
    """The .cu of ``tier`` compiled to an object as it is and with its host code hidden from
    the device pass, one after the other: seconds per nvcc phase of each, and whether the two
    objects hold the same device code (PTX) and define the same symbols."""
    text = dict(cache._cuda_tiers(spec)).get(tier)
    split = hide_host_code_from_device_pass(text) if text else None
    if split is None:
        return None
    flags = torch_flags(spec, cache.cuda_arch)
    out: dict = {}
    objects = {}
    for variant, source in (("unsplit", text), ("split", split)):
        work = Path(tempfile.mkdtemp(dir=root))
        (work / "cuda.cu").write_text(source)
        time_dir = work.parent / f"time-{work.name}"
        time_dir.mkdir()
        os.environ[NVCC_TIME_DIR_VAR] = str(time_dir)
        cmd = [*flags.nvcc, *flags.cuda_cflags, "-c", "cuda.cu", "-o", "cuda.o", "--keep"]
        with cache._confined(work):
            rc, log, secs = _run_parallel(
                {"cuda": [*cmd, *flags.cuda_post_cflags]}, work, time.monotonic() + 900
            )["cuda"]
        os.environ.pop(NVCC_TIME_DIR_VAR)
        phases = {}
        for csv_path in time_dir.glob("*.csv"):
            phases = _phases(csv_path)
        out[variant] = {"ok": rc == 0, "seconds": secs, "phases": phases}
        if rc != 0:
            out[variant]["error"] = trim_log(log or "timeout", work)[1]
            return out
        objects[variant] = work / "cuda.o"
    # Torch's headers bring libcu++/thrust tag objects (empty __device__ constants such as
    # cuda::std::ranges::begin) into the unsplit device pass; the split one never sees
    # them. Everything else must be identical: the kernels' PTX and every other symbol.
    ptx = {  # kept by --keep; comment lines name the build's files
        v: [
            ln
            for ln in next(o.parent.glob("*.ptx")).read_text().splitlines()
            if not ln.startswith("//") and not HEADER_TAG.search(ln)
        ]
        for v, o in objects.items()
    }
    out["same_ptx"] = ptx["split"] == ptx["unsplit"]
    symbols = {v: defined_symbols(o) for v, o in objects.items()}
    extra = symbols["unsplit"] - symbols["split"]
    out["same_symbols"] = symbols["split"] <= symbols["unsplit"] and all(
        HEADER_TAG.search(name) for name in extra
    )
    out["header_tags_only_in_unsplit"] = len([n for n in extra if HEADER_TAG.search(n)])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kb", type=Path, default=Path(os.environ.get("KB", ".kb")))
    ap.add_argument("--limit", type=int, default=40, help="load_inline calls (runs interleaved)")
    ap.add_argument("--skip", type=int, default=0, help="leave out the first N of them")
    ap.add_argument("--jobs", type=int, default=1, help="front-end runs at once")
    ap.add_argument("--arch", default="9.0", help="GPU arch the flags are written for")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per front-end run")
    add_json_argument(ap, "cuda-header-tiers")
    ap.add_argument(
        "--compile",
        type=int,
        default=0,
        metavar="N",
        help="also compile the first N candidates whose tier can be split, split and unsplit",
    )
    ap.add_argument(
        "--split-check",
        action="store_true",
        help="instead: build each call's host split alone (no fallback) and print which calls "
        "take that path and why the others do not",
    )
    args = ap.parse_args()
    items = candidates(args.kb, args.skip + args.limit)[args.skip :]
    if args.split_check:
        split_check(items, args)
        return
    with tempfile.TemporaryDirectory(prefix="bench-tiers-") as tmp:
        cache = BuildCache(Path(tmp) / "cache", args.arch, jail=confinement(Path(tmp)))

        def one(item: tuple[str, ExtensionSpec]) -> dict:
            label, spec = item
            rec = {"candidate": label, "extension": spec.name}
            rec.update(reach(cache, spec, Path(tmp), args.timeout))
            tried = ", ".join(f"{a['tier']} {a['seconds']:.1f} s" for a in rec["attempts"])
            print(f"{label}: {rec['reached']} ({tried})", flush=True)
            return rec

        with ThreadPoolExecutor(args.jobs) as pool:
            records = list(pool.map(one, items))
        # then, one at a time (the nvcc phase files are collected per process)
        for rec, (_, spec) in zip(records, items, strict=True):
            base = rec["reached"].removesuffix(f", {HOST_ONLY_TIER}")
            compiled = sum("compile" in r for r in records)
            if compiled < args.compile and base in dict(cache._cuda_tiers(spec)):
                both = compile_both(cache, spec, base, Path(tmp))
                if both is not None:
                    rec["compile"] = both
                    print(f"    {rec['candidate']} at {base}: {json.dumps(both)}", flush=True)
    print("wrote", write_result("cuda-header-tiers", records, None, args.json))
    shares = Counter(r["reached"] for r in records)
    print(
        f"\n{len(records)} load_inline calls, {os.cpu_count()} cores, sandbox {cache.jail.level if cache.jail else 'none'}"
    )
    for tier, n in shares.most_common():
        print(f"  reached {tier}: {n} ({100 * n / len(records):.0f}%)")
    # Static: whose host functions the build first tries in the host binding (host_split).
    moved = Counter(
        _flags_block_split(spec)
        or _split_reason(split_host_functions("\n".join(spec.cuda_sources)))
        for _, spec in items
    )
    for why, n in moved.most_common():
        print(f"  host functions {'movable' if not why else 'not moved: ' + why}: {n}")
    per_tier: dict[str, list[float]] = defaultdict(list)
    errors: Counter = Counter()
    for r in records:
        for a in r["attempts"]:
            per_tier[f"{a['tier']} {'ok' if a['ok'] else 'failed'}"].append(a["seconds"])
            if not a["ok"]:
                errors[(a["tier"], a["error"][:120])] += 1
    for key, secs in sorted(per_tier.items()):
        print(f"  front end {key}: median {statistics.median(secs):.1f} s over {len(secs)}")
    for (tier, err), n in errors.most_common(12):
        print(f"  {n}x {tier} failed: {err}")
    pairs = [r["compile"] for r in records if "compile" in r and r["compile"]["split"]["ok"]]
    if pairs:
        print(f"\nnvcc -c, {len(pairs)} candidates, median seconds (unsplit -> split):")
        for phase in sorted({p for r in pairs for p in r["unsplit"]["phases"]}):
            before = statistics.median(r["unsplit"]["phases"].get(phase, 0.0) for r in pairs)
            after = statistics.median(r["split"]["phases"].get(phase, 0.0) for r in pairs)
            print(f"  {phase}: {before:.2f} -> {after:.2f}")
        before = statistics.median(r["unsplit"]["seconds"] for r in pairs)
        after = statistics.median(r["split"]["seconds"] for r in pairs)
        print(f"  wall: {before:.1f} -> {after:.1f}")
        print(
            f"  same kernel PTX: {sum(r['same_ptx'] for r in pairs)}/{len(pairs)}, "
            f"same symbols but header tags: {sum(r['same_symbols'] for r in pairs)}/{len(pairs)}"
        )


def split_check(items: list[tuple[str, ExtensionSpec]], args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-split-") as tmp:
        cache = BuildCache(Path(tmp) / "cache", args.arch, jail=confinement(Path(tmp)))

        def one(item: tuple[str, ExtensionSpec]) -> dict:
            label, spec = item
            rec = {
                "candidate": label,
                "extension": spec.name,
                **try_split(cache, spec, Path(tmp), args.timeout),
            }
            print(
                f"{label}: {'moved' if rec['moved'] else rec['why'][:160]} ({rec['seconds']} s)",
                flush=True,
            )
            return rec

        with ThreadPoolExecutor(args.jobs) as pool:
            records = list(pool.map(one, items))
    print("wrote", write_result("cuda-header-tiers", records, None, args.json))
    moved = [r for r in records if r["moved"]]
    print(
        f"\n{len(moved)}/{len(records)} load_inline calls compiled with their host functions in "
        f"the binding ({sum(r['linked'] for r in moved)} linked; the others need torch's CUDA "
        "libraries)"
    )
    if moved:
        for step in ("pch", "cuda", "host", "link"):
            secs = [r["steps"][step] for r in moved if step in r["steps"]]
            if secs:
                print(f"  {step}: median {statistics.median(secs):.1f} s")
    for why, n in Counter(r["why"][:140] for r in records if not r["moved"]).most_common(15):
        print(f"  {n}x not moved: {why}")


if __name__ == "__main__":
    main()
