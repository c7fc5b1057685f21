"""Compile time of real LLM-written KernelBench candidates through our compile path, before/after.

Candidates: the one-shot generations under ``$KB/runs/*/level_<L>_problem_<P>_sample_0_kernel.py``
that call ``load_inline`` (their problems from ``$KB/technoabsurdist/KernelBench``, the copy
those runs used, else ``$KB/KernelBench``). Each variant compiles every candidate into its
own empty build cache, ``--jobs`` candidates in flight, each through ``CudaEvaluator._compile``:
the sandboxed compile job runs the candidate's code and the evaluator builds what it asks
for, exactly as in an evaluation. Variants (the baseline is measured in the same run):

* ``load_inline``: what torch's ``load_inline`` compiles on the GPU machine: no precompiled
  header, the sources as written, ``-gencode`` for the GPU's arch plus its PTX (torch's
  default arch list with a GPU visible is the device's arch with ``+PTX``);
* ``tiers``: the build cache before the host split (``split_host_functions=False``):
  precompiled ``torch/extension.h`` for the host binding, the lightest header tier that
  compiles for the ``.cu``, one ``-gencode``;
* ``split``: as ``tiers``, but first the ``.cu``'s host functions are moved into the host
  binding (``maxcode.evaluate.cuda.host_split``) and its kernels built without torch
  (``split_host_functions=True``);
* ``ours``: the defaults: as ``split``, the host binding first against the core
  precompiled header (``light_host_headers=True``, ``build.HOST_CORE_HEADERS``), and the
  ``load_inline`` calls written out in the candidate's source built while its compile job
  starts (``build_ahead=True``, ``loader.specs_written_out``); a candidate whose source
  shows every build it can ask for runs no compile job at all (the tasks' memory estimates
  come from the evaluator's estimator process). A host compile waits for its precompiled
  header.

The first variant named is the baseline of the before/after lines (default ``split,ours``).
Each variant's evaluator starts its precompiled headers with its first compile job, as an
evaluation without ``prepare_build_cache`` does. ``--prepared`` then runs the last variant
again into an empty cache that its evaluator prepares first, alone and timed, as a rollout
and ``optimize`` do while the LLM writes the first candidates. ``--pch-present`` then runs
the last variant again into a cache that holds only the precompiled headers its first run
built: what a machine that has compiled before sees (the headers are built once per toolchain and flags, and kept). ``--tasks-seen`` gives
each variant's cache first, untimed, what a machine that evaluated these tasks before holds
(a search evaluates many candidates of each task): each task's memory estimate, kept on
disk by the evaluator, and the precompiled header a plain binding uses, both made for one
candidate per task with no builds; none of these candidates' builds.

Printed per variant: median and max compile wall per candidate (compile job start to last
build, PCH included for those that waited for it), the median of the first wave (the first
``--jobs`` candidates, which start together) and of those started after, the same median
over the candidates whose host compiles had the PCH at once, where the compile job's own
time went (``start``: the sandboxed Python and its imports; the candidate's code less the
builds it waited for; the builds it waited for; then the wait for the task's memory
estimate, also for the candidates that ran no job), the median seconds of each build step (pch, host, cuda, link; ``split *``: a split
attempt that failed and fell back) and of each nvcc phase (``nvcc --time``: cudafe++ front
end, cicc device pass, ptxas, fatbinary, host compiler), the header tiers used and why host
functions were not moved.

    python benchmarks/bench_cuda_compile.py --limit 64 --jobs 16

``--builds`` measures the build cache alone, compile only, so it runs without a GPU (pass
``--arch``): ``--per-level`` load_inline calls per KernelBench level (their arguments read
from the candidate's syntax tree, never run; ``--seed``) are built by each variant, a
checkout's ``src`` folder and one of ``BUILD_VARIANTS`` (the evaluator's settings, or one
speed-up turned off), into its own empty cache whose precompiled headers it prepares first,
timed. The variants take turns per call, one build at a time, so load from elsewhere on the
machine falls on all alike; the first variant is the baseline of the paired lines. Without
a GPU, torch's CUDA libraries are empty stubs (the extensions link, and are never loaded)
and the calls that include the headers of CUDA's libraries are left out where the toolkit
has none. Printed per variant: the median, mean and max build wall per call, the median of
each step, the .cu header tiers and binding header sets the builds reached, and the
precompiled headers' time (all, and until the first set was there).

    python benchmarks/bench_cuda_compile.py --arch 9.0 --builds "old=../old/src,new=src"
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import csv
import inspect
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

from public_candidates import kernel_files, problem_copy, round_robin
from result_json import add_json_argument, headline, write_result

from maxcode.evaluate.cuda.build import NVCC_TIME_DIR_VAR, ExtensionSpec

if TYPE_CHECKING:
    from maxcode.evaluate.cuda import CudaEvaluator
    from maxcode.tasks.model import Task

# Only the build module is imported at the top: ``--builds`` runs this file again as a build
# worker under another checkout's ``src`` (``--serve``), which must find what it imports.
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


_OFF = {"host_pch": False, "light_cuda_headers": False, "split": False, "light_host": False,
        "ahead": False}  # fmt: skip
VARIANTS = {
    "load_inline": {**_OFF, "ptx": True},
    "tiers": {**_OFF, "host_pch": True, "light_cuda_headers": True, "ptx": False},
    "split": {**_OFF, "host_pch": True, "light_cuda_headers": True, "split": True, "ptx": False},
    "ours": {"host_pch": True, "light_cuda_headers": True, "split": True, "light_host": True,
             "ahead": True, "ptx": False},
}  # fmt: skip


def real_candidates(kb: Path, limit: int) -> list[tuple[str, Task, str]]:
    """(label, task, source) of candidates that call load_inline, runs interleaved."""
    from maxcode.tasks.kernelbench import load_problem_file

    problems = problem_copy(kb)
    per_run = []
    for files in kernel_files(kb / "runs"):
        found = []
        for f in files:
            source = f.source
            hits = sorted((problems / f"level{f.level}").glob(f"{f.problem_id}_*.py"))
            if "load_inline" in source and hits:
                found.append((f.key, load_problem_file(hits[0]), source))
        per_run.append(found)
    out = round_robin(per_run, limit)
    if not out:
        sys.exit(
            f"no load_inline candidates under {kb / 'runs'}; set --kb (or $KB) to the material"
        )
    return out


# ``--builds``: the build cache alone, compile only (no GPU, no compile job). A variant is a
# checkout's ``src`` and the BuildCache settings changed from the evaluator's defaults.
BUILD_DEFAULTS = {"host_pch": True, "light_cuda_headers": True, "split_host": True,
                  "light_host_headers": True}  # fmt: skip
BUILD_VARIANTS = {
    "defaults": {},
    "no split": {"split_host": False},  # the .cu at its lightest header tier
    "no ATen ops": {"split_host": False, "light_cuda_headers": False},  # the .cu as written
    "no core set": {"light_host_headers": False},  # the binding with torch/extension.h's PCH
    "no PCH": {"host_pch": False},  # the binding parses torch/extension.h
}


# Headers of CUDA's libraries (ATen/cuda/ includes cuBLAS's and cuSPARSE's): a toolkit
# without them (nvcc alone) cannot compile a call that includes them.
_LIBRARY_HEADERS = re.compile(
    r"#\s*include\s*[<\"](ATen/cuda/|cublas|cusparse|cusolver|cufft|curand|cudnn)"
)


BUILDS_SERIES = "the build cache alone, compile only"


def build_sample(kb: Path, per_level: int, seed: int) -> list[tuple[str, ExtensionSpec]]:
    """(label, spec) of ``per_level`` load_inline calls with CUDA sources drawn from each
    KernelBench level of the runs under ``$KB/runs`` (``random.Random(seed)``), levels
    interleaved; where the CUDA toolkit has no cuBLAS headers, from the calls that include
    none of the CUDA libraries' headers."""
    from maxcode.evaluate.cuda.build import cuda_home

    libraries = Path(cuda_home() or "/usr/local/cuda", "include", "cublas_v2.h").is_file()
    by_level: dict[int, list[tuple[str, ExtensionSpec]]] = defaultdict(list)
    for files in kernel_files(kb / "runs"):
        for f in files:
            with contextlib.suppress(SyntaxError, ValueError):
                by_level[f.level] += [
                    (f.key, s)
                    for s in specs_in(f.source)
                    if s.with_cuda
                    and (
                        libraries
                        or not any(map(_LIBRARY_HEADERS.search, s.cpp_sources + s.cuda_sources))
                    )
                ]
    if not by_level:
        sys.exit(f"no load_inline candidates under {kb / 'runs'}; set --kb (or $KB)")
    rng = random.Random(seed)
    drawn = [rng.sample(by_level[lv], min(per_level, len(by_level[lv]))) for lv in sorted(by_level)]
    return round_robin(drawn, per_level * len(drawn))


