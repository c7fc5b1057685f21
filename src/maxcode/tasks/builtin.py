"""The built-in C++ suite: small programs, written for maxcode, whose slowness has known causes.

Each problem lives in ``builtin_cpp/<problem_id>/`` as ``slow.cpp`` (the program to
optimize), ``fast.cpp`` (the trusted solution), ``gen.py`` (a deterministic input
generator) and ``problem.yaml`` (title, statement, slowness cause). Materializing the
suite compiles both programs, generates inputs, takes expected outputs from the trusted
solution and cross-checks the slow program against them, then publishes PIE's record
format so the same loader reads it as real PIE data.
"""

from __future__ import annotations

import importlib.util
import json
import random
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import yaml

from maxcode.errors import TaskFormatError
from maxcode.records import atomic_write_json, atomic_write_text, provenance
from maxcode.tasks.model import Task

BUILTIN_CPP_DIR = Path(__file__).parent / "builtin_cpp"
SUITE = "cpp_builtin"
SLOWNESS_CAUSES = ("io", "algorithm", "memory_layout", "constant_factor")
CXX = "g++"
CXX_FLAGS = ("-O3", "-std=c++17")
COMPILE_TIMEOUT_S = 120.0
RUN_TIMEOUT_S = 60.0
_REQUIRED_YAML = ("title", "statement", "slowness", "cause", "helpful_transformations")


class SuiteBuildError(RuntimeError):
    """Building the built-in suite failed; the message names the problem, program and test."""


@dataclass(frozen=True)
class BuiltinProblem:
    problem_id: str
    title: str
    statement: str
    slowness: str
    cause: str
    helpful_transformations: tuple[str, ...]
    slow_source: str
    fast_source: str
    generate: Callable[[int, random.Random], str]


def list_builtin_cpp() -> list[str]:
    """Problem ids shipped with the package, sorted."""
    return sorted(p.name for p in BUILTIN_CPP_DIR.iterdir() if (p / "problem.yaml").is_file())


def load_builtin_problem(problem_id: str) -> BuiltinProblem:
    """Read and validate one problem directory."""
    root = BUILTIN_CPP_DIR / problem_id
    if not (root / "problem.yaml").is_file():
        raise TaskFormatError(
            f"{root}: no built-in C++ problem {problem_id!r}; choose from {list_builtin_cpp()}"
        )
    meta_path = root / "problem.yaml"
    meta = yaml.safe_load(meta_path.read_text())
    if not isinstance(meta, dict):
        raise TaskFormatError(f"{meta_path}: expected a mapping with keys {list(_REQUIRED_YAML)}")
    missing = [k for k in _REQUIRED_YAML if k not in meta]
    unknown = sorted(set(meta) - set(_REQUIRED_YAML))
    if missing or unknown:
        raise TaskFormatError(
            f"{meta_path}: missing keys {missing}, unknown keys {unknown}; "
            f"the keys are exactly {list(_REQUIRED_YAML)}"
        )
    if meta["slowness"] not in SLOWNESS_CAUSES:
        raise TaskFormatError(
            f"{meta_path}: slowness {meta['slowness']!r} is not one of {list(SLOWNESS_CAUSES)}"
        )
    for name in ("slow.cpp", "fast.cpp", "gen.py"):
        if not (root / name).is_file():
            raise TaskFormatError(
                f"{root / name}: missing; every problem needs slow.cpp, fast.cpp, gen.py"
            )
    return BuiltinProblem(
        problem_id=problem_id,
        title=str(meta["title"]),
        statement=str(meta["statement"]),
        slowness=meta["slowness"],
        cause=str(meta["cause"]),
        helpful_transformations=tuple(meta["helpful_transformations"] or ()),
        slow_source=(root / "slow.cpp").read_text(),
        fast_source=(root / "fast.cpp").read_text(),
        generate=_load_generator(root / "gen.py"),
    )


