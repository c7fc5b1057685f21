"""The offline critic: the right diagnosis for each kind of feedback, never a crash."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from maxcode.critique.offline import OfflineCritic
from maxcode.evaluate import result as ev
from maxcode.evaluate.result import EvalResult, Status, Timing
from maxcode.tasks.builtin import load_builtin_problem
from maxcode.tasks.model import Task

CRITIC = OfflineCritic()


def task_of(
    source: str = "int main() {}", language: str = "cpp", tests_dir: Path | None = None
) -> Task:
    return Task("t", "unit", language, source, tests_dir=tests_dir)


def ok(speedup: float = 1.0, **kw) -> EvalResult:
    return EvalResult(Status.OK, timing=Timing("wall", "s", 1.0 / speedup, 1.0), **kw)


def first_line(task: Task, source: str, result: EvalResult) -> str:
    critique = CRITIC.critique(task, source, result)
    assert critique.offline and critique.critic == "offline-critic/1"
    assert critique.text.strip()
    return critique.text.splitlines()[0]


def test_compile_error_quotes_first_error_and_explains():
    log = (
        "prog.cpp: In function 'int main()':\n"
        "prog.cpp:5:3: error: 'x' was not declared in this scope\n"
        "prog.cpp:9:1: error: expected ';' before '}' token\n"
    )
    result = EvalResult(Status.COMPILE_ERROR, reason="compile error", compile_log=log)
    text = CRITIC.critique(task_of(), "int main() { x = 1; }", result).text
    head = text.splitlines()[0]
    assert head.startswith("Compile error: prog.cpp:5:3: error: 'x' was not declared")
    assert "not declared here" in text


def test_const_correctness_compile_error_is_explained():
    log = (
        "a.cpp:3:5: error: passing 'const std::vector<int>' as 'this' argument discards qualifiers"
    )
    text = CRITIC.critique(task_of(), "", EvalResult(Status.COMPILE_ERROR, compile_log=log)).text
    assert "const" in text.splitlines()[1]


def test_wrong_answer_names_first_mismatch():
    tests = [
        ev.TestVerdict(0, Status.OK, 0.01),
        ev.TestVerdict(1, Status.WRONG_ANSWER, 0.01, "line 3: expected '42' got '41'"),
        ev.TestVerdict(2, Status.WRONG_ANSWER, 0.01, "line 1: expected '1' got '2'"),
    ]
    result = EvalResult(Status.WRONG_ANSWER, reason="test 1: wrong", tests=tests)
    text = CRITIC.critique(task_of(), "int main() {}", result).text
    assert text.splitlines()[0].startswith("Wrong answer on test 1")
    assert "line 3: expected '42' got '41'" in text and "1/3 tests passed" in text


def test_wrong_float_answer_points_at_evaluation_order():
    tests = [
        ev.TestVerdict(0, Status.WRONG_ANSWER, None, "line 1: expected '0.3000001' got '0.3000002'")
    ]
    text = CRITIC.critique(task_of(), "", EvalResult(Status.WRONG_ANSWER, tests=tests)).text
    assert "floating-point" in text


@pytest.mark.parametrize(
    ("status", "reason", "expect_head", "expect_body"),
    [
        (
            Status.RUNTIME_ERROR,
            "killed by signal 11 (SIGSEGV)",
            "Runtime error on test 0",
            "out-of-bounds",
        ),
        (Status.RUNTIME_ERROR, "killed by signal 8 (SIGFPE)", "Runtime error", "division"),
        (Status.TIMEOUT, "exceeded the 10 s limit", "Timed out on test 0", "infinite loop"),
        (
            Status.MEMORY_LIMIT,
            "allocation failed under the 512 MiB limit",
            "Memory limit exceeded",
            "reserve",
        ),
        (Status.OUTPUT_LIMIT, "stdout exceeded 1000 bytes", "Output limit exceeded", "output loop"),
        (
            Status.NO_CODE,
            "no code block in completion",
            "No program to evaluate",
            "complete program",
        ),
        (
            Status.UNSUPPORTED,
            "no transformation applies",
            "No program to evaluate",
            "complete program",
        ),
        (Status.REJECTED, "timing-event patching", "Rejected before running", "flagged"),
    ],
)
def test_each_failure_kind_gets_its_diagnosis(status, reason, expect_head, expect_body):
    tests = [ev.TestVerdict(0, status, None, reason)]
    text = CRITIC.critique(
        task_of(), "int main() {}", EvalResult(status, reason=reason, tests=tests)
    ).text
    assert text.splitlines()[0].startswith(expect_head), text
    assert expect_body in text, text


def _suite_task(tmp_path: Path, source: str, input_bytes: int) -> Task:
    d = tmp_path / "tests"
    d.mkdir(exist_ok=True)
    (d / "input.0.txt").write_text("1 " * (input_bytes // 2))
    (d / "output.0.txt").write_text("1\n")
    return task_of(source, tests_dir=d)


def test_io_heavy_program_with_slow_streams_is_io_bound(tmp_path):
    source = load_builtin_problem("io_prefix_sums_endl").slow_source
    task = _suite_task(tmp_path, source, 2_000_000)
    text = CRITIC.critique(task, source, ok(1.0)).text
    assert "I/O-bound" in text.splitlines()[0] and "endl" in text.splitlines()[0]
    assert "sync_with_stdio(false)" in text and "2.0 MB" in text


def test_runtime_growth_reveals_quadratic_work():
    source = load_builtin_problem("algo_inversions").slow_source
    sizes = [1000, 2000, 4000, 8000]
    tests = [ev.TestVerdict(i, Status.OK, 1e-8 * n * n) for i, n in enumerate(sizes)]
    result = ok(1.0, tests=tests, figures={"input_sizes": sizes})
    text = CRITIC.critique(task_of(source), source, result).text
    assert "algorithmic inefficiency" in text.splitlines()[0]
    assert "n^2.0" in text


def test_evaluator_test_rows_give_sizes_and_linear_growth_is_not_flagged():
    source = '#include <cstdio>\nint main() { int x; scanf("%d", &x); printf("%d", x); }\n'
    rows = [
        {"index": i, "input_bytes": n, "wall_s": 1e-6 * n} for i, n in enumerate([1e4, 1e5, 1e6])
    ]
    tests = [ev.TestVerdict(i, Status.OK, r["wall_s"]) for i, r in enumerate(rows)]
    text = CRITIC.critique(
        task_of(source), source, ok(1.0, tests=tests, figures={"tests": rows})
    ).text
    assert "n^1.0" in text and "algorithmic" not in text.splitlines()[0]


def test_with_instruction_counts_the_growth_reading_ignores_wall_time_noise():
    """In a repeatable timing mode the critique (and what the reward-to-go model learns from
    it) must not change with the machine's load: the per-test counts decide, not wall time."""
    source = load_builtin_problem("algo_inversions").slow_source
    sizes = [1000, 2000, 4000, 8000]
    texts = set()
    for noise in ([1.0, 1.0, 1.0, 1.0], [0.9, 3.0, 0.5, 1.2]):  # flat, jittery wall times
        rows = [
            {"index": i, "input_bytes": n, "wall_s": w, "instructions": 40 * n * n}
            for i, (n, w) in enumerate(zip(sizes, noise, strict=True))
        ]
        tests = [ev.TestVerdict(i, Status.OK, r["wall_s"]) for i, r in enumerate(rows)]
        timing = Timing("instructions", "instructions", 1.0, 1.0)
        result = EvalResult(Status.OK, tests=tests, timing=timing, figures={"tests": rows})
        texts.add(CRITIC.critique(task_of(source), source, result).text)
    assert len(texts) == 1
    (text,) = texts
    assert "n^2.0" in text and "algorithmic inefficiency" in text.splitlines()[0]