def _bad_input(message: str) -> None:
    print(message, file=sys.stderr)
    sys.exit(2)


def parse_builds(text: str) -> list[tuple[str, Path, str]]:
    """``LABEL=SRC[:VARIANT],...`` as (label, src, variant)."""
    out = []
    for item in filter(None, text.split(",")):
        label, _, rest = item.partition("=")
        src, _, variant = rest.partition(":")
        variant = variant or "defaults"
        if not label or not src or variant not in BUILD_VARIANTS:
            _bad_input(
                f"--builds: {item!r} is not LABEL=SRC[:VARIANT] with VARIANT one of "
                f"{sorted(BUILD_VARIANTS)}"
            )
        if not (Path(src) / "maxcode").is_dir():
            _bad_input(f"--builds: {src} holds no maxcode package; give a checkout's src folder")
        out.append((label, Path(src).resolve(), variant))
    return out


class BuildWorker:
    """This file run with ``--serve`` under ``src``: one BuildCache in its own empty cache,
    asked by JSON lines on stdin, answering on stdout."""

    def __init__(self, src: Path, variant: str, arch: str, root: Path):
        stubs = link_stubs(root / "link-stubs")  # in the cache: the compilers' jail sees it
        options = {**BUILD_DEFAULTS, **BUILD_VARIANTS[variant], "arch": arch, "root": str(root)}
        env = {
            **os.environ,
            "PYTHONPATH": f"{src}{os.pathsep}{Path(__file__).parent}",
            "LIBRARY_PATH": os.pathsep.join(
                filter(None, [str(stubs), os.environ.get("LIBRARY_PATH")])
            ),
        }
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--serve", json.dumps(options)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )

    def ask(self, request: dict) -> dict:
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            sys.exit(f"build worker {self.proc.args[-1]} died (exit {self.proc.wait()})")
        return json.loads(line)

    def close(self) -> None:
        assert self.proc.stdin
        self.proc.stdin.close()
        self.proc.wait()


