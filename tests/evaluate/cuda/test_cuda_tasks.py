"""KernelBench-format loading and the built-in CUDA suite."""

from __future__ import annotations

import pytest

from maxcode.errors import TaskFormatError
from maxcode.tasks.builtin_cuda import load_builtin_cuda
from maxcode.tasks.kernelbench import load_kernelbench_dir, load_problem_file, task_from_file

PROBLEM = '''import torch
import torch.nn as nn


class Model(nn.Module):
    """Adds one."""

    def forward(self, x):
        return x + 1


def get_inputs():
    return [torch.randn(4)]


def get_init_inputs():
    return []
'''


def test_builtin_suite_covers_both_levels_and_all_families():
    tasks = load_builtin_cuda()
    assert 12 <= len(tasks) <= 16
    assert {t.metadata["level"] for t in tasks} == {1, 2}
    names = " ".join(t.metadata["problem_name"].lower() for t in tasks)
    for family in ("add", "gelu", "sum", "softmax", "layernorm", "rmsnorm", "matmul", "conv"):
        assert family in names
    assert all(t.language == "cuda" and "class Model" in t.reference_source for t in tasks)
    assert len({t.task_id for t in tasks}) == len(tasks)
    assert [t.metadata["level"] for t in load_builtin_cuda(levels=[2])] == [2] * 6


def test_problem_file_metadata(tmp_path):
    path = tmp_path / "level3" / "12_Add_one.py"
    path.parent.mkdir()
    path.write_text(PROBLEM)
    task = load_problem_file(path)
    assert task.task_id == "kernelbench-L3-12"
    assert task.metadata == {
        "level": 3,
        "problem_id": 12,
        "problem_name": "Add_one",
        "file_name": "12_Add_one.py",
    }
    assert task.reference_source == PROBLEM and task.description == "Adds one."


def test_directory_is_sorted_numerically(tmp_path):
    for n in (10, 2, 1):
        p = tmp_path / "level1" / f"{n}_P.py"
        p.parent.mkdir(exist_ok=True)
        p.write_text(PROBLEM)
    assert [t.metadata["problem_id"] for t in load_kernelbench_dir(tmp_path)] == [1, 2, 10]


@pytest.mark.parametrize(
    ("source", "match"),
    [
        ("def get_inputs(): pass\n", "missing top-level Model, get_init_inputs"),
        ("class Model(:\n", "not valid Python"),
    ],
)
def test_bad_problem_names_file_and_what_is_missing(tmp_path, source, match):
    path = tmp_path / "level1" / "1_Bad.py"
    path.parent.mkdir()
    path.write_text(source)
    with pytest.raises(TaskFormatError, match=match) as err:
        load_problem_file(path)
    assert str(path) in str(err.value)


def test_bad_layout_is_explained(tmp_path):
    with pytest.raises(TaskFormatError, match="does not exist"):
        load_kernelbench_dir(tmp_path / "nope")
    with pytest.raises(TaskFormatError, match="level<N>"):
        load_kernelbench_dir(tmp_path)
    odd = tmp_path / "problem.py"
    odd.write_text(PROBLEM)
    with pytest.raises(TaskFormatError, match=r"<number>_<Name>\.py"):
        load_problem_file(odd)
    assert task_from_file(odd).task_id == "problem"
