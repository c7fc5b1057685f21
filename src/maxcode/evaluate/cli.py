"""``maxcode eval cpp``: judge one C++ program against a reference on PIE-style tests.

Prints one JSON object and exits 0 whatever the verdict; a non-zero exit means the
evaluator itself could not run (bad paths, broken reference, missing tools).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from maxcode.errors import CompilerError, TaskFormatError
from maxcode.evaluate.cpp import TIMING_MODES, CppEvalConfig, CppEvaluator, EvaluatorError
from maxcode.evaluate.sandbox import SandboxError
from maxcode.tasks.model import Task

app = typer.Typer(help="Evaluate candidate programs.", no_args_is_help=True)

DEFAULT_CACHE = Path.home() / ".cache" / "maxcode" / "eval"


@app.callback()
def main() -> None:
    """Evaluate candidate programs (keeps `cpp` a subcommand when mounted alone)."""


@app.command("cpp")
def cpp(
    candidate: Annotated[
        Path, typer.Argument(metavar="CANDIDATE", help="candidate C++ source file")
    ],
    reference: Annotated[Path, typer.Option("--reference", help="reference (slow) C++ source")],
    tests: Annotated[Path, typer.Option("--tests", help="dir with input.<i>.txt/output.<i>.txt")],
    timing: Annotated[str, typer.Option(help=f"one of {', '.join(TIMING_MODES)}")] = "instructions",
    repeats: Annotated[int, typer.Option(help="timed repeats per test in wall mode")] = 5,
    profile: Annotated[bool, typer.Option(help="add a callgrind per-function profile")] = False,
    cache_dir: Annotated[Path, typer.Option(help="binary and reference cache")] = DEFAULT_CACHE,
    as_json: Annotated[bool, typer.Option("--json", help="print one JSON object")] = False,
) -> None:
    """Compile, run, check and time CANDIDATE against --reference."""
    try:
        for path in (candidate, reference):
            if not path.is_file():
                raise TaskFormatError(f"{path}: source file does not exist")
        task = Task(
            task_id=candidate.stem,
            suite="cli",
            language="cpp",
            reference_source=reference.read_text(),
            tests_dir=tests,
        )
        config = CppEvalConfig(timing=timing, repeats=repeats, profile=profile)
        evaluator = CppEvaluator(config, cache_dir)
        result = evaluator.evaluate(task, candidate.read_text())
    except (TaskFormatError, EvaluatorError, SandboxError, CompilerError, ValueError) as err:
        print(f"maxcode eval cpp: {err}", file=sys.stderr)
        raise typer.Exit(2) from err
    out = result.to_dict()
    out["isolation"] = evaluator.isolation
    out["timing_mode"] = config.timing
    if as_json:
        print(json.dumps(out, indent=2, sort_keys=True))
        return
    print(f"status: {result.status.value}" + (f" ({result.reason})" if result.reason else ""))
    for t in result.tests:
        rt = f"{t.runtime_s * 1000:.2f} ms" if t.runtime_s is not None else "-"
        print(f"  test {t.index}: {t.status.value:<14} {rt:>12}  {t.reason}")
    if result.timing is not None:
        tm = result.timing
        print(
            f"{tm.mode}: candidate {tm.candidate:.6g} {tm.unit}, "
            f"reference {tm.reference:.6g} {tm.unit}"
        )
        print(f"speedup: {result.speedup:.3f}x")
    print(f"isolation: {evaluator.isolation}")
