"""Suite kinds are one registry (params.SUITE_KINDS): each kind says its language, its task
ids and its tasks, and no other module switches on a suite's kind."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from maxcode.params import SUITE_KINDS, BuiltinCudaSuite, load_suite
from maxcode.pipeline import EVAL_ENVS, build_suite, suite_task_ids
from maxcode.tasks.model import read_tasks_jsonl

SRC = Path(__file__).resolve().parents[2] / "src" / "maxcode"


@pytest.mark.parametrize("kind", sorted(SUITE_KINDS))
def test_every_kind_says_its_language_ids_and_tasks(kind):
    cls = SUITE_KINDS[kind]
    assert cls.language in EVAL_ENVS  # which conda env and evaluator its rollouts need
    assert callable(cls.task_ids) and callable(cls.tasks)


def test_the_built_suite_holds_exactly_the_planned_tasks(tmp_path):
    cpp = load_suite(
        "c", {"kind": "builtin_cpp", "n_tests": 1, "problems": ["io_prefix_sums_endl"]}
    )
    cuda = BuiltinCudaSuite(levels=(1,), limit=2)
    for name, cfg in (("c", cpp), ("g", cuda)):
        tasks = build_suite(name, cfg, tmp_path / name)
        written = read_tasks_jsonl(tmp_path / name / "tasks.jsonl")
        assert (
            [t.task_id for t in written] == suite_task_ids(name, cfg) == [t.task_id for t in tasks]
        )
        assert {t.suite for t in written} == {name}
        assert {t.language for t in written} == {cfg.language}


def _kind_switches(path: Path) -> list[int]:
    """Lines comparing something's ``.kind`` with a suite kind's name."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Compare):
            continue
        sides = [node.left, *node.comparators]
        on_kind = any(isinstance(s, ast.Attribute) and s.attr == "kind" for s in sides)
        names = {
            c.value
            for s in sides
            for c in ast.walk(s)
            if isinstance(c, ast.Constant) and isinstance(c.value, str)
        }
        if on_kind and names & set(SUITE_KINDS):
            found.append(node.lineno)
    return found


def test_no_module_switches_on_the_suite_kind():
    found = [
        f"{path.relative_to(SRC.parent)}:{line}"
        for path in sorted(SRC.rglob("*.py"))
        for line in _kind_switches(path)
    ]
    assert not found, f"switch on a suite kind outside the registry: {found}"


def test_the_switch_finder_sees_a_switch(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text(
        'if cfg.kind == "builtin_cpp":\n    pass\nelif cfg.kind in ("pie", "kernelbench"):\n'
        '    pass\nif role.kind == "encoder":\n    pass\n'
    )
    assert _kind_switches(bad) == [1, 3]