def link_stubs(folder: Path) -> Path:
    """Empty ``libc10_cuda.so``/``libtorch_cuda.so`` where torch (a CPU build) has none, so
    that builds link here as on a GPU machine (the extensions are never loaded)."""
    import torch

    folder.mkdir(parents=True)
    (folder / "empty.c").write_text("")
    for name in ("c10_cuda", "torch_cuda"):
        if not (Path(torch.__file__).parent / "lib" / f"lib{name}.so").exists():
            cmd = [
                "cc",
                "-shared",
                "-fPIC",
                f"-Wl,-soname,lib{name}.so",
                "-o",
                f"lib{name}.so",
                "empty.c",
            ]
            subprocess.run(cmd, cwd=folder, check=True)
    return folder


def serve(options: dict) -> None:
    """The worker's side of :class:`BuildWorker` (imports the ``src`` on its PYTHONPATH):
    ``prepare`` builds the precompiled headers (``prepare_host_pch``), ``build`` one spec."""
    from maxcode.evaluate.cuda.build import BuildCache
    from maxcode.evaluate.sandbox import confinement

    root, arch = Path(options.pop("root")), options.pop("arch")
    accepted = inspect.signature(BuildCache).parameters
    kwargs = {k: v for k, v in options.items() if k in accepted}
    cache = BuildCache(root, arch, jail=confinement(root), **kwargs)
    for line in sys.stdin:
        request = json.loads(line)
        t0 = time.monotonic()
        if request["op"] == "prepare":
            first: list[float] = []
            cache.prepare_host_pch(
                first_ready=lambda first=first, t0=t0: first.append(time.monotonic() - t0)
            )
            answer = {
                "seconds": round(time.monotonic() - t0, 1),
                "first_set_s": round(first[0], 1) if first else None,
                "sandbox": cache.jail.level if cache.jail else "none",
            }
        else:
            outcome = cache.build(ExtensionSpec.from_dict(request["spec"]))
            answer = {**outcome.to_dict(), "wall_s": round(time.monotonic() - t0, 2)}
        print(json.dumps(answer), flush=True)