@pytest.mark.parametrize(
    ("problem", "kind"),
    [
        ("mem_column_sum", "memory-bound"),
        ("mem_linked_list", "memory-bound"),
        ("mem_pair_map_grid", "memory-bound"),
        ("const_pass_by_value", "constant-factor"),
        ("const_map_counts", "constant-factor"),
        ("const_modulo_inner", "constant-factor"),
        ("algo_strlen_loop", "algorithmic"),
    ],
)
def test_source_patterns_of_the_suite_are_diagnosed(problem, kind):
    source = load_builtin_problem(problem).slow_source
    head = first_line(task_of(source), source, ok(1.0))
    assert kind in head, head


def test_profile_hotspots_are_reported_and_io_symbols_count():
    source = load_builtin_problem("io_read_heavy_sum").slow_source
    profile = {
        "tool": "callgrind",
        "functions": [
            {
                "function": "???:std::istream::operator>>(long long&) [/usr/lib/libstdc++.so.6]",
                "instructions": 9,
                "share_pct": 71.0,
            },
            {"function": "prog.cpp:main", "instructions": 2, "share_pct": 12.5},
        ],
    }
    text = CRITIC.critique(task_of(source), source, ok(1.3, profile=profile)).text
    assert "I/O-bound" in text.splitlines()[0]
    assert "std::istream::operator>>(long long&) 71%" in text


