"""SQLite evaluation cache: round trip, cached flag, parallel writers, wrapper semantics."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

from maxcode.evaluate.cache import CachedEvaluator, CacheKey, EvalCache
from maxcode.evaluate.cpp import CppEvalConfig, CppEvaluator
from maxcode.evaluate.result import EvalResult, Status, Timing
from maxcode.evaluate.result import TestVerdict as Verdict
from maxcode.tasks.model import Task

HOSTILE = Path(__file__).parent / "hostile"


def result(i: int = 0) -> EvalResult:
    return EvalResult(
        Status.OK,
        tests=[Verdict(0, Status.OK, 0.01)],
        timing=Timing("instructions", "instructions", 100.0 + i, 300.0),
        figures={"isolation": "x"},
        evaluator="e/1",
    )


def test_round_trip_marks_cached(tmp_path):
    cache = EvalCache(tmp_path / "eval.sqlite")
    key = CacheKey("task", "src", "e/1#cfg")
    assert cache.get(key) is None
    cache.put(key, result())
    hit = cache.get(key)
    assert hit.cached and hit.speedup == 3.0 and hit.tests[0].status is Status.OK
    assert cache.get(CacheKey("task", "src", "e/1#other")) is None
    assert len(cache) == 1


def _writer(args: tuple[str, int]) -> int:
    path, worker = args
    cache = EvalCache(Path(path))
    for i in range(50):
        cache.put(CacheKey(f"t{worker}", f"s{i}", "e"), result(i))
    return len(cache)


def test_parallel_processes_write_one_file(tmp_path):
    path = tmp_path / "eval.sqlite"
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        pool.map(_writer, [(str(path), w) for w in range(4)])
    cache = EvalCache(path)
    assert len(cache) == 200
    assert cache.get(CacheKey("t3", "s49", "e")).timing.candidate == 149.0


def test_cached_evaluator_serves_the_second_call(tmp_path):
    tests = tmp_path / "tests" / "sum"
    tests.mkdir(parents=True)
    (tests / "input.0.txt").write_text("3\n1 2 3\n")
    (tests / "output.0.txt").write_text("6\n")
    task = Task("sum", "t", "cpp", (HOSTILE / "slow_sum.cpp").read_text(), tests_dir=tests)
    inner = CppEvaluator(CppEvalConfig(timing="wall", repeats=1), tmp_path / "c")
    ev = CachedEvaluator(inner, EvalCache(tmp_path / "eval.sqlite"))
    fast = (HOSTILE / "fast_sum.cpp").read_text()
    first = ev.evaluate(task, fast)
    second = ev.evaluate(task, fast)
    assert not first.cached and second.cached
    assert second.to_dict() | {"cached": False} == first.to_dict()
    many = ev.evaluate_many(task, [fast, (HOSTILE / "wrong_answer.cpp").read_text()])
    assert many[0].cached and not many[1].cached and many[1].status is Status.WRONG_ANSWER
    assert ev.name == inner.name and ev.key(task, fast).evaluator.endswith(inner.config.hash())


def test_first_writer_wins_and_duplicates_in_a_batch_run_once(tmp_path):
    from maxcode.evaluate.result import EvalResult, Timing

    class Counting:
        name = "counting/1"
        calls = 0

        def evaluate(self, task, source):
            Counting.calls += 1
            return EvalResult(Status.OK, timing=Timing("wall", "s", 1.0 / Counting.calls, 1.0))

    task = Task("t", "s", "cpp", "int main(){}")
    cache = EvalCache(tmp_path / "eval.sqlite")
    ev = CachedEvaluator(Counting(), cache)
    results = ev.evaluate_many(task, ["a", "a", "b"])
    assert Counting.calls == 2 and results[0].to_dict() == results[1].to_dict()
    # another process stored "c" first: our later put returns the stored verdict
    key = ev.key(task, "c")
    cache.put(key, EvalResult(Status.WRONG_ANSWER, reason="first"))
    assert cache.put(key, EvalResult(Status.OK)).reason == "first"