def run_builds(args: argparse.Namespace) -> None:
    """Every variant builds every sampled call into its own cache (precompiled headers
    prepared first, timed), one build at a time, the variants taking turns per call (the
    first variant rotating), so a load change on the machine falls on all alike."""
    variants = parse_builds(args.builds)
    items = build_sample(args.kb, args.per_level, args.seed)
    print(
        f"{len(items)} load_inline calls ({args.per_level} per level, seed {args.seed}), "
        f"arch {args.arch}, {os.cpu_count()} cores, variants {[v[0] for v in variants]}"
    )
    records: dict[str, list[dict]] = {label: [] for label, _, _ in variants}
    prepared: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="bench-builds-") as tmp:
        workers = {
            label: BuildWorker(src, variant, args.arch, Path(tmp) / f"cache-{n}")
            for n, (label, src, variant) in enumerate(variants)
        }
        for label, worker in workers.items():
            prepared[label] = worker.ask({"op": "prepare"})
            print(f"{label}: precompiled headers {prepared[label]}", flush=True)
        labels = list(workers)
        for i, (name, spec) in enumerate(items):
            turn = labels[i % len(labels) :] + labels[: i % len(labels)]
            for label in turn:
                if (
                    label != labels[0]
                    and i >= args.ablation_limit
                    and _is_ablation(variants, label)
                ):
                    continue
                out = workers[label].ask({"op": "build", "spec": spec.to_dict()})
                records[label].append({"candidate": name, "extension": spec.name, **out})
                print(
                    f"{i:2d} {name} {label}: {'ok' if out['ok'] else out['failed_step']} "
                    f"{out['wall_s']} s ({out['cuda_headers']}; {out['host_headers']})",
                    flush=True,
                )
        for worker in workers.values():
            worker.close()
    results = [
        summarize(label, src, variant, prepared[label], records[label])
        for label, src, variant in variants
    ]
    compare(results)
    headlines = [
        headline(
            f"build wall per real load_inline call, median of {r['builds']}, {r['label']}",
            r["median_wall_s"],
            "s",
        )
        for r in results
    ]
    sample = {"per_level": args.per_level, "seed": args.seed, "calls": [n for n, _ in items]}
    data = {"sample": sample, "variants": results}
    print("wrote", write_result("cuda-compile", data, headlines, args.json, BUILDS_SERIES))


def compare(results: list[dict]) -> None:
    """Prints each variant, then each against the first (before/after) and each speed-up
    turned off against the defaults of its ``src`` (what the speed-up saves), on the calls
    both built whose compile steps passed in every variant; the comparisons go into each
    result (``vs_first``, ``vs_defaults``)."""
    for res in results:
        print(
            f"{res['label']:14s} {res['builds']} builds ({res['ok']} ok): median "
            f"{res['median_wall_s']} s, mean {res['mean_wall_s']} s, max {res['max_wall_s']} s; "
            f"PCHs {res['prepare_s']} s (first set {res['first_set_s']} s)"
        )
        print(f"  steps (median s): {res['median_step_s']}")
        print(f"  .cu: {res['cuda_headers']}  binding: {res['host_headers']}")
    # the calls whose compile steps passed in every variant that built them (a link without
    # torch's CUDA libraries may fail)
    failed = {
        r["candidate"] + r["extension"]
        for res in results
        for r in res["records"]
        if r["failed_step"] not in ("", "link")
    }
    for res in results:
        walls = [
            r["wall_s"] for r in res["records"] if r["candidate"] + r["extension"] not in failed
        ]
        if walls:
            print(f"{res['label']}: median {statistics.median(walls):.1f} s over the {len(walls)} "
                  "calls whose compile steps passed in every variant that built them")  # fmt: skip
    base = results[0]
    defaults = {r["src"]: r for r in results if r["variant"] == "defaults"}
    for res in results[1:]:
        res["vs_first"] = _paired(base, res, failed)
        _print_pair(base, res, res["vs_first"])
    for res in results:
        if res["variant"] != "defaults" and res["src"] in defaults:
            res["vs_defaults"] = _paired(res, defaults[res["src"]], failed)
            _print_pair(res, defaults[res["src"]], res["vs_defaults"])


