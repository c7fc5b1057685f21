"""`maxcode optimize --resume` reads run.jsonl through the typed records.

A malformed or foreign record file is refused in one line naming the file, the line and
the field, with exit code 2, before anything in --out is touched. Real runs of the
command on a real finished run whose file is then damaged one way per test.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from maxcode.search.records import CandidateRecord, RunEnd, read_records
from maxcode.tasks.builtin import materialize_builtin_cpp

PROBLEM = "io_prefix_sums_endl"
MAXCODE = [sys.executable, "-m", "maxcode"]


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory) -> tuple[list[str], Path]:
    """The arguments of a finished offline C++ run, and its --out."""
    root = tmp_path_factory.mktemp("run")
    task = materialize_builtin_cpp(root / "suite", n_tests=2, problems=[PROBLEM])[0]
    src = root / "slow.cpp"
    src.write_text(task.reference_source)
    out = root / "out"
    args = [str(src), "--tests", str(task.tests_dir), "--depth", "1", "--k", "2"]
    args += ["--timing", "instructions"]  # the same count every run: best > 1.0 always
    proc = optimize(*args, "--out", str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return args, out


def optimize(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*MAXCODE, "optimize", *args], capture_output=True, text=True, timeout=600
    )


def tree(folder: Path) -> dict[str, str]:
    """Every path under ``folder`` (folders too) with its content hash."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        if p.is_file()
        else "dir"
        for p in sorted(folder.rglob("*"))
    }


def edit_candidate(lines: list[str], change) -> list[str]:
    """``lines`` with the first candidate record changed by ``change(record)``."""
    i = next(n for n, line in enumerate(lines) if json.loads(line)["kind"] == "candidate")
    record = json.loads(lines[i])
    change(record)
    return [*lines[:i], json.dumps(record) + "\n", *lines[i + 1 :]]


def first_candidate_line(lines: list[str]) -> int:
    return 1 + next(n for n, line in enumerate(lines) if json.loads(line)["kind"] == "candidate")


DAMAGE = {
    # name: (how the file is damaged, (line of the error, words the error must hold))
    "missing field": (
        lambda lines: edit_candidate(lines, lambda r: r.pop("reward")),
        lambda lines: (first_candidate_line(lines), ["candidate record", "missing", "reward"]),
    ),
    "unknown field": (
        lambda lines: edit_candidate(lines, lambda r: r.update(speedup_x=2.0)),
        lambda lines: (first_candidate_line(lines), ["candidate record", "unknown", "speedup_x"]),
    ),
    "unknown kind": (
        lambda lines: [
            *lines[:1],
            json.dumps({"kind": "step_start", "step": 0}) + "\n",
            *lines[1:],
        ],
        lambda lines: (2, ["kind 'step_start'"]),
    ),
    "not JSON": (
        lambda lines: [*lines[:1], "{'kind': 'candidate'}\n", *lines[1:]],
        lambda lines: (2, ["not a JSON record"]),
    ),
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_resume_of_a_malformed_record_file_is_one_line_and_changes_nothing(
    finished_run, tmp_path, damage
):
    args, finished = finished_run
    out = tmp_path / "out"
    shutil.copytree(finished, out)
    run = out / "run.jsonl"
    lines = run.read_text().splitlines(keepends=True)
    spoil, expected = DAMAGE[damage]
    run.write_text("".join(spoil(lines)))
    line, words = expected(lines)
    before = tree(out)

    proc = optimize(*args, "--out", str(out), "--resume")

    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    errors = [x for x in proc.stderr.splitlines() if x.startswith("error: ")]
    assert errors == proc.stderr.strip().splitlines()[-1:], proc.stderr
    assert f"{run}:{line}: " in errors[0]
    assert all(w in errors[0] for w in words), errors[0]
    assert tree(out) == before  # not even the cache folder is made


def test_resume_of_a_finished_run_publishes_its_typed_best(finished_run, tmp_path):
    """The winner is found among the typed records and best.cpp is its source."""
    args, finished = finished_run
    out = tmp_path / "out"
    shutil.copytree(finished, out)
    (out / "best.cpp").unlink(missing_ok=True)  # the resume writes it again from the records
    proc = optimize(*args, "--out", str(out), "--resume")
    assert proc.returncode == 0, proc.stderr[-3000:]
    records = read_records(out / "run.jsonl")
    end = records[-1]
    assert isinstance(end, RunEnd) and end.best_reward > 1.0
    winner = next(
        r
        for r in records
        if isinstance(r, CandidateRecord) and r.candidate_id == end.best_candidate_id
    )
    assert f"{end.best_reward:.3f}x by instructions on the tests" in proc.stdout
    # best.cpp is written only when the wall-clock confirmation clears --min-speedup, which a
    # loaded machine can deny; either way the summary names the winner found in the records
    if (out / "best.cpp").exists():
        assert (out / "best.cpp").read_text() == winner.source
    else:
        assert "was not written" in proc.stdout and (out / "confirmation.json").is_file()
