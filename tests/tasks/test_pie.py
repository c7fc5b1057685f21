"""PIE record loaders: both formats, the built-in suite's output, and precise errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from maxcode.errors import TaskFormatError
from maxcode.tasks.pie import load_pie_records, record_format


def make_tests(root: Path, pid: str, n: int = 2) -> None:
    d = root / pid
    d.mkdir(parents=True)
    for i in range(n):
        (d / f"input.{i}.txt").write_text(f"{i}\n")
        (d / f"output.{i}.txt").write_text(f"{i}\n")


def write(path: Path, records: list) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records))
    return path


def test_current_format(tmp_path):
    make_tests(tmp_path / "tests", "p00001")
    rec = {
        "problem_id": "p00001",
        "src_code": "slow",
        "tgt_code": "fast",
        "n_tests": 2,
        "src_agg_runtime": 1.5,
        "tgt_agg_runtime": 0.5,
        "description": "d",
    }
    [task] = load_pie_records(write(tmp_path / "r.jsonl", [rec]), tmp_path / "tests", "pie")
    assert (task.task_id, task.suite, task.language) == ("p00001", "pie", "cpp")
    assert task.reference_source == "slow" and task.target_source == "fast"
    assert len(task.tests()) == 2 and task.metadata["src_agg_runtime"] == 1.5
    assert task.metadata["pie_format"] == "current" and task.description == "d"


def test_older_format_with_several_submissions_per_problem(tmp_path):
    make_tests(tmp_path / "tests", "p03317", 1)
    recs = [
        {
            "problem_id": "p03317",
            "input": "a",
            "target": "b",
            "submission_id_v0": "s1",
            "cpu_time_v0": 28.0,
            "cpu_time_v1": 17.0,
            "language": "C++",
        },
        {"problem_id": "p03317", "input": "c", "target": "d", "submission_id_v0": "s2"},
    ]
    tasks = load_pie_records(write(tmp_path / "r.jsonl", recs), tmp_path / "tests", "pie")
    assert [t.task_id for t in tasks] == ["p03317_s1", "p03317_s2"]
    assert tasks[0].metadata["cpu_time_v0"] == 28.0 and record_format(recs[0]) == "older"


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ({"src_code": "x"}, "r.jsonl:1: missing field 'problem_id'"),
        ({"problem_id": "p1"}, "r.jsonl:1: no program field"),
        ({"problem_id": "p1", "src_code": 3}, "field 'src_code' must be a non-empty string"),
        ({"problem_id": "p1", "src_code": "x", "n_tests": 5}, "'n_tests' says 5 but"),
        ({"problem_id": "p1", "src_code": "x", "language": "Python"}, "only C\\+\\+ records"),
        ({"problem_id": "nope", "src_code": "x"}, "problem 'nope'.*does not exist"),
        ("{not json", "r.jsonl:1: not JSON"),
    ],
)
def test_bad_records_name_file_line_and_field(tmp_path, record, message):
    make_tests(tmp_path / "tests", "p1")
    path = write(tmp_path / "r.jsonl", [record])
    with pytest.raises(TaskFormatError, match=message):
        load_pie_records(path, tmp_path / "tests", "pie")


def test_duplicate_problem_without_ids_is_an_error(tmp_path):
    make_tests(tmp_path / "tests", "p1")
    recs = [{"problem_id": "p1", "src_code": "a"}, {"problem_id": "p1", "src_code": "b"}]
    with pytest.raises(TaskFormatError, match=r"r\.jsonl:1: problem 'p1' has several records"):
        load_pie_records(write(tmp_path / "r.jsonl", recs), tmp_path / "tests", "pie")


def test_reads_the_builtin_suite_output(tmp_path):
    from maxcode.tasks.builtin import list_builtin_cpp, materialize_builtin_cpp

    pid = list_builtin_cpp()[0]
    built = materialize_builtin_cpp(tmp_path / "suite", n_tests=1, problems=[pid])
    [task] = load_pie_records(
        tmp_path / "suite" / "records.jsonl", tmp_path / "suite" / "tests", "cpp_builtin"
    )
    assert task.task_id == built[0].task_id == pid
    assert task.reference_source == built[0].reference_source
    assert task.target_source == built[0].target_source
    assert task.content_hash() == built[0].content_hash()
