"""Load KernelBench-format problems (``level1/1_Square_matrix_multiplication_.py``).

A problem file defines ``class Model(nn.Module)``, ``get_inputs()`` and
``get_init_inputs()``. Loading only parses the file (no code runs), so a broken or
hostile problem directory cannot do anything at load time; the evaluator executes
it later inside its sandboxed worker.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from maxcode.errors import TaskFormatError
from maxcode.tasks.model import Task

_FILE_RE = re.compile(r"^(\d+)_(.+)\.py$")
_LEVEL_RE = re.compile(r"^level(\d+)$")
REQUIRED_DEFINITIONS = ("Model", "get_inputs", "get_init_inputs")


def check_problem_source(source: str, origin: str) -> None:
    """Raise TaskFormatError naming ``origin`` unless the source has Model, get_inputs, get_init_inputs."""
    try:
        tree = ast.parse(source, filename=origin)
    except SyntaxError as err:
        raise TaskFormatError(f"{origin}: not valid Python (line {err.lineno}: {err.msg})") from err
    defined = {
        node.name
        for node in tree.body
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
    }
    missing = [name for name in REQUIRED_DEFINITIONS if name not in defined]
    if missing:
        raise TaskFormatError(
            f"{origin}: missing top-level {', '.join(missing)}; a KernelBench problem defines "
            "class Model(nn.Module), def get_inputs() and def get_init_inputs()"
        )


def load_problem_file(path: Path, suite: str = "kernelbench", level: int | None = None) -> Task:
    """One problem file as a Task (language "cuda"); level defaults to the ``levelN`` parent dir."""
    path = Path(path)
    match = _FILE_RE.match(path.name)
    if not match:
        raise TaskFormatError(
            f"{path}: file name must look like '<number>_<Name>.py' (KernelBench layout)"
        )
    if level is None:
        level_match = _LEVEL_RE.match(path.parent.name)
        if not level_match:
            raise TaskFormatError(
                f"{path}: parent directory must be named 'level<N>', or pass level= explicitly"
            )
        level = int(level_match.group(1))
    source = path.read_text()
    check_problem_source(source, str(path))
    problem_id = int(match.group(1))
    return Task(
        task_id=f"{suite}-L{level}-{problem_id}",
        suite=suite,
        language="cuda",
        reference_source=source,
        description=_docstring_of_model(source),
        tags=(f"level{level}",),
        metadata={
            "level": level,
            "problem_id": problem_id,
            "problem_name": match.group(2),
            "file_name": path.name,
        },
    )


def load_kernelbench_dir(
    root: Path, levels: list[int] | None = None, suite: str = "kernelbench"
) -> list[Task]:
    """All problems under ``root/level<N>/``, sorted by level then problem number."""
    root = Path(root)
    if not root.is_dir():
        raise TaskFormatError(f"{root}: KernelBench directory does not exist")
    level_dirs = sorted(
        (int(m.group(1)), d)
        for d in root.iterdir()
        if d.is_dir() and (m := _LEVEL_RE.match(d.name))
    )
    if not level_dirs:
        raise TaskFormatError(f"{root}: no level<N>/ subdirectories found")
    tasks = []
    for level, level_dir in level_dirs:
        if levels is not None and level not in levels:
            continue
        files = [p for p in level_dir.glob("*.py") if _FILE_RE.match(p.name)]
        for path in sorted(files, key=lambda p: int(_FILE_RE.match(p.name).group(1))):
            tasks.append(load_problem_file(path, suite=suite, level=level))
    if levels is not None and not tasks:
        raise TaskFormatError(f"{root}: no problems found for levels {levels}")
    return tasks


def _docstring_of_model(source: str) -> str:
    tree = ast.parse(source)
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "Model":
            return (ast.get_docstring(node) or "").strip()
    return ""


def task_from_file(path: Path) -> Task:
    """A single problem file given by a user; KernelBench naming is used when the name follows it."""
    path = Path(path)
    if _FILE_RE.match(path.name) and _LEVEL_RE.match(path.parent.name):
        return load_problem_file(path)
    source = path.read_text()
    check_problem_source(source, str(path))
    return Task(
        task_id=path.stem,
        suite="user",
        language="cuda",
        reference_source=source,
        description=_docstring_of_model(source),
        metadata={"file_name": path.name},
    )