def _print_pair(first: dict, other: dict, paired: dict) -> None:
    print(
        f"{first['label']} -> {other['label']} on the same {paired['n']} calls: median "
        f"{paired['first_median_s']} s -> {paired['median_s']} s (ratio of medians "
        f"{paired['ratio_of_medians']}, median ratio {paired['median_ratio']}); mean "
        f"{paired['first_mean_s']} s -> {paired['mean_s']} s"
    )


def _is_ablation(variants: list[tuple[str, Path, str]], label: str) -> bool:
    return next(v for lb, _, v in variants if lb == label) != "defaults"


def summarize(label: str, src: Path, variant: str, prepared: dict, records: list[dict]) -> dict:
    walls = [r["wall_s"] for r in records]
    steps: dict[str, list[float]] = defaultdict(list)
    for r in records:
        for step, secs in r["steps"].items():
            steps[step].append(secs)
    return {
        "label": label,
        "src": str(src),
        "variant": variant,
        "settings": {**BUILD_DEFAULTS, **BUILD_VARIANTS[variant]},
        "prepare_s": prepared["seconds"],
        "first_set_s": prepared["first_set_s"],
        "sandbox": prepared["sandbox"],
        "builds": len(records),
        "ok": sum(r["ok"] for r in records),
        "median_wall_s": round(statistics.median(walls), 1),
        "mean_wall_s": round(statistics.mean(walls), 1),
        "max_wall_s": round(max(walls), 1),
        "median_step_s": {k: round(statistics.median(v), 1) for k, v in sorted(steps.items())},
        "cuda_headers": dict(Counter(r["cuda_headers"] for r in records)),
        "host_headers": dict(Counter(r["host_headers"] for r in records)),
        "not_split": dict(Counter(_reason(r["host_split"]) for r in records if r["host_split"])),
        "records": records,
    }


def _paired(first: dict, other: dict, failed: set[str]) -> dict:
    """``other`` against ``first`` on the calls both built, less those ``failed``."""
    walls = {r["candidate"] + r["extension"]: r["wall_s"] for r in first["records"]}
    pairs = [
        (walls[key], r["wall_s"])
        for r in other["records"]
        if (key := r["candidate"] + r["extension"]) in walls and key not in failed
    ]
    a, b = [x for x, _ in pairs], [y for _, y in pairs]
    return {
        "n": len(pairs),
        "first_median_s": round(statistics.median(a), 1),
        "median_s": round(statistics.median(b), 1),
        "ratio_of_medians": round(statistics.median(b) / statistics.median(a), 2),
        "median_ratio": round(statistics.median(y / x for x, y in pairs), 2),
        "first_mean_s": round(statistics.mean(a), 1),
        "mean_s": round(statistics.mean(b), 1),
    }


def nvcc_phases(time_dir: Path) -> dict[str, dict[str, float]]:
    """Seconds per nvcc phase, summed per build (file ``<build dir>.<step>.csv``)."""
    per_build: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for path in time_dir.glob("*.csv"):
        build = path.name.split(".")[0]
        with path.open() as f:
            rows = [[cell.strip() for cell in row] for row in csv.reader(f)]
        if not rows:
            continue
        header = rows[0]
        for row in rows[1:]:
            rec = dict(zip(header, row, strict=False))
            if rec.get("phase name") and rec.get("metric") and rec.get("unit") == "ms":
                per_build[build][rec["phase name"]] += float(rec["metric"]) / 1000.0
    return per_build


def see_the_tasks(evaluator: CudaEvaluator, items: list, jobs: int, root: Path) -> float:
    """What a machine that evaluated these tasks before holds, made untimed: one candidate
    per task with no builds (``x = 1``) has the task's memory estimate made and starts the
    precompiled header a plain binding uses (waited for here). Returns the seconds it took."""
    from maxcode.evaluate.cuda.evaluator import _Job

    tasks = list({task.reference_source: task for _, task, _ in items}.values())
    t0 = time.monotonic()
    with ThreadPoolExecutor(jobs) as pool:
        list(pool.map(lambda i: evaluator._compile(_Job(i, tasks[i], "x = 1\n", root / f"seen-{i}")),
                      range(len(tasks))))  # fmt: skip
    if evaluator._pch_ahead is not None:
        evaluator._pch_ahead.join()
    return round(time.monotonic() - t0, 1)


