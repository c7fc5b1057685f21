"""The built-in C++ suite: its problems, the PIE layout it writes, determinism, clear errors."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from maxcode.errors import TaskFormatError
from maxcode.policy.cpp_transforms import TRANSFORMS
from maxcode.tasks import builtin
from maxcode.tasks.builtin import (
    SLOWNESS_CAUSES,
    SuiteBuildError,
    list_builtin_cpp,
    load_builtin_problem,
    materialize_builtin_cpp,
)
from maxcode.tasks.pie import load_pie_records

# Cheap to compile and run: used where a test builds a suite.
SMALL = ["algo_strlen_loop", "const_modpow_terms"]


def test_suite_covers_every_cause_with_fixable_and_unfixable_problems():
    ids = list_builtin_cpp()
    assert len(ids) >= 12
    problems = [load_builtin_problem(pid) for pid in ids]
    assert {p.slowness for p in problems} == set(SLOWNESS_CAUSES)
    fixable = [p for p in problems if p.helpful_transformations]
    assert 4 <= len(fixable) <= len(problems) - 4, "the search needs honest failures too"
    for p in problems:
        assert set(p.helpful_transformations) <= set(TRANSFORMS), p.problem_id
        assert p.slow_source != p.fast_source


def test_generators_are_deterministic_and_vary_in_size():
    for pid in list_builtin_cpp():
        problem = load_builtin_problem(pid)
        a = [problem.generate(i, builtin.input_rng(0, pid, i)) for i in range(5)]
        b = [problem.generate(i, builtin.input_rng(0, pid, i)) for i in range(5)]
        assert a == b, pid
        assert len(set(a)) == 5, f"{pid}: tests must differ"
        other_seed = problem.generate(0, builtin.input_rng(1, pid, 0))
        assert other_seed != a[0], f"{pid}: the seed must change the inputs"


def test_materialize_writes_pie_layout_that_the_pie_loader_reads(tmp_path):
    out = tmp_path / "suite"
    tasks = materialize_builtin_cpp(out, n_tests=3, seed=0, problems=SMALL)
    assert [t.task_id for t in tasks] == SMALL
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    assert [r["problem_id"] for r in records] == SMALL
    for record, task in zip(records, tasks, strict=True):
        assert record["src_code"] == task.reference_source
        assert record["tgt_code"] == task.target_source
        assert record["n_tests"] == 3
        assert record["slowness"] in SLOWNESS_CAUSES
        assert task.suite == "cpp_builtin" and task.language == "cpp"
        assert task.tags == (f"slowness:{record['slowness']}",)
        assert [c.index for c in task.tests()] == [0, 1, 2]
        assert task.tests_dir == out / "tests" / task.task_id
    loaded = load_pie_records(out / "records.jsonl", out / "tests", "cpp_builtin")
    assert [t.task_id for t in loaded] == SMALL
    assert [t.reference_source for t in loaded] == [t.reference_source for t in tasks]
    assert json.loads((out / "provenance.json").read_text())["params"]["seed"] == 0


def test_materialize_is_deterministic_and_seeded(tmp_path):
    a = materialize_builtin_cpp(tmp_path / "a", n_tests=2, seed=7, problems=SMALL[:1])[0]
    b = materialize_builtin_cpp(tmp_path / "b", n_tests=2, seed=7, problems=SMALL[:1])[0]
    c = materialize_builtin_cpp(tmp_path / "c", n_tests=2, seed=8, problems=SMALL[:1])[0]
    files = [(p.input_path.read_bytes(), p.output_path.read_bytes()) for p in a.tests()]
    assert files == [(p.input_path.read_bytes(), p.output_path.read_bytes()) for p in b.tests()]
    assert files != [(p.input_path.read_bytes(), p.output_path.read_bytes()) for p in c.tests()]


def _fake_problem(root: Path, pid: str, slow_prints: str) -> None:
    d = root / pid
    d.mkdir(parents=True)
    (d / "slow.cpp").write_text(
        f'#include <cstdio>\nint main() {{ int x; scanf("%d", &x); printf("%d\\n", {slow_prints}); }}\n'
    )
    (d / "fast.cpp").write_text(
        '#include <cstdio>\nint main() { int x; scanf("%d", &x); printf("%d\\n", x * 2); }\n'
    )
    (d / "gen.py").write_text(
        "def generate(index, rng):\n    return f'{rng.randint(1, 100) + index}\\n'\n"
    )
    meta = {
        "title": "Double",
        "statement": "Print 2x.",
        "slowness": "constant_factor",
        "cause": "none",
        "helpful_transformations": [],
    }
    (d / "problem.yaml").write_text(yaml.safe_dump(meta))


def test_slow_fast_mismatch_names_problem_and_test_and_keeps_old_suite(tmp_path, monkeypatch):
    monkeypatch.setattr(builtin, "BUILTIN_CPP_DIR", tmp_path / "problems")
    _fake_problem(tmp_path / "problems", "good", "x * 2")
    _fake_problem(tmp_path / "problems", "bad", "x * 2 + (x > 50)")
    out = tmp_path / "suite"
    materialize_builtin_cpp(out, n_tests=4, problems=["good"])
    before = (out / "records.jsonl").read_text()
    with pytest.raises(SuiteBuildError, match=r"bad: slow.cpp and fast.cpp disagree on test \d"):
        materialize_builtin_cpp(out, n_tests=4, problems=["good", "bad"])
    assert (out / "records.jsonl").read_text() == before, "a failed build must leave the old suite"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["problems", "suite"], "no staging left"


def test_bad_problem_definitions_fail_clearly(tmp_path, monkeypatch):
    monkeypatch.setattr(builtin, "BUILTIN_CPP_DIR", tmp_path)
    _fake_problem(tmp_path, "p", "x * 2")
    with pytest.raises(
        TaskFormatError, match="no built-in C\\+\\+ problem 'nope'; choose from \\['p'\\]"
    ):
        load_builtin_problem("nope")
    meta = yaml.safe_load((tmp_path / "p" / "problem.yaml").read_text())
    meta["slowness"] = "gpu"
    (tmp_path / "p" / "problem.yaml").write_text(yaml.safe_dump(meta))
    with pytest.raises(TaskFormatError, match=r"problem\.yaml: slowness 'gpu' is not one of"):
        load_builtin_problem("p")
    del meta["cause"]
    meta["slowness"] = "io"
    (tmp_path / "p" / "problem.yaml").write_text(yaml.safe_dump(meta))
    with pytest.raises(TaskFormatError, match=r"missing keys \['cause'\]"):
        load_builtin_problem("p")
    (tmp_path / "p" / "fast.cpp").write_text("int main() { return }\n")
    meta["cause"] = "x"
    (tmp_path / "p" / "problem.yaml").write_text(yaml.safe_dump(meta))
    with pytest.raises(SuiteBuildError, match=r"p/fast\.cpp: does not compile"):
        materialize_builtin_cpp(tmp_path / "out", n_tests=1, problems=["p"])


def test_refuses_to_replace_a_directory_that_is_not_a_suite(tmp_path):
    out = tmp_path / "precious"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    with pytest.raises(SuiteBuildError, match="does not hold a built suite"):
        materialize_builtin_cpp(out, n_tests=1, problems=SMALL[:1])
    assert (out / "notes.txt").read_text() == "keep me"


def test_argument_errors():
    with pytest.raises(ValueError, match="n_tests=0"):
        materialize_builtin_cpp(Path("unused"), n_tests=0)
    with pytest.raises(ValueError, match="listed twice"):
        materialize_builtin_cpp(Path("unused"), problems=SMALL + SMALL[:1])


@pytest.mark.slow
def test_every_problem_builds_and_slow_agrees_with_fast(tmp_path):
    """The whole suite, one test each: every slow.cpp matches its trusted fast.cpp."""
    tasks = materialize_builtin_cpp(tmp_path / "all", n_tests=1, seed=3)
    assert len(tasks) == len(list_builtin_cpp())
    shutil.rmtree(tmp_path / "all")
