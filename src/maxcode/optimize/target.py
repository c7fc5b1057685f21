"""Turn a user's file (and tests) into a Task, refusing bad input before any spending."""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

from maxcode.errors import TaskFormatError
from maxcode.tasks.model import Task, discover_tests


class TargetError(ValueError):
    """The target cannot be optimized as given; the message says what to do."""


def detect_kind(target: Path, kind: str | None) -> str:
    if kind:
        return kind
    if target.suffix in (".cpp", ".cc", ".cxx", ".c++"):
        return "cpp"
    if target.suffix == ".py":
        return "cuda"
    raise TargetError(
        f"{target}: cannot tell the kind from the suffix; pass --kind cpp or --kind cuda"
    )


def cpp_task(target: Path, tests: Path) -> Task:
    """A C++ target with PIE-style tests (input.<i>.txt / output.<i>.txt pairs)."""
    try:
        discover_tests(tests)
    except TaskFormatError as err:
        raise TargetError(
            f"--tests {tests}: {err} (use --make-tests N to create outputs from your program)"
        ) from None
    return Task(
        task_id=target.stem,
        suite="user",
        language="cpp",
        reference_source=read_target(target),
        tests_dir=tests,
    )


def cuda_task(target: Path) -> Task:
    """A KernelBench-format file: Model, get_inputs(), get_init_inputs()."""
    source = read_target(target)
    try:
        tree = ast.parse(source, filename=str(target))
    except SyntaxError as err:
        raise TargetError(
            f"{target}: not importable Python ({err.msg}, line {err.lineno})"
        ) from err
    names = {n.name for n in tree.body if isinstance(n, ast.ClassDef | ast.FunctionDef)}
    missing = sorted({"Model", "get_inputs", "get_init_inputs"} - names)
    if missing:
        raise TargetError(
            f"{target}: does not define the KernelBench interface; missing {missing} "
            "(a `Model(nn.Module)` class and `get_inputs()` / `get_init_inputs()` functions)"
        )
    return Task(task_id=target.stem, suite="user", language="cuda", reference_source=source)


def make_tests(source: str, inputs_dir: Path, n: int, out: Path, sandbox_run) -> None:
    """Copy the first n inputs to ``out`` with the outputs the user's program prints for them."""
    inputs = sorted(
        (p for p in inputs_dir.glob("input.*.txt") if p.name.split(".")[1].isdigit()),
        key=lambda p: int(p.name.split(".")[1]),
    )
    if len(inputs) < n:
        raise TargetError(
            f"--make-tests {n}: {inputs_dir} holds only {len(inputs)} input.<i>.txt files"
        )
    out.mkdir(parents=True, exist_ok=True)
    for i, inp in enumerate(inputs[:n]):
        shutil.copyfile(inp, out / f"input.{i}.txt")
        (out / f"output.{i}.txt").write_text(sandbox_run(source, inp))


def read_target(target: Path) -> str:
    if not target.is_file():
        raise TargetError(f"{target}: no such file")
    try:
        return target.read_text()
    except UnicodeDecodeError:
        raise TargetError(f"{target}: not a text file (UTF-8)") from None
