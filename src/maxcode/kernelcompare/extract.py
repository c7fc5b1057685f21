"""Slow/fast kernel pairs from Parboil and Rodinia source trees.

Parboil ships a naive (``src/cuda_base``) and an optimized (``src/cuda``) version of
each benchmark: files are paired, host code is cut away by the parser, and every
file pair that does not yield a usable kernel pair is logged with its reason.
Rodinia ships only optimized kernels: a ``NaiveVariantGenerator`` writes the slow
side, and a generated pair is kept only when both sides compile.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from maxcode.errors import ConfigError
from maxcode.kernelcompare.config import ExtractConfig
from maxcode.kernelcompare.cudaparse import DeviceCode, isolate
from maxcode.kernelcompare.harness import HarnessConfig, check_outputs
from maxcode.kernelcompare.naive import NaiveVariantGenerator
from maxcode.kernelcompare.techniques import describe, differing, features

log = logging.getLogger(__name__)

DROP_REASONS = {
    "host_only": "no __global__ or __device__ function in the file(s)",
    "mostly_host": "device code is below min_device_fraction of the file's code",
    "parse_error": "a kernel does not parse (ERROR/MISSING nodes in its parse tree)",
    "identical": "naive and optimized kernels are the same after extraction",
    "no_counterpart": "the file has no partner in the other variant directory",
    "no_naive_variant": "the generator could not write a slower variant",
    "fast_compile_error": "the extracted optimized kernel does not compile on its own",
    "slow_compile_error": "the generated naive kernel does not compile",
    "output_mismatch": "the generated harness saw different outputs from the two kernels",
    "duplicate": "same content hash as an earlier pair",
}


class SourceTreeError(ValueError):
    """A benchmark source tree is missing or not in the expected layout; names the path."""


@dataclass
class Pair:
    """One slow/fast kernel pair, before it becomes a chat record."""

    suite: str  # parboil | rodinia
    benchmark: str
    source_file: str  # optimized file, relative to the benchmark directory
    naive_file: str  # naive file (Parboil) or the same file (generated)
    slow_code: str
    fast_code: str
    techniques: list[str]
    description: str
    origin: str  # "expert" (both sides written by the suite's authors) or the generator name
    checks: dict = field(default_factory=dict)  # compiled / outputs, as measured
    changes: dict = field(default_factory=dict)  # generator transformations applied

    @property
    def content_hash(self) -> str:
        """Identity of the pair's code; whitespace-only differences hash the same."""
        canon = "\0".join(" ".join(code.split()) for code in (self.slow_code, self.fast_code))
        return hashlib.sha256(canon.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Drop:
    suite: str
    benchmark: str
    file: str
    reason: str  # a key of DROP_REASONS
    detail: str

    def __post_init__(self) -> None:
        if self.reason not in DROP_REASONS:
            raise ValueError(f"unknown drop reason {self.reason!r}; add it to DROP_REASONS")


@dataclass
class Extraction:
    """Everything one suite produced: raw candidates, kept pairs, drops with reasons."""

    suite: str
    root: str
    raw: int = 0  # file pairs (Parboil) or kernel files (Rodinia) considered
    pairs: list[Pair] = field(default_factory=list)
    drops: list[Drop] = field(default_factory=list)

    def drop(self, benchmark: str, file: str, reason: str, detail: str) -> None:
        entry = Drop(self.suite, benchmark, file, reason, detail)
        log.info("drop %s/%s/%s: %s (%s)", self.suite, benchmark, file, reason, detail)
        self.drops.append(entry)

    def per_benchmark(self) -> dict[str, dict[str, int]]:
        """Counts per benchmark: raw, kept and each drop reason."""
        table: dict[str, dict[str, int]] = {}
        for pair in self.pairs:
            row = table.setdefault(pair.benchmark, {"kept": 0})
            row["kept"] = row.get("kept", 0) + 1
        for entry in self.drops:
            row = table.setdefault(entry.benchmark, {"kept": 0})
            row[entry.reason] = row.get(entry.reason, 0) + 1
        return dict(sorted(table.items()))


def _read_sources(directory: Path, extensions: tuple[str, ...]) -> dict[str, str]:
    files = {}
    for path in sorted(directory.rglob("*")):
        if path.is_file() and path.suffix in extensions:
            files[path.relative_to(directory).as_posix()] = path.read_text(errors="replace")
    return files


def _match_files(
    slow: dict[str, DeviceCode], fast: dict[str, DeviceCode]
) -> tuple[list[tuple[str, str]], list[str], list[str]]:
    """Pair files: same path, then a shared kernel name, then the sole remaining kernel files."""
    matched = [(name, name) for name in sorted(slow) if name in fast]
    rest_slow = [n for n in sorted(slow) if n not in fast]
    rest_fast = [n for n in sorted(fast) if n not in slow]
    for s_name in list(rest_slow):
        kernels = set(slow[s_name].kernel_names)
        partners = [f for f in rest_fast if kernels & set(fast[f].kernel_names)]
        if kernels and len(partners) == 1:
            matched.append((s_name, partners[0]))
            rest_slow.remove(s_name)
            rest_fast.remove(partners[0])
    slow_k = [n for n in rest_slow if slow[n].has_device_code]
    fast_k = [n for n in rest_fast if fast[n].has_device_code]
    if len(slow_k) == 1 and len(fast_k) == 1:
        matched.append((slow_k[0], fast_k[0]))
        rest_slow.remove(slow_k[0])
        rest_fast.remove(fast_k[0])
    return matched, rest_slow, rest_fast


def _quality_problem(
    sides: list[tuple[str, DeviceCode]], config: ExtractConfig
) -> tuple[str, str] | None:
    """First reason (code, detail) why these files do not give a usable kernel, if any."""
    for label, code in sides:
        for unit in code.broken_units:
            return "parse_error", f"{label}: {unit.kind} '{unit.name}' at line {unit.line}"
    missing = [label for label, code in sides if not code.has_device_code]
    if missing:
        return "host_only", f"no device functions in {', '.join(missing)}"
    best = max(code.device_fraction for _, code in sides)
    if best < config.min_device_fraction:
        shares = ", ".join(f"{label} {code.device_fraction:.0%}" for label, code in sides)
        return "mostly_host", f"device code share {shares} < {config.min_device_fraction:.0%}"
    return None


def _require_dir(path: Path, what: str, hint: str) -> Path:
    if not path.exists():
        raise SourceTreeError(f"{path}: {what} does not exist; {hint}")
    if not path.is_dir():
        raise SourceTreeError(f"{path}: {what} is not a directory; {hint}")
    return path


def extract_parboil(root: Path, config: ExtractConfig | None = None) -> Extraction:
    """Pairs from ``<root>/benchmarks/<b>/src/<naive>`` vs ``src/<optimized>``."""
    config = config or ExtractConfig()
    root = Path(root)
    hint = "pass the root of a Parboil checkout (it holds benchmarks/<name>/src/cuda_base)"
    benchmarks = _require_dir(
        _require_dir(root, "Parboil tree", hint) / "benchmarks", "benchmarks dir", hint
    )
    result = Extraction("parboil", str(root))
    found_any = False
    for bench_dir in sorted(p for p in benchmarks.iterdir() if p.is_dir()):
        src = bench_dir / "src"
        variant = next(
            (
                (src / n, src / o)
                for n, o in config.parboil_variants
                if (src / n).is_dir() and (src / o).is_dir()
            ),
            None,
        )
        if variant is None:
            continue
        found_any = True
        naive_dir, opt_dir = variant
        slow = {k: isolate(v) for k, v in _read_sources(naive_dir, config.extensions).items()}
        fast = {k: isolate(v) for k, v in _read_sources(opt_dir, config.extensions).items()}
        matched, rest_slow, rest_fast = _match_files(slow, fast)
        for name in rest_slow:
            result.drop(
                bench_dir.name,
                f"{naive_dir.name}/{name}",
                "no_counterpart",
                f"not in {opt_dir.name}/",
            )
        for name in rest_fast:
            result.drop(
                bench_dir.name,
                f"{opt_dir.name}/{name}",
                "no_counterpart",
                f"not in {naive_dir.name}/",
            )
        for s_name, f_name in matched:
            result.raw += 1
            label = f_name if s_name == f_name else f"{s_name} -> {f_name}"
            problem = _quality_problem(
                [
                    (f"{naive_dir.name}/{s_name}", slow[s_name]),
                    (f"{opt_dir.name}/{f_name}", fast[f_name]),
                ],
                config,
            )
            if problem is not None:
                result.drop(bench_dir.name, label, *problem)
                continue
            slow_code, fast_code = slow[s_name].text(), fast[f_name].text()
            if " ".join(slow_code.split()) == " ".join(fast_code.split()):
                result.drop(bench_dir.name, label, "identical", "extracted kernels are equal")
                continue
            techniques = differing(features(slow_code), features(fast_code))
            result.pairs.append(
                Pair(
                    suite="parboil",
                    benchmark=bench_dir.name,
                    source_file=f_name,
                    naive_file=s_name,
                    slow_code=slow_code,
                    fast_code=fast_code,
                    techniques=techniques,
                    description=describe(techniques),
                    origin="expert",
                    checks={"compiled": None, "outputs": "unchecked"},
                )
            )
    if not found_any:
        variants = ", ".join(f"src/{n} + src/{o}" for n, o in config.parboil_variants)
        raise SourceTreeError(f"{benchmarks}: no benchmark has both of {variants}; {hint}")
    return result


@dataclass
class CompileChecker:
    """``nvcc -c`` on a self-contained translation unit, cached by content."""

    config: ExtractConfig
    cache_path: Path | None = None
    _cache: dict = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        if self.cache_path is not None and Path(self.cache_path).is_file():
            self._cache = json.loads(Path(self.cache_path).read_text())

    def check(self, code: str, includes: list[str], include_dir: Path) -> tuple[bool, str]:
        unit = "\n".join([*includes, "", code])
        command = [self.config.nvcc_path(), *self.config.nvcc_flags, "-I", str(include_dir)]
        key = hashlib.sha256(json.dumps([command[1:], unit]).encode()).hexdigest()
        if key not in self._cache:
            self._cache[key] = self._run(command, unit)
            if self.cache_path is not None:
                from maxcode.records import atomic_write_json

                atomic_write_json(Path(self.cache_path), self._cache)
        ok, first_error = self._cache[key]
        return ok, first_error

    def _run(self, command: list[str], unit: str) -> tuple[bool, str]:
        with tempfile.TemporaryDirectory(prefix="kc-nvcc-") as tmp:
            source = Path(tmp) / "unit.cu"
            source.write_text(unit)
            try:
                done = subprocess.run(
                    [*command, str(source), "-o", str(Path(tmp) / "unit.o")],
                    capture_output=True,
                    text=True,
                    timeout=self.config.compile_timeout_s,
                    cwd=tmp,
                )
            except subprocess.TimeoutExpired:
                return False, f"nvcc timed out after {self.config.compile_timeout_s}s"
        if done.returncode == 0:
            return True, ""
        errors = [line for line in done.stderr.splitlines() if "error" in line]
        return False, (errors[0] if errors else done.stderr.strip()[:300]).replace(
            str(source), "unit.cu"
        )


def extract_rodinia(
    root: Path,
    generator: NaiveVariantGenerator,
    config: ExtractConfig | None = None,
    checker: CompileChecker | None = None,
    harness: HarnessConfig | None = None,
) -> Extraction:
    """Pairs from the optimized kernels in ``<root>/cuda/<b>/``, naive side generated."""
    config = config or ExtractConfig()
    if config.output_check and shutil.which("nvidia-smi") is None:
        raise ConfigError(
            "kernelcompare.extract.output_check: needs an NVIDIA GPU (no nvidia-smi here); "
            "run extract on a GPU machine or set output_check: false"
        )
    root = Path(root)
    hint = "pass the root of a Rodinia checkout (it holds cuda/<benchmark>/*.cu)"
    cuda = _require_dir(_require_dir(root, "Rodinia tree", hint) / "cuda", "cuda dir", hint)
    if config.compile_check and checker is None:
        checker = CompileChecker(config)
    result = Extraction("rodinia", str(root))
    bench_dirs = sorted(p for p in cuda.iterdir() if p.is_dir())
    if not bench_dirs:
        raise SourceTreeError(f"{cuda}: no benchmark directories; {hint}")
    for bench_dir in bench_dirs:
        for name, text in _read_sources(bench_dir, config.extensions).items():
            code = isolate(text)
            if not code.has_device_code and not code.broken_units:
                continue  # host-only file: not a kernel file, so not a raw candidate
            result.raw += 1
            problem = _quality_problem([(name, code)], config)
            if problem is not None:
                result.drop(bench_dir.name, name, *problem)
                continue
            fast_code = code.text()
            variant = generator.generate(bench_dir.name, name, fast_code)
            if variant.source is None:
                result.drop(bench_dir.name, name, "no_naive_variant", variant.reason)
                continue
            checks: dict = {"compiled": None, "outputs": "unchecked"}
            if checker is not None:
                include_dir = (bench_dir / name).parent.resolve()
                ok, error = checker.check(fast_code, code.includes, include_dir)
                if not ok:
                    result.drop(bench_dir.name, name, "fast_compile_error", error)
                    continue
                ok, error = checker.check(variant.source, code.includes, include_dir)
                if not ok:
                    result.drop(bench_dir.name, name, "slow_compile_error", error)
                    continue
                checks["compiled"] = True
            if config.output_check:
                outcome = check_outputs(
                    variant.source,
                    fast_code,
                    code.includes,
                    (bench_dir / name).parent.resolve(),
                    config.nvcc_path(),
                    harness,
                )
                if outcome.status == "mismatch":
                    result.drop(bench_dir.name, name, "output_mismatch", outcome.detail)
                    continue
                checks["outputs"] = outcome.status
                checks["output_detail"] = outcome.detail
            techniques = differing(features(variant.source), features(fast_code))
            result.pairs.append(
                Pair(
                    suite="rodinia",
                    benchmark=bench_dir.name,
                    source_file=name,
                    naive_file=name,
                    slow_code=variant.source,
                    fast_code=fast_code,
                    techniques=techniques,
                    description=describe(techniques),
                    origin=variant.generator,
                    checks=checks,
                    changes=variant.changes,
                )
            )
    return result


def deduplicate(extractions: list[Extraction]) -> list[Pair]:
    """Keep the first pair per content hash; later copies become 'duplicate' drops."""
    seen: dict[str, Pair] = {}
    kept = []
    for extraction in extractions:
        unique = []
        for pair in extraction.pairs:
            first = seen.get(pair.content_hash)
            if first is not None:
                extraction.drop(
                    pair.benchmark,
                    pair.source_file,
                    "duplicate",
                    f"same code as {first.suite}/{first.benchmark}/{first.source_file}",
                )
                continue
            seen[pair.content_hash] = pair
            unique.append(pair)
        extraction.pairs = unique
        kept.extend(unique)
    return kept
