"""The modules of src/maxcode form a layered graph: no import cycle between packages, and
none between modules, top-level ones (``params.py``, ``pipeline.py``) included.

Every import of a maxcode module counts, function-local ones included, so a cycle
cannot hide inside a function body; importing ``maxcode.a.b`` also runs ``maxcode.a``
(its ``__init__``), so that counts as an import of the package too. A package's own
``cli.py`` belongs to its package: a front door that imports the spine (``params``,
``stages``) puts its package in a cycle with it, as ``kernelcompare/cli.py`` once did.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "maxcode"

Graph = dict[str, dict[str, list[str]]]


def modules_of(root: Path) -> dict[str, Path]:
    """``maxcode.search.loop`` -> its file; a package is named by its ``__init__.py``."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root.parent).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imported_modules(module: str, path: Path, known: dict[str, Path]) -> list[tuple[str, int]]:
    """Every maxcode module an import in ``path`` runs, with its line (parents included)."""
    is_package = path.name == "__init__.py"
    found: set[tuple[str, int]] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolved against this module's package
                anchor = module.split(".")
                anchor = anchor[: len(anchor) - node.level + (1 if is_package else 0)]
                base = ".".join([*anchor, *([base] if base else [])])
            names = [base, *(f"{base}.{a.name}" for a in node.names)]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        for name in names:
            parts = name.split(".")
            for i in range(2, len(parts) + 1):
                target = ".".join(parts[:i])
                if target in known:
                    found.add((target, node.lineno))
    return sorted(found)


def import_graphs(root: Path = SRC) -> tuple[Graph, Graph]:
    """(module graph, package graph): node -> imported node -> the files:lines importing it.

    A top-level module (``maxcode/params.py``) is its own node in the package graph."""
    known = modules_of(root)
    modules: Graph = {}
    packages: Graph = {}
    for module, path in known.items():
        where = str(path.relative_to(root.parent))
        for target, line in imported_modules(module, path, known):
            if target != module and not module.startswith(target + "."):
                modules.setdefault(module, {}).setdefault(target, []).append(f"{where}:{line}")
            here, there = unit_of(module), unit_of(target)
            if there not in (here, root.name):
                packages.setdefault(here, {}).setdefault(there, []).append(f"{where}:{line}")
    return modules, packages


def unit_of(module: str) -> str:
    """``maxcode.search.loop`` -> ``search``; ``maxcode.params`` -> ``params``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def cycles(graph: Graph) -> list[list[str]]:
    """Strongly connected components with more than one node (Tarjan)."""
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


def described(graph: Graph) -> str:
    return "\n".join(
        f"{a} -> {b}: {', '.join(graph[a][b][:3])}"
        for component in cycles(graph)
        for a in component
        for b in component
        if b in graph.get(a, {})
    )


def _tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / "maxcode" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root / "maxcode"


def test_the_checker_finds_a_cycle():
    graph = {"a": {"b": ["a.py:1"]}, "b": {"c": ["b.py:1"]}, "c": {"a": ["c.py:1"]}, "d": {}}
    assert cycles(graph) == [["a", "b", "c"]]


def test_a_cycle_through_a_top_level_module_is_found(tmp_path):
    """kernelcompare/cli.py -> params.py -> kernelcompare/params.py: the cycle of last time,
    with a function-local import, a ``from maxcode import`` and a relative import."""
    root = _tree(
        tmp_path,
        {
            "__init__.py": "",
            "params.py": "from maxcode.kernelcompare import params as kc\n",
            "kernelcompare/__init__.py": "",
            "kernelcompare/params.py": "from . import tables\n",
            "kernelcompare/tables.py": "",
            "kernelcompare/cli.py": "def main():\n    from maxcode import params\n",
        },
    )
    modules, packages = import_graphs(root)
    assert cycles(packages) == [["kernelcompare", "params"]]
    assert "maxcode.kernelcompare.tables" in modules["maxcode.kernelcompare.params"]
    assert "kernelcompare/cli.py:2" in described(packages)


def test_a_module_cycle_inside_a_package_is_found(tmp_path):
    """r2g/reranker.py <-> r2g/encoder.py (function-local one way): a package-level graph
    cannot see it, the module graph does."""
    root = _tree(
        tmp_path,
        {
            "__init__.py": "",
            "r2g/__init__.py": "",
            "r2g/reranker.py": "def load():\n    from maxcode.r2g.encoder import E\n",
            "r2g/encoder.py": "from maxcode.r2g.reranker import load\n",
        },
    )
    modules, packages = import_graphs(root)
    assert cycles(packages) == []
    assert cycles(modules) == [["maxcode.r2g.encoder", "maxcode.r2g.reranker"]]


def test_no_import_cycle_between_maxcode_packages():
    _, packages = import_graphs()
    assert not cycles(packages), "import cycles between packages:\n" + described(packages)


def test_no_import_cycle_between_maxcode_modules():
    modules, _ = import_graphs()
    assert not cycles(modules), "import cycles between modules:\n" + described(modules)


def test_no_maxcode_module_is_imported_by_name():
    """``importlib.import_module(name)`` is an import the checks above cannot see:
    ``llm/backend.py`` once imported its three backends that way, which hid the module cycle
    between it and ``llm/openai_backend.py`` (and the other two). The CUDA evaluator's
    zygote, a process of its own, imports the job function a job names: not an import of
    this process."""
    calls = [
        f"{path.relative_to(SRC.parent)}:{node.lineno}"
        for module, path in modules_of(SRC).items()
        if not module.startswith("maxcode.evaluate.cuda")
        for node in ast.walk(ast.parse(path.read_text(), str(path)))
        if isinstance(node, ast.Call)
        and getattr(node.func, "attr", getattr(node.func, "id", None))
        in ("import_module", "__import__")
    ]
    assert calls == []
