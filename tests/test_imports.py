"""The packages of src/maxcode form a layered graph: no import cycle between them.

Every import of a maxcode module counts, function-local ones included, so a cycle
cannot hide inside a function body. A package's ``cli.py`` is its front door: like
``maxcode/cli.py`` it sits above the spine (params, roles, pipeline), so it counts as
the ``cli`` unit, not as part of its package.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "maxcode"


def package_of(module: str) -> str:
    """``maxcode.search.loop`` -> ``search``; a top-level module is its own unit."""
    return module.split(".")[1]


def imports_between_packages() -> dict[str, dict[str, list[str]]]:
    """package -> imported package -> the files (and lines) that import it."""
    graph: dict[str, dict[str, list[str]]] = {}
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC.parent)
        module = ".".join(rel.with_suffix("").parts)
        here = "cli" if path.name == "cli.py" else package_of(module)
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
                if node.module == "maxcode":
                    names = [f"maxcode.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            for name in names:
                if not name.startswith("maxcode."):
                    continue
                there = "cli" if name.endswith(".cli") else package_of(name)
                if there != here:
                    graph.setdefault(here, {}).setdefault(there, []).append(f"{rel}:{node.lineno}")
    return graph


def cycles(graph: dict[str, dict[str, list[str]]]) -> list[list[str]]:
    """Strongly connected components with more than one package (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, {}):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_checker_finds_a_cycle():
    graph = {"a": {"b": ["a.py:1"]}, "b": {"c": ["b.py:1"]}, "c": {"a": ["c.py:1"]}, "d": {}}
    assert cycles(graph) == [["a", "b", "c"]]


def test_no_import_cycle_between_maxcode_packages():
    graph = imports_between_packages()
    found = cycles(graph)
    detail = [
        f"{a} -> {b}: {', '.join(graph[a][b][:3])}"
        for component in found
        for a in component
        for b in component
        if b in graph.get(a, {})
    ]
    assert not found, "import cycles between packages:\n" + "\n".join(detail)
