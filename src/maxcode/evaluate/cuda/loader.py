"""Execute problem and candidate modules from source, with ``load_inline`` routed to the build cache."""

from __future__ import annotations

import ast
import importlib.util
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
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
        spec = ExtensionSpec.from_load_inline(*args, **kwargs)
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