def _load_generator(path: Path) -> Callable[[int, random.Random], str]:
    spec = importlib.util.spec_from_file_location(f"maxcode_builtin_gen_{path.parent.name}", path)
    if spec is None or spec.loader is None:
        raise TaskFormatError(f"{path}: cannot be imported as a Python module")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    generate = getattr(module, "generate", None)
    if not callable(generate):
        raise TaskFormatError(
            f"{path}: must define generate(index: int, rng: random.Random) -> str"
        )
    return generate


def input_rng(seed: int, problem_id: str, index: int) -> random.Random:
    """The generator's RNG for one test: a function of seed, problem and index only."""
    return random.Random(f"maxcode-builtin-cpp:{seed}:{problem_id}:{index}")


def materialize_builtin_cpp(
    out_dir: Path,
    n_tests: int = 5,
    seed: int = 0,
    problems: list[str] | None = None,
) -> list[Task]:
    """Build the suite into ``out_dir`` in PIE's layout and return its tasks.

    ``out_dir/records.jsonl`` holds one PIE record per problem and
    ``out_dir/tests/<problem_id>/input.<i>.txt``/``output.<i>.txt`` its tests. Everything is
    built in a staging directory and swapped in at the end, so an interrupted run leaves
    the previous suite (or none), never half of one.
    """
    if n_tests < 1:
        raise ValueError(f"n_tests={n_tests}: need at least one test per problem")
    ids = list_builtin_cpp() if problems is None else list(problems)
    if not ids:
        raise ValueError("problems=[]: name at least one problem, or pass None for all")
    if len(set(ids)) != len(ids):
        raise ValueError(f"problems={ids}: a problem is listed twice")
    loaded = [load_builtin_problem(pid) for pid in ids]
    out_dir = Path(out_dir)
    if out_dir.exists() and any(out_dir.iterdir()) and not (out_dir / "records.jsonl").is_file():
        raise SuiteBuildError(
            f"{out_dir}: exists and does not hold a built suite (no records.jsonl); it would be "
            "replaced as a whole, so choose an empty directory or a previous suite's directory"
        )
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=out_dir.parent, prefix=f".{out_dir.name}.staging-"))
    staging.chmod(0o755)  # mkdtemp makes it private; the published suite is an ordinary directory
    try:
        with tempfile.TemporaryDirectory(prefix="maxcode-builtin-build-") as build:
            records = [
                _build_problem(p, staging / "tests" / p.problem_id, Path(build), n_tests, seed)
                for p in loaded
            ]
        atomic_write_text(
            staging / "records.jsonl",
            "".join(json.dumps(r, sort_keys=True) + "\n" for r in records),
        )
        atomic_write_json(
            staging / "provenance.json",
            provenance(
                {"n_tests": n_tests, "seed": seed, "problems": ids},
                suite=SUITE,
                compiler=_compiler_version(),
                flags=list(CXX_FLAGS),
            ),
        )
        _publish(staging, out_dir)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return [_task_of(p, out_dir / "tests" / p.problem_id, seed) for p in loaded]


def _build_problem(
    problem: BuiltinProblem, tests_dir: Path, build: Path, n_tests: int, seed: int
) -> dict:
    fast_bin = _compile(problem.problem_id, "fast.cpp", problem.fast_source, build)
    slow_bin = _compile(problem.problem_id, "slow.cpp", problem.slow_source, build)
    tests_dir.mkdir(parents=True)
    for index in range(n_tests):
        text = problem.generate(index, input_rng(seed, problem.problem_id, index))
        if not isinstance(text, str) or not text:
            raise SuiteBuildError(
                f"{problem.problem_id}: gen.py generate({index}) returned {type(text).__name__} "
                "instead of a non-empty str"
            )
        input_path = tests_dir / f"input.{index}.txt"
        input_path.write_text(text)
        expected = _run(problem.problem_id, "fast.cpp", fast_bin, input_path)
        got = _run(problem.problem_id, "slow.cpp", slow_bin, input_path)
        if got != expected:
            raise SuiteBuildError(
                f"{problem.problem_id}: slow.cpp and fast.cpp disagree on test {index} "
                f"({_first_difference(expected, got)}); fix the program that is wrong"
            )
        (tests_dir / f"output.{index}.txt").write_text(expected)
    return {
        "problem_id": problem.problem_id,
        "language": "cpp",
        "src_code": problem.slow_source,
        "tgt_code": problem.fast_source,
        "n_tests": n_tests,
        "title": problem.title,
        "description": problem.statement,
        "slowness": problem.slowness,
        "slowness_cause": problem.cause,
        "helpful_transformations": list(problem.helpful_transformations),
    }