def run_variant(
    name: str,
    items: list,
    arch: str,
    jobs: int,
    root: Path,
    pch_from: Path | None = None,
    tasks_seen: bool = False,
    prepared: bool = False,
) -> dict:
    """``pch_from``: a cache whose precompiled headers this run's cache starts with, and
    nothing else (a machine that has compiled before, these candidates never).
    ``tasks_seen``: the cache first gets the tasks' estimates and the PCH (``see_the_tasks``).
    ``prepared``: the evaluator first prepares its empty cache (``prepare_build_cache``,
    waited for and timed, nothing else running), as a rollout does while its LLM writes."""
    from maxcode.evaluate.cuda import CudaEvalConfig, CudaEvaluator
    from maxcode.evaluate.cuda.evaluator import _Job

    opts = VARIANTS[name]
    cache_name = (
        f"cache-{name}"
        + ("-pch-present" if pch_from else "")
        + ("-tasks-seen" if tasks_seen else "")
        + ("-prepared" if prepared else "")
    )
    if pch_from is not None:
        shutil.copytree(pch_from / "build" / "pch", root / cache_name / "build" / "pch")
    time_dir = root / f"nvcc-time-{cache_name}"
    time_dir.mkdir(parents=True)
    os.environ[NVCC_TIME_DIR_VAR] = str(time_dir)
    cfg = CudaEvalConfig(
        cuda_arch=arch,
        host_pch=opts["host_pch"],
        light_cuda_headers=opts["light_cuda_headers"],
        split_host_functions=opts["split"],
        light_host_headers=opts["light_host"],
        build_ahead=opts["ahead"],
    )
    evaluator = CudaEvaluator(cfg, root / cache_name, gpus=[])
    # TORCH_CUDA_ARCH_LIST as torch's default would be (the config only takes a plain arch)
    evaluator._arch = arch + ("+PTX" if opts["ptx"] else "")
    seen_s = see_the_tasks(evaluator, items, jobs, root / cache_name) if tasks_seen else None
    prepared_s = evaluator.prepare_build_cache(wait=True) if prepared else None
    pch_seconds = evaluator.pch_ahead_seconds
    records = []

    def one(i: int) -> dict:
        label, task, source = items[i]
        job = _Job(i, task, source, root / cache_name / "runs" / f"{i}")
        t0 = time.monotonic()
        ok = evaluator._compile(job)
        return {
            "candidate": label,
            "ok": ok,
            "status": None if ok else job.result.status.value,
            "start_s": round(t0 - batch_start, 3),
            "wall_s": round(time.monotonic() - t0, 3),
            "builds": job.figures.get("builds", []),
            "job_s": job.figures.get("compile_job_seconds", {}),
            "reason": "" if ok else job.result.reason,
        }

    batch_start = time.monotonic()
    with ThreadPoolExecutor(jobs) as pool:
        records = list(pool.map(one, range(len(items))))
    total = time.monotonic() - batch_start
    evaluator.close()  # waits for the precompiled header it started ahead
    os.environ.pop(NVCC_TIME_DIR_VAR, None)
    phases = nvcc_phases(time_dir)
    steps: dict[str, list[float]] = defaultdict(list)
    for r in records:
        for b in r["builds"]:
            for step, secs in b["steps"].items():
                steps[step].append(secs)
    phase_lists: dict[str, list[float]] = defaultdict(list)
    for per in phases.values():
        for phase, secs in per.items():
            phase_lists[phase].append(secs)
    walls = [r["wall_s"] for r in records]
    # candidates whose host compiles had the precompiled header at once (not waited for);
    # builds served from the cache count as having it
    with_pch = [
        r["wall_s"]
        for r in records
        if all(b["cached"] or b["steps"].get("pch", 0) < 0.5 for b in r["builds"])
    ]
    job_parts: dict[str, list[float]] = defaultdict(list)
    for r in records:
        for part, secs in r["job_s"].items():
            if "torch import" in r["job_s"] and part != "estimate":
                job_parts[part].append(secs)
    estimate_waits = [r["job_s"].get("estimate", 0.0) for r in records if r["job_s"]]
    return {
        "variant": name
        + (", PCH present" if pch_from else "")
        + (", tasks seen" if tasks_seen else "")
        + (", prepared" if prepared else ""),
        "tasks_seen_s": seen_s,
        "prepared_s": prepared_s,
        "prepared_first_set_s": evaluator.pch_first_seconds if prepared else None,
        "cache": str(root / cache_name),
        "config": {"cuda_arch": evaluator.cuda_arch, **opts},
        "sandbox": evaluator.jail.level,
        "candidates": len(records),
        "compiled": sum(r["ok"] for r in records),
        "batch_wall_s": round(total, 1),
        "median_wall_s": round(statistics.median(walls), 1),
        "max_wall_s": round(max(walls), 1),
        # the pool starts candidates in order: the first ``jobs`` are the first wave
        "first_wave_median_wall_s": round(statistics.median(walls[:jobs]), 1),
        "first_wave_count": len(walls[:jobs]),
        "later_count": len(walls[jobs:]),
        "later_median_wall_s": round(statistics.median(walls[jobs:]), 1) if walls[jobs:] else None,
        "with_pch": len(with_pch),
        "median_wall_with_pch_s": round(statistics.median(with_pch), 1) if with_pch else None,
        "pch_ahead_s": pch_seconds if tasks_seen or prepared else evaluator.pch_ahead_seconds,
        "median_job_s": {k: round(statistics.median(v), 2) for k, v in job_parts.items()},
        "jobs_run": sum("torch import" in r["job_s"] for r in records),
        "estimate_wait_s": {
            "median": round(statistics.median(estimate_waits), 2) if estimate_waits else None,
            "max": max(estimate_waits, default=None),
        },
        "median_step_s": {k: round(statistics.median(v), 2) for k, v in sorted(steps.items())},
        "median_nvcc_phase_s": {
            k: round(statistics.median(v), 2) for k, v in sorted(phase_lists.items())
        },
        "tiers": dict(Counter(b["cuda_headers"] for r in records for b in r["builds"])),
        "host_header_sets": dict(
            Counter(b.get("host_headers") or "-" for r in records for b in r["builds"])
        ),
        "not_split": dict(
            Counter(
                _reason(b["host_split"]) for r in records for b in r["builds"] if b["host_split"]
            )
        ),
        "records": records,
    }