def test_speed_and_noise_are_stated():
    result = EvalResult(
        Status.OK,
        timing=Timing("wall", "s", 0.98, 1.0, candidate_spread=0.1, reference_spread=0.05),
    )
    text = CRITIC.critique(task_of(), "int main() {}", result).text
    assert "about as fast" in text.splitlines()[0] and "noise" in text
    assert "2.00x faster" in first_line(task_of(), "int main() {}", ok(2.0))
    assert "2.00x slower" in first_line(task_of(), "int main() {}", ok(0.5))


@pytest.mark.parametrize(
    ("figures", "expect"),
    [
        (
            {
                "achieved_bandwidth_gbs": 2900,
                "peak_bandwidth_gbs": 3350,
                "achieved_tflops": 5,
                "peak_tflops": 990,
            },
            "memory-bandwidth bound (87%",
        ),
        (
            {
                "achieved_bandwidth_gbs": 300,
                "peak_bandwidth_gbs": 3350,
                "achieved_tflops": 700,
                "peak_tflops": 990,
            },
            "compute bound (71%",
        ),
        (
            {
                "achieved_bandwidth_gbs": 100,
                "peak_bandwidth_gbs": 3350,
                "achieved_tflops": 1,
                "peak_tflops": 990,
            },
            "latency or launch bound",
        ),
        ({"achieved_bandwidth_gbs": 1500, "peak_bandwidth_gbs": 3350}, "partly memory bound"),
        ({}, "bottleneck unknown"),
    ],
)
def test_cuda_roofline_reading(figures, expect):
    head = first_line(task_of("class Model: ...", "cuda"), "kernel", ok(1.5, figures=figures))
    assert expect in head, head


@pytest.mark.parametrize(
    "result",
    [
        EvalResult(Status.OK),
        EvalResult(Status.OK, timing=Timing("wall", "s", 0.0, 1.0)),
        ok(
            1.1,
            figures={"input_sizes": ["big", None, -1, math.nan]},
            tests=[ev.TestVerdict(0, Status.OK, None)],
        ),
        ok(1.1, figures={"input_sizes": {"0": math.inf, "x": 3}, "tests": "garbage"}),
        ok(
            1.1,
            figures={"achieved_bandwidth_gbs": "fast", "peak_bandwidth_gbs": 0},
            profile={"functions": [None, {"share_pct": "x"}, 3]},
        ),
        ok(1.1, profile={"error": "callgrind failed"}),
        EvalResult(Status.COMPILE_ERROR, reason="", compile_log=""),
        EvalResult(Status.WRONG_ANSWER, reason="", tests=[]),
        EvalResult(
            Status.RUNTIME_ERROR, tests=[ev.TestVerdict(3, Status.RUNTIME_ERROR, math.nan, "")]
        ),
    ],
)
@pytest.mark.parametrize("language", ["cpp", "cuda"])
def test_garbage_feedback_never_crashes(result, language):
    missing_tests = task_of("int main() {", language, tests_dir=Path("/nonexistent/tests"))
    for source in ["", "\x00\xff{{{ garbage", "int main() { for (;;) for (;;) ; }"]:
        assert first_line(missing_tests, source, result)


def test_cuda_kernel_profile_names_hot_kernels_and_launch_count():
    profile = {
        "tool": "torch.profiler",
        "total_us": 42.0,
        "kernels_per_call": 3,
        "reference_total_us": 30.5,
        "functions": [
            {"function": "add_kernel(float*, int)", "share_pct": 70.0, "time_us": 29.4},
            {"function": "relu_kernel(float*, int)", "share_pct": 30.0, "time_us": 12.6},
        ],
    }
    text = CRITIC.critique(task_of("class Model: ...", "cuda"), "k", ok(1.2, profile=profile)).text
    assert "3 kernel launches and 42.0 us" in text
    assert "add_kernel(float*, int) 70%" in text and "30.5 us" in text
    assert "fuse the 3 launches" in text and "(add_kernel(float*, int))" in text


def test_single_kernel_profile_does_not_suggest_fusing_launches():
    profile = {
        "total_us": 5.0,
        "kernels_per_call": 1,
        "functions": [{"function": "k", "share_pct": 100.0}],
    }
    text = CRITIC.critique(task_of("class Model: ...", "cuda"), "k", ok(1.2, profile=profile)).text
    assert "top kernels: k 100%" in text and "fuse the" not in text