def _task_of(problem: BuiltinProblem, tests_dir: Path, seed: int) -> Task:
    return Task(
        task_id=problem.problem_id,
        suite=SUITE,
        language="cpp",
        reference_source=problem.slow_source,
        tests_dir=tests_dir,
        target_source=problem.fast_source,
        description=f"{problem.title}. {problem.statement}",
        tags=(f"slowness:{problem.slowness}",),
        metadata={
            "title": problem.title,
            "slowness": problem.slowness,
            "slowness_cause": problem.cause,
            "helpful_transformations": list(problem.helpful_transformations),
            "test_seed": seed,
        },
    )


def _compile(problem_id: str, name: str, source: str, build: Path) -> Path:
    src = build / f"{problem_id}.{name}"
    binary = build / f"{problem_id}.{name}.bin"
    src.write_text(source)
    try:
        proc = subprocess.run(
            [CXX, *CXX_FLAGS, "-o", str(binary), str(src)],
            capture_output=True,
            text=True,
            timeout=COMPILE_TIMEOUT_S,
        )
    except FileNotFoundError as err:
        raise SuiteBuildError(
            f"{CXX} not found on PATH; install g++ to build the built-in suite"
        ) from err
    except subprocess.TimeoutExpired as err:
        raise SuiteBuildError(
            f"{problem_id}/{name}: compiling took over {COMPILE_TIMEOUT_S:.0f} s"
        ) from err
    if proc.returncode != 0:
        first = next((ln for ln in proc.stderr.splitlines() if "error" in ln), proc.stderr[:300])
        raise SuiteBuildError(f"{problem_id}/{name}: does not compile: {first}")
    return binary


def _run(problem_id: str, name: str, binary: Path, input_path: Path) -> str:
    try:
        with open(input_path, "rb") as stdin:
            proc = subprocess.run(
                [str(binary)], stdin=stdin, capture_output=True, timeout=RUN_TIMEOUT_S
            )
    except subprocess.TimeoutExpired as err:
        raise SuiteBuildError(
            f"{problem_id}/{name}: ran over {RUN_TIMEOUT_S:.0f} s on {input_path.name}"
        ) from err
    if proc.returncode != 0:
        raise SuiteBuildError(
            f"{problem_id}/{name}: exit status {proc.returncode} on {input_path.name}: "
            f"{proc.stderr.decode(errors='replace')[:300]}"
        )
    return proc.stdout.decode()


def _first_difference(expected: str, got: str) -> str:
    exp_lines, got_lines = expected.splitlines(), got.splitlines()
    for lineno, (e, g) in enumerate(zip(exp_lines, got_lines, strict=False), 1):
        if e != g:
            return f"line {lineno}: fast.cpp printed {e[:60]!r}, slow.cpp {g[:60]!r}"
    return f"fast.cpp printed {len(exp_lines)} lines, slow.cpp {len(got_lines)}"


def _compiler_version() -> str:
    try:
        proc = subprocess.run([CXX, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return proc.stdout.splitlines()[0] if proc.stdout else "unknown"


def _publish(staging: Path, out_dir: Path) -> None:
    """Swap the staged suite in by renames; the old suite is removed only afterwards."""
    old = None
    if out_dir.exists():
        old = out_dir.with_name(f".{out_dir.name}.old-{staging.name.rsplit('-', 1)[-1]}")
        out_dir.rename(old)
    staging.rename(out_dir)
    if old is not None:
        shutil.rmtree(old)