def report(res: dict) -> None:
    print(
        f"{res['variant']:12s} compiled {res['compiled']}/{res['candidates']}  "
        f"median {res['median_wall_s']} s  max {res['max_wall_s']} s  "
        f"batch {res['batch_wall_s']} s  sandbox {res['sandbox']}"
    )
    print(
        f"  first wave (the first {res['first_wave_count']} started): median "
        f"{res['first_wave_median_wall_s']} s; the {res['later_count']} started after: "
        f"median {res['later_median_wall_s']} s"
    )
    if res["tasks_seen_s"] is not None:
        print(f"  the tasks' estimates and the PCH made first, untimed: {res['tasks_seen_s']} s")
    if res["prepared_s"] is not None:
        print(
            f"  the build cache prepared first (its PCHs, alone): {res['prepared_s']} s, "
            f"the lightest header set there after {res['prepared_first_set_s']} s"
        )
    print(
        f"  {res['with_pch']} candidates whose host compiles had the PCH at once: "
        f"median {res['median_wall_with_pch_s']} s; the PCH started with the first "
        f"compile job took {res['pch_ahead_s']} s"
    )
    print(
        f"  compile jobs run: {res['jobs_run']} (the others' sources showed every build); "
        f"where their time went (median s): {res['median_job_s']}"
    )
    print(
        "  waited for the task's memory estimate once built: "
        f"median {res['estimate_wait_s']['median']} s, max {res['estimate_wait_s']['max']} s"
    )
    print(f"  steps (median s): {res['median_step_s']}")
    print(f"  nvcc phases (median s per build): {res['median_nvcc_phase_s']}")
    print(f"  .cu header tiers: {res['tiers']}")
    print(f"  host header sets: {res['host_header_sets']}")
    if res["not_split"]:
        print(f"  host functions not moved: {res['not_split']}")
    for r in [r for r in res["records"] if not r["ok"]][:3]:
        print(f"  failed: {r['candidate']}: {r['reason'][:300]}")


