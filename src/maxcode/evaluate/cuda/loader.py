"""Execute problem and candidate modules from source, with ``load_inline`` routed to the build cache."""

from __future__ import annotations

import ast
import importlib.util
import re
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Protocol

from maxcode.evaluate.cuda.build import BuildError, BuildOutcome, ExtensionSpec, import_extension


def load_module(path: Path, module_name: str) -> ModuleType:
    """Import a file as a fresh module (real file: tracebacks and Triton's getsource work)."""
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"{path}: cannot be imported as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = (
        module  # dataclasses/pickling inside the module look themselves up here
    )
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(module_name, None)
        raise
    return module


class Builder(Protocol):
    """A :class:`BuildCache`, or a sandboxed process's channel to the one the evaluator owns."""

    def build(self, spec: ExtensionSpec, timeout_s: float = ...) -> BuildOutcome: ...


@contextmanager
def cached_load_inline(
    cache: Builder, timeout_s: float, on_build: Callable[[BuildOutcome], None]
) -> Iterator[None]:
    """Within the block, ``torch.utils.cpp_extension.load_inline`` builds through ``cache``."""
    from torch.utils import cpp_extension

    original = cpp_extension.load_inline

    def load_inline(*args: object, **kwargs: object) -> ModuleType:
        try:
            spec = ExtensionSpec.from_load_inline(*args, **kwargs)
        except TypeError as err:  # a call torch would refuse: say it as torch names it
            raise TypeError(
                str(err).replace("ExtensionSpec.from_load_inline()", "load_inline()")
            ) from None
        outcome = cache.build(spec, timeout_s=timeout_s)
        try:
            module = import_extension(outcome)
        except BuildError as err:  # built, but it cannot be loaded: a broken build
            on_build(err.outcome)
            raise
        on_build(outcome)
        return module

    cpp_extension.load_inline = load_inline
    try:
        yield
    finally:
        cpp_extension.load_inline = original


# Source that could reach a build by a way this reading does not follow.
_INDIRECT = re.compile(
    r"\b(exec|eval|compile|getattr|setattr|globals|vars|locals|__import__)\s*\(|importlib"
    r"|cpp_extension\s*\.\s*load\b(?!_inline)|\bimport\s+(load|\*)\b|\bload\s*\("
    r"|\bload_inline\s+as\b"
)


@dataclass(frozen=True)
class WrittenOut:
    """What a candidate's source shows of its builds (see :func:`specs_written_out`)."""

    specs: list[ExtensionSpec]
    complete: bool  # every load_inline call is among ``specs``, and nothing reaches one otherwise


def specs_written_out(source: str) -> WrittenOut:
    """The ``load_inline`` calls a candidate makes at its module's top level with every
    argument written out: literals, top-level names bound once to literals (strings joined
    with ``+``, lists of them), f-strings without fields. Read, never run: the evaluator starts
    these builds beside the compile job's start (its Python and torch import), and the job's
    own call finds them built, or builds what it asks for if it asks for something else.
    ``complete`` when the source has no other call and no indirect way to one (an alias,
    ``getattr``, ``exec``, ``cpp_extension.load``): then the compile job has nothing to add."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return WrittenOut([], False)
    nodes = list(ast.walk(tree))
    bindings = Counter(
        n.id for n in nodes if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
    )
    bindings.update(
        (a.asname or a.name).split(".")[0]
        for n in nodes
        if isinstance(n, ast.Import | ast.ImportFrom)
        for a in n.names
    )
    bindings.update(
        n.name
        for n in nodes
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
    )
    bound: dict[str, ast.AST] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            target, written = stmt.targets[0], stmt.value
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            target, written = stmt.target, stmt.value
        else:
            continue
        if isinstance(target, ast.Name) and bindings[target.id] == 1:
            bound[target.id] = written
    calls = [
        n
        for n in nodes
        if isinstance(n, ast.Call)
        and "load_inline" in (getattr(n.func, "id", None), getattr(n.func, "attr", None))
    ]

    def value(node: ast.AST) -> object:
        if isinstance(node, ast.Name):
            if node.id not in bound:
                raise ValueError(node.id)
            return value(bound[node.id])
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left, right = value(node.left), value(node.right)
            if type(left) is not type(right) or not isinstance(left, str | list):
                raise ValueError("+")
            return left + right  # type: ignore[operator]
        if isinstance(node, ast.List | ast.Tuple):
            return [value(item) for item in node.elts]
        if isinstance(node, ast.Dict):
            return {value(k): value(v) for k, v in zip(node.keys, node.values, strict=True)}  # type: ignore[arg-type]
        if isinstance(node, ast.JoinedStr) and all(
            isinstance(v, ast.Constant) for v in node.values
        ):
            return "".join(v.value for v in node.values)  # type: ignore[attr-defined]
        return ast.literal_eval(node)

    top_level = {id(n) for stmt in tree.body for n in ast.walk(stmt) if not isinstance(
        stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)}  # fmt: skip
    specs = []
    for call in calls:
        if id(call) not in top_level or any(isinstance(a, ast.Starred) for a in call.args):
            continue
        try:
            args = [value(a) for a in call.args]
            kwargs = {k.arg: value(k.value) for k in call.keywords if k.arg is not None}
            if len(kwargs) < len(call.keywords):
                continue  # **options
            specs.append(ExtensionSpec.from_load_inline(*args, **kwargs))
        except (ValueError, TypeError, SyntaxError, KeyError, RecursionError):
            continue
    named = sum(
        getattr(n, "id", None) == "load_inline" or getattr(n, "attr", None) == "load_inline"
        for n in nodes
    )
    imported = sum(
        a.name == "load_inline" for n in nodes if isinstance(n, ast.ImportFrom) for a in n.names
    )
    complete = (
        len(specs) == len(calls)
        and named == len(calls)  # the name appears in calls and plain imports only
        and source.count("load_inline") == named + imported
        and not _INDIRECT.search(source)
    )
    return WrittenOut(specs, complete)


def with_constant(source: str, name: str, value: int) -> str:
    """The problem source with top-level ``name = <int>`` replaced by ``value`` (shape perturbation)."""
    tree = ast.parse(source)
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and node.targets[0].id == name
        ):
            node.value = ast.Constant(value)
            return ast.unparse(tree)
    raise KeyError(name)


def int_constant(source: str, names: tuple[str, ...]) -> tuple[str, int] | None:
    """First top-level integer constant among ``names`` (e.g. batch_size), if any."""
    tree = ast.parse(source)
    found = {}
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and isinstance(node.value, ast.Constant)
            and type(node.value.value) is int
        ):
            found[node.targets[0].id] = node.value.value
    for name in names:
        if name in found:
            return name, found[name]
    return None
