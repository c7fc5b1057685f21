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


def cpp_task(
    target: Path, tests: Path | None, make_tests: int | None, out_dir: Path, sandbox_run
) -> Task:
    """A C++ target with PIE-style tests, or inputs whose outputs the user's program makes."""
    source = _read(target)
    if tests is None:
        raise TargetError(
            f"{target}: C++ targets need --tests DIR with input.<i>.txt/output.<i>.txt pairs "
            "(or input files only, with --make-tests N)"
        )
    if not tests.is_dir():
        raise TargetError(f"--tests {tests}: not a directory")
    if make_tests is not None:
        tests = _make_tests(source, tests, make_tests, out_dir / "tests", sandbox_run)
    else:
        try:
            discover_tests(tests)
        except TaskFormatError as err:
            raise TargetError(
                f"{err} (use --make-tests N to create outputs from your program)"
            ) from err
    return Task(
        task_id=target.stem, suite="user", language="cpp", reference_source=source, tests_dir=tests
    )


def cuda_task(target: Path) -> Task:
    """A KernelBench-format file: Model, get_inputs(), get_init_inputs()."""
    source = _read(target)
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


def _make_tests(source: str, inputs_dir: Path, n: int, out: Path, sandbox_run) -> Path:
    inputs = sorted(inputs_dir.glob("input.*.txt"), key=lambda p: int(p.name.split(".")[1]))
    if len(inputs) < n:
        raise TargetError(
            f"--make-tests {n}: {inputs_dir} holds only {len(inputs)} input.<i>.txt files"
        )
    out.mkdir(parents=True, exist_ok=True)
    for i, inp in enumerate(inputs[:n]):
        shutil.copyfile(inp, out / f"input.{i}.txt")
        stdout = sandbox_run(source, inp)
        (out / f"output.{i}.txt").write_text(stdout)
    return out


def _read(target: Path) -> str:
    if not target.is_file():
        raise TargetError(f"{target}: no such file")
    return target.read_text()