def _reason(why: str) -> str:
    """A fallback reason without the candidate's own names, so that reasons group."""
    return re.sub(r"(failed \(\w+\)):.*", r"\1", why)[:120]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kb", type=Path, default=Path(os.environ.get("KB", ".kb")))
    ap.add_argument("--limit", type=int, default=32, help="candidates (runs interleaved)")
    ap.add_argument("--jobs", type=int, default=16, help="candidates compiling at once")
    ap.add_argument("--arch", default="", help="GPU arch, e.g. 9.0 (default: the GPU's)")
    ap.add_argument(
        "--variants",
        default="split,ours",
        help=f"of {sorted(VARIANTS)}; the first is the baseline of the before/after line",
    )
    ap.add_argument(
        "--pch-present",
        action="store_true",
        help="then run the last variant again into a cache that holds only the precompiled "
        "headers its first run built (a machine that has compiled before)",
    )
    ap.add_argument(
        "--tasks-seen",
        action="store_true",
        help="give each variant's cache first, untimed, what a machine that evaluated these "
        "tasks before holds: the tasks' memory estimates and the precompiled header",
    )
    ap.add_argument(
        "--prepared",
        action="store_true",
        help="then run the last variant again into an empty cache that its evaluator prepares "
        "first (prepare_build_cache, timed alone), as a rollout or optimize does",
    )
    ap.add_argument(
        "--builds",
        metavar="LABEL=SRC[:VARIANT],...",
        help="instead: the build cache alone, compile only (no GPU; needs --arch): each "
        "variant (a checkout's src folder and one of "
        f"{sorted(BUILD_VARIANTS)}) builds a sample of load_inline calls, taking turns per call",
    )
    ap.add_argument("--per-level", type=int, default=10, help="--builds: calls per level")
    ap.add_argument("--seed", type=int, default=0, help="--builds: the sample's seed")
    ap.add_argument(
        "--ablation-limit",
        type=int,
        default=1000,
        metavar="N",
        help="--builds: variants other than defaults build only the first N calls",
    )
    ap.add_argument(
        "--compare",
        type=Path,
        metavar="JSON",
        help="instead: print the comparisons of a --builds result file again",
    )
    ap.add_argument("--serve", help=argparse.SUPPRESS)  # a --builds worker
    add_json_argument(ap, "cuda-compile")
    args = ap.parse_args()
    if args.serve:
        serve(json.loads(args.serve))
        return
    if args.compare:
        compare(json.loads(args.compare.read_text())["data"]["variants"])
        return
    if args.builds:
        if not args.arch:
            _bad_input("--builds: pass --arch (e.g. --arch 9.0), the GPU arch to compile for")
        run_builds(args)
        return
    from maxcode.evaluate.cuda.figures import detect_cuda_arch

    arch = args.arch or detect_cuda_arch()
    if not arch:
        sys.exit("no GPU found: pass --arch (e.g. --arch 9.0) to compile without one")
    names = [v for v in args.variants.split(",") if v]
    unknown = [v for v in names if v not in VARIANTS]
    if unknown:
        sys.exit(f"--variants: unknown {unknown}; choose from {sorted(VARIANTS)}")
    items = real_candidates(args.kb, args.limit)
    print(
        f"{len(items)} real candidates, {args.jobs} in flight, arch {arch}, {os.cpu_count()} cores"
    )
    results = []
    with tempfile.TemporaryDirectory(prefix="bench-compile-") as tmp:
        for name in names:
            results.append(
                run_variant(name, items, arch, args.jobs, Path(tmp), tasks_seen=args.tasks_seen)
            )
            report(results[-1])
        if args.pch_present:
            last = results[-1]
            results.append(
                run_variant(names[-1], items, arch, args.jobs, Path(tmp), Path(last["cache"]))
            )
            report(results[-1])
        if args.prepared:
            results.append(run_variant(names[-1], items, arch, args.jobs, Path(tmp), prepared=True))
            report(results[-1])
    for b in results[1:]:
        a = results[0]
        print(
            f"median per candidate: {a['variant']} {a['median_wall_s']} s -> "
            f"{b['variant']} {b['median_wall_s']} s ({a['median_wall_s'] / b['median_wall_s']:.2f}x)"
        )
    headlines = [
        headline(f"compile wall per candidate, median, {r['variant']}", r["median_wall_s"], "s")
        for r in results
    ]
    print("wrote", write_result("cuda-compile", results, headlines, args.json))


if __name__ == "__main__":
    main()
