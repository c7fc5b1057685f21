"""The C++ evaluator end to end on programs written for these tests (tests/evaluate/hostile/).

Every verdict and every hostile behaviour runs for real in the sandbox; the checks look at
what must hold afterwards: the verdict, the host file system, leftover processes, and that
other candidates evaluated next to a hostile one are judged correctly.
"""

from __future__ import annotations

import os
import random
import socket
import subprocess
import time
from pathlib import Path

import pytest

from maxcode.evaluate.cpp import CppEvalConfig, CppEvaluator, EvaluatorError, compare_outputs
from maxcode.evaluate.result import Status
from maxcode.evaluate.sandbox import UID_BASE, UID_SLOTS
from maxcode.tasks.model import Task

HOSTILE = Path(__file__).parent / "hostile"
ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(not ROOT, reason="namespace isolation needs root here")
needs_valgrind = pytest.mark.skipif(
    subprocess.run(["which", "valgrind"], capture_output=True).returncode != 0,
    reason="valgrind not installed",
)


def src(name: str, **defines: str) -> str:
    head = "".join(f"#define {k} {v}\n" for k, v in defines.items())
    return head + (HOSTILE / name).read_text()


@pytest.fixture(scope="module")
def task(tmp_path_factory) -> Task:
    """Sum of n integers; the reference is quadratic, so a linear candidate is faster."""
    tests = tmp_path_factory.mktemp("sum") / "tests" / "sum"
    tests.mkdir(parents=True)
    rng = random.Random(7)
    for i, n in enumerate((1500, 2500, 3500)):
        xs = [rng.randint(-(10**6), 10**6) for _ in range(n)]
        (tests / f"input.{i}.txt").write_text(f"{n}\n{' '.join(map(str, xs))}\n")
        (tests / f"output.{i}.txt").write_text(f"{sum(xs)}\n")
    return Task("sum", "test", "cpp", (HOSTILE / "slow_sum.cpp").read_text(), tests_dir=tests)


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("cpp-cache")


@pytest.fixture(scope="module")
def evaluator(cache_dir) -> CppEvaluator:
    config = CppEvalConfig(timing="wall", time_limit_s=2.0, repeats=3, workers=2)
    return CppEvaluator(config, cache_dir)


