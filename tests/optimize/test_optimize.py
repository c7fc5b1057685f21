"""`maxcode optimize` end to end on a built-in program with the offline policy."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from maxcode.llm.fake_servers import FakeLLMServer
from maxcode.records import read_jsonl
from maxcode.tasks.builtin import materialize_builtin_cpp

PROBLEM = "io_prefix_sums_endl"
MAXCODE = [sys.executable, "-m", "maxcode"]


@pytest.fixture(scope="module")
def program(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("suite")
    task = materialize_builtin_cpp(root / "suite", n_tests=3, problems=[PROBLEM])[0]
    src = root / "slow.cpp"
    src.write_text(task.reference_source)
    return src, task.tests_dir


def optimize(
    *args: str, env: dict | None = None, timeout: float = 600
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*MAXCODE, "optimize", *args], capture_output=True, text=True, timeout=timeout, env=env
    )


@pytest.mark.slow
def test_finds_a_faster_correct_program_and_writes_every_output(program, tmp_path):
    src, tests = program
    out = tmp_path / "out"
    proc = optimize(str(src), "--tests", str(tests), "--out", str(out), "--depth", "2", "--k", "2")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "offline" in proc.stderr.splitlines()[0]  # the first line says no LLM is used
    records = list(read_jsonl(out / "run.jsonl"))
    end = records[-1]
    assert end["kind"] == "run_end" and end["best_reward"] > 1.0
    best = next(r for r in records if r.get("candidate_id") == end["best_candidate_id"])
    assert (out / "best.cpp").read_text() == best["source"] != src.read_text()
    assert "Best candidate:" in proc.stdout and "correct on every test" in proc.stdout
    html = (out / "report.html").read_text()
    assert 'id="speedup-plot"' in html and "data:image/png;base64," in html
    assert 'id="diff"' in html and "sync_with_stdio" in html  # the winning change: fast I/O
    assert html.count("<tr><td>") == sum(r["kind"] == "candidate" for r in records)


@pytest.mark.slow
def test_resume_after_kill_repeats_nothing(program, tmp_path):
    src, tests = program
    out = tmp_path / "out"
    args = [str(src), "--tests", str(tests), "--out", str(out), "--depth", "3", "--k", "2"]
    proc = subprocess.Popen(
        [*MAXCODE, "optimize", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    run = out / "run.jsonl"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and not any(r["kind"] == "step_end" for r in read_jsonl(run)):
        time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    before = [r for r in read_jsonl(run)]
    finished = before[: max(i for i, r in enumerate(before) if r["kind"] == "step_end") + 1]
    assert finished, "killed before the first step finished"

    again = optimize(*args)
    assert again.returncode != 0 and "--resume" in again.stderr  # no silent overwrite
    resumed = optimize(*args, "--resume")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    after = list(read_jsonl(run))
    assert after[: len(finished)] == finished  # finished records kept as they were
    assert after[-1]["kind"] == "run_end"


def test_bad_inputs_stop_before_any_spending(program, tmp_path):
    src, tests = program
    broken_tests = tmp_path / "tests"
    broken_tests.mkdir()
    (broken_tests / "input.0.txt").write_text("1\n5\n")
    proc = optimize(str(src), "--tests", str(broken_tests), "--out", str(tmp_path / "a"))
    assert proc.returncode == 2 and "output.0.txt" in proc.stderr

    bad = tmp_path / "bad.cpp"
    bad.write_text("int main( {")
    proc = optimize(str(bad), "--tests", str(tests), "--out", str(tmp_path / "b"))
    assert proc.returncode == 2 and "compile" in proc.stderr

    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    proc = optimize(
        str(src),
        "--tests",
        str(tests),
        "--llm",
        "openai:gpt-4o",
        "--out",
        str(tmp_path / "c"),
        env=env,
    )
    assert (
        proc.returncode == 2
        and "OPENAI_API_KEY" in proc.stderr
        and "nothing was spent" in proc.stderr
    )

    model = tmp_path / "model.py"
    model.write_text("import torch\nclass Model(torch.nn.Module):\n    pass\n")
    proc = optimize(str(model), "--out", str(tmp_path / "d"))
    assert proc.returncode == 2 and "get_inputs" in proc.stderr


@pytest.mark.slow
def test_llm_backend_fills_cost_and_tokens(program, tmp_path):
    src, tests = program
    env = {**os.environ, "OPENAI_API_KEY": "sk-fake-not-a-key"}
    with FakeLLMServer() as server:
        proc = optimize(
            str(src),
            "--tests",
            str(tests),
            "--out",
            str(tmp_path / "o"),
            "--depth",
            "1",
            "--k",
            "2",
            "--llm",
            "openai:fake-model",
            "--base-url",
            server.openai_base_url,
            env=env,
        )
    assert proc.returncode == 0, proc.stderr[-3000:]
    end = list(read_jsonl(tmp_path / "o" / "run.jsonl"))[-1]
    assert end["usage"]["calls"] > 0 and end["usage"]["input_tokens"] > 0
    assert f"{end['usage']['calls']} LLM calls" in proc.stdout