def sandbox_processes() -> list[int]:
    """Pids owned by any sandbox uid (there must be none between evaluations)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                uid = entry.stat().st_uid
            except FileNotFoundError:
                continue
            if UID_BASE <= uid < UID_BASE + UID_SLOTS:
                pids.append(int(entry.name))
    return pids


# -- PIE's correctness check -----------------------------------------------------------------
def test_compare_outputs_follows_pie():
    assert compare_outputs("1\n2.0000\n", "1\n2.0004\n", 1e-3) == ""
    assert "line 2" in compare_outputs("1\n2.0\n", "1\n2.01\n", 1e-3)
    assert compare_outputs("a b\n", "a b\nextra\n", 1e-3) == ""  # PIE ignores extra lines
    assert "end of output" in compare_outputs("1\n2\n", "1\n", 1e-3)
    assert "expected 'yes' got 'Yes'" in compare_outputs("yes", "Yes", 1e-3)
    assert compare_outputs("7\n", "\n\n7\n\n", 1e-3) == ""  # both sides stripped as in PIE
    assert compare_outputs("1 2\n3", "1 2 \n3", 1e-3) != ""  # a line-end space differs in PIE too


# -- verdicts --------------------------------------------------------------------------------
def test_correct_faster_candidate_is_ok_and_timed(evaluator, task):
    r = evaluator.evaluate(task, src("fast_sum.cpp"))
    assert r.status is Status.OK, r.reason
    assert [t.status for t in r.tests] == [Status.OK] * 3
    assert r.timing.mode == "wall" and r.timing.repeats == 3
    assert r.timing.candidate > 0 and r.timing.reference > 0
    assert all(t.runtime_s > 0 for t in r.tests)
    assert r.figures["timing_mode"] == "wall" and r.figures["isolation"] == evaluator.isolation
    assert [t["input_bytes"] for t in r.figures["tests"]] == sorted(
        t["input_bytes"] for t in r.figures["tests"]
    )
    assert r.evaluator.startswith("cpp-eval/")


def test_wrong_answer_names_first_mismatch(evaluator, task):
    r = evaluator.evaluate(task, src("wrong_answer.cpp"))
    assert r.status is Status.WRONG_ANSWER
    assert (
        "test 0" in r.reason and "line 1: expected" in r.reason and "(0/3 tests passed)" in r.reason
    )
    assert r.speedup is None


def test_compile_error_keeps_diagnostics(evaluator, task):
    r = evaluator.evaluate(task, src("compile_error.cpp"))
    assert r.status is Status.COMPILE_ERROR
    assert "undeclared_function" in r.reason and "error" in r.compile_log
    assert r.tests == []


def test_crash_is_runtime_error(evaluator, task):
    r = evaluator.evaluate(task, src("crash.cpp"))
    assert r.status is Status.RUNTIME_ERROR and "SIGSEGV" in r.reason


def test_crash_after_correct_output_is_ok_under_pie_exit_semantics(cache_dir, task):
    crash_late = src("fast_sum.cpp").replace(
        'printf("%lld\\n", total);', 'printf("%lld\\n", total); fflush(stdout); abort();'
    )
    crash_late = "#include <cstdlib>\n" + crash_late
    strict = CppEvaluator(CppEvalConfig(timing="wall", time_limit_s=2.0, repeats=1), cache_dir)
    pie = CppEvaluator(
        CppEvalConfig(time_limit_s=2.0, repeats=1, check_exit_status=False), cache_dir
    )
    assert strict.evaluate(task, crash_late).status is Status.RUNTIME_ERROR
    assert pie.evaluate(task, crash_late).status is Status.OK


@pytest.mark.parametrize("program", ["spin_forever.cpp", "sleep_forever.cpp"])
def test_endless_programs_time_out_quickly(evaluator, task, program):
    start = time.monotonic()
    r = evaluator.evaluate(task, src(program))
    assert r.status is Status.TIMEOUT, r.reason
    assert len(r.tests) == 1  # stops after the first timeout instead of waiting on each test
    assert time.monotonic() - start < 2.0 + 3.0


@pytest.mark.parametrize("program", ["memory_bomb.cpp", "memory_bomb_c.cpp"])
def test_memory_bombs_hit_the_memory_limit(evaluator, task, program):
    r = evaluator.evaluate(task, src(program))
    assert r.status is Status.MEMORY_LIMIT, r.reason
    assert r.figures["peak_rss_kb"] < 500 * 1024


def test_output_flood_hits_the_output_limit(cache_dir, task):
    ev = CppEvaluator(
        CppEvalConfig(timing="wall", time_limit_s=2.0, output_limit_bytes=1 << 20), cache_dir
    )
    r = ev.evaluate(task, src("output_flood.cpp"))
    assert r.status is Status.OUTPUT_LIMIT, r.reason


# -- hostile behaviour -------------------------------------------------------------------------
@needs_root
def test_fork_bomb_is_contained_and_leaves_nothing_behind(evaluator, task):
    # sandboxed processes an earlier test left running (a CUDA evaluator's precompiled
    # header, its estimator) are not this evaluation's
    before = set(sandbox_processes())
    r = evaluator.evaluate(task, src("fork_bomb.cpp"))
    assert r.status is not Status.OK
    # a fork bomb's survivor keeps running; another evaluation's process (a second pytest
    # worker's) that started meanwhile ends within seconds
    left, settled = set(sandbox_processes()) - before, time.monotonic() + 5
    while left and time.monotonic() < settled:
        time.sleep(0.2)
        left &= set(sandbox_processes())
    assert left == set()
    assert evaluator.evaluate(task, src("fast_sum.cpp")).status is Status.OK


def test_hostile_candidates_next_to_good_ones_do_not_change_their_results(evaluator, task):
    sources = [
        src("fork_bomb.cpp"),
        src("fast_sum.cpp"),
        src("memory_bomb.cpp"),
        src("wrong_answer.cpp"),
    ]
    results = evaluator.evaluate_many(task, sources)
    assert [r.status for r in results][1:] == [Status.OK, Status.MEMORY_LIMIT, Status.WRONG_ANSWER]
    assert results[1].tests_passed == 3


@needs_root
def test_writes_outside_the_private_dir_never_reach_the_host(evaluator, task, tmp_path):
    targets = [
        tmp_path / "escaped.txt",
        Path.cwd() / "maxcode-escaped.txt",
        task.tests_dir / "output.9.txt",
    ]
    quoted = ", ".join(f'"{t}"' for t in [*targets, "../escaped.txt"])
    r = evaluator.evaluate(task, src("escape_fs.cpp", ESCAPE_TARGETS=quoted))
    assert r.status is Status.OK, r.reason
    assert [t for t in targets if t.exists()] == []


@needs_root
@pytest.mark.parametrize("where", ["expected output", "project file"])
def test_expected_outputs_and_project_files_cannot_be_read(evaluator, task, where):
    project_file = next(p for p in sorted(Path.cwd().iterdir()) if p.is_file())
    path = task.tests_dir / "output.0.txt" if where == "expected output" else project_file
    r = evaluator.evaluate(task, src("read_expected.cpp", EXPECTED_PATH=f'"{path}"'))
    assert r.status is Status.WRONG_ANSWER
    assert "could not read the expected output" in r.reason


@needs_root
def test_no_secrets_and_no_network(evaluator, task, monkeypatch):
    monkeypatch.setenv("MAXCODE_TEST_SECRET", "sk-do-not-leak")
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        r = evaluator.evaluate(task, src("leak_env_net.cpp", HOST_PORT=str(port)))
    assert r.status is Status.OK, r.reason


# -- timing modes ------------------------------------------------------------------------------
@needs_valgrind
def test_instructions_are_identical_across_runs_even_with_the_other_core_busy(cache_dir, task):
    ev = CppEvaluator(CppEvalConfig(timing="instructions", time_limit_s=2.0), cache_dir)
    first = ev.evaluate(task, src("fast_sum.cpp"))
    busy = subprocess.Popen(["nice", "-n", "10", "sh", "-c", "while :; do :; done"])
    try:
        second = ev.evaluate(task, src("fast_sum.cpp"))
    finally:
        busy.kill()
        busy.wait()
    assert first.status is Status.OK and second.status is Status.OK
    assert first.timing.unit == "instructions"
    assert first.timing.candidate == second.timing.candidate
    assert [t["instructions"] for t in first.figures["tests"]] == [
        t["instructions"] for t in second.figures["tests"]
    ]
    assert first.timing.reference == second.timing.reference
    assert first.speedup > 2.0  # quadratic reference vs linear candidate, counted exactly
    assert len(list((cache_dir / "reference").glob("*.json"))) >= 1  # reference measured once


@needs_valgrind
def test_cachegrind_mode_estimates_cycles(cache_dir, task):
    ev = CppEvaluator(CppEvalConfig(timing="cachegrind", time_limit_s=2.0), cache_dir)
    r = ev.evaluate(task, src("fast_sum.cpp"))
    assert r.status is Status.OK and r.timing.unit == "cycles"
    instr = CppEvaluator(CppEvalConfig(timing="instructions", time_limit_s=2.0), cache_dir)
    assert r.timing.candidate > instr.evaluate(task, src("fast_sum.cpp")).timing.candidate
    assert r.speedup > 2.0


@needs_valgrind
def test_profile_names_the_hot_function(cache_dir, task):
    ev = CppEvaluator(
        CppEvalConfig(timing="wall", repeats=1, profile=True, time_limit_s=2.0), cache_dir
    )
    r = ev.evaluate(task, task.reference_source)
    assert r.status is Status.OK
    assert r.profile["tool"] == "callgrind" and r.profile["total_instructions"] > 0
    top = r.profile["functions"][0]
    assert "main" in top["function"] and top["share_pct"] > 50  # the quadratic loop
    assert r.profile["peak_rss_kb"] > 0


def test_broken_reference_is_an_evaluator_error_naming_the_task(evaluator, task):
    broken = Task("broken", "test", "cpp", src("wrong_answer.cpp"), tests_dir=task.tests_dir)
    with pytest.raises(EvaluatorError, match="task broken: the reference program fails test 0"):
        evaluator.evaluate(broken, src("fast_sum.cpp"))


def test_config_is_strict_and_validated():
    with pytest.raises(
        ValueError, match=r"evaluation\.cpp: unknown key.*'timming' \(did you mean 'timing'"
    ):
        CppEvalConfig.from_dict({"timming": "wall"})
    with pytest.raises(ValueError, match="choose one of"):
        CppEvalConfig(timing="gem5")
    assert CppEvalConfig().hash() != CppEvalConfig(flags=("-O2",)).hash()
    assert CppEvalConfig().hash() == CppEvalConfig(workers=7).hash()  # cannot change a result


# -- command line ------------------------------------------------------------------------------
def test_cli_prints_one_json_object_and_exits_zero_on_any_verdict(task, tmp_path):
    import json

    from typer.testing import CliRunner

    from maxcode.evaluate.cli import app

    ref = tmp_path / "slow.cpp"
    ref.write_text(task.reference_source)
    wrong = tmp_path / "wrong.cpp"
    wrong.write_text(src("wrong_answer.cpp"))
    runner = CliRunner()
    args = [
        "cpp",
        str(wrong),
        "--reference",
        str(ref),
        "--tests",
        str(task.tests_dir),
        "--json",
        "--timing",
        "wall",
        "--cache-dir",
        str(tmp_path / "cache"),
    ]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["status"] == "wrong_answer" and out["timing_mode"] == "wall"
    assert out["tests"][0]["reason"].startswith("line 1: expected") and out["isolation"]
    missing = runner.invoke(app, [*args[:5], str(tmp_path / "nope"), *args[6:]])
    assert missing.exit_code == 2 and "tests directory does not exist" in missing.stderr


def test_valgrind_summary_of_the_main_process_only():
    from maxcode.evaluate.cpp import _parse_cachegrind

    log = (
        "==2== Cachegrind, a cache and branch-prediction profiler\n"
        "==2== Command: /tmp/prog\n"
        "==7== I   refs:      999\n"  # a forked child's summary
        "==2== I   refs:      1,234,567\n"
        "==2== D1  misses:    10\n"
    )
    assert _parse_cachegrind(log) == {"I   refs": 1234567, "D1  misses": 10}
    assert _parse_cachegrind("I   refs: 5 (forged by the program, no header)") == {}
