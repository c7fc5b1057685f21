"""`maxcode optimize` as a user meets it: budget, resume, errors, timing, live start.

Real runs of the command (subprocesses), a real SDK client against the local fake server,
real compiles; each test names the problem it covers.
"""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from maxcode.errors import LLMConfigError
from maxcode.llm.config import role_config_from_dict
from maxcode.llm.fake_servers import FakeLLMServer
from maxcode.llm.prices import PRICES, load_prices_file, lookup
from maxcode.records import read_jsonl
from maxcode.tasks.builtin import materialize_builtin_cpp

PROBLEM = "io_prefix_sums_endl"
MAXCODE = [sys.executable, "-m", "maxcode"]
NO_KEYS = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")}


@pytest.fixture(scope="module")
def program(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("suite")
    task = materialize_builtin_cpp(root / "suite", n_tests=3, problems=[PROBLEM])[0]
    src = root / "slow.cpp"
    src.write_text(task.reference_source)
    return src, task.tests_dir


def optimize(*args: str, env: dict | None = None, timeout: float = 600):
    return subprocess.run(
        [*MAXCODE, "optimize", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env or NO_KEYS,
    )


def one_line_error(proc: subprocess.CompletedProcess) -> str:
    """Exit 2, no traceback, and the error in one line, the last (progress lines may precede)."""
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    lines = proc.stderr.strip().splitlines()
    errors = [line for line in lines if line.startswith("error: ")]
    assert errors == lines[-1:], proc.stderr
    return errors[0]


def snapshot(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


# ---- 1. cost: prices and a budget that stops spending -----------------------------------


def test_price_table_prices_the_named_models_with_date_and_source():
    for model in ("openai:gpt-4o", "anthropic:claude-3-7-sonnet-20250219"):
        price = PRICES[model]
        assert price.input > 0 and price.output > price.input and price.cached_input < price.input
        assert price.as_of and price.source.startswith("https://")
    gpt4o = role_config_from_dict("generator", {"backend": "openai", "model": "gpt-4o"})
    assert gpt4o.cost(1_000_000, 0) == 2.5 and gpt4o.cost(1_000_000, 0, 1_000_000) == 1.25
    assert gpt4o.cost(0, 1_000_000) == 10.0
    assert role_config_from_dict("generator", {"backend": "openai", "model": "x"}).price is None
    own = role_config_from_dict(
        "generator",
        {
            "backend": "openai",
            "model": "gpt-4o",
            "price_input_per_mtok": 1.0,
            "price_output_per_mtok": 2.0,
        },
    )
    assert own.cost(1_000_000, 1_000_000) == 3.0  # params override the table
    assert lookup("hf", "models/anything").output == 0.0  # local models are free


def test_prices_file_is_read_strictly(tmp_path):
    good = tmp_path / "p.json"
    good.write_text('{"openai:mine": {"input": 1, "output": 4}}')
    assert load_prices_file(good)["openai:mine"].cached_input == 1.0
    bad = tmp_path / "bad.json"
    bad.write_text('{"openai:mine": {"input": 1}}')
    with pytest.raises(LLMConfigError, match="needs input and output"):
        load_prices_file(bad)


@pytest.mark.slow
def test_dollar_budget_stops_before_the_cap_with_the_table_price(program, tmp_path):
    src, tests = program
    out = tmp_path / "o"
    with FakeLLMServer() as server:  # no OPENAI_API_KEY: a local server needs none
        proc = optimize(
            str(src),
            "--tests",
            str(tests),
            "--out",
            str(out),
            "--depth",
            "6",
            "--k",
            "1",
            "--llm",
            "openai:gpt-4o",
            "--base-url",
            server.openai_base_url,
            "--max-tokens",
            "256",
            "--budget-usd",
            "0.01",
            "--timing",
            "wall",
        )
        calls = server.count()
    assert proc.returncode == 0, proc.stderr[-3000:]
    end = list(read_jsonl(out / "run.jsonl"))[-1]
    usage = end["usage"]
    assert calls == usage["calls"] > 0  # it spent, then stopped
    assert 0 < usage["cost_usd"] <= 0.01  # never crossed the cap
    expected = (usage["input_tokens"] * 2.5 + usage["output_tokens"] * 10.0) / 1e6
    assert usage["cost_usd"] == pytest.approx(expected)  # from the price table
    assert end["stopped_by"].startswith("budget") and len(end["step_rewards"]) < 6
    assert "Stopped for the budget" in proc.stdout
    assert "$0.01" in proc.stderr.splitlines()[0] and "gpt-4o at $2.5/$10" in proc.stderr
    html = (out / "report.html").read_text()
    assert f"${usage['cost_usd']:.4f}" in html and "budget" in html


def test_dollar_budget_with_an_unknown_price_is_refused_before_any_call(program, tmp_path):
    src, tests = program
    with FakeLLMServer() as server:
        proc = optimize(
            str(src),
            "--tests",
            str(tests),
            "--out",
            str(tmp_path / "o"),
            "--llm",
            "openai:unknown-model",
            "--base-url",
            server.openai_base_url,
            "--budget-usd",
            "1",
        )
        assert server.count() == 0
    line = one_line_error(proc)
    assert "--price-in" in line and "--price-out" in line and "--prices" in line
    assert not (tmp_path / "o").exists()


# ---- 2. resume that cannot lose work ----------------------------------------------------


@pytest.fixture(scope="module")
def finished_run(program, tmp_path_factory) -> Path:
    src, tests = program
    out = tmp_path_factory.mktemp("run") / "out"
    proc = optimize(
        str(src),
        "--tests",
        str(tests),
        "--out",
        str(out),
        "--depth",
        "1",
        "--k",
        "2",
        "--timing",
        "wall",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


def test_resume_into_another_programs_run_refuses_and_changes_nothing(
    program, finished_run, tmp_path
):
    _, tests = program
    other = tmp_path / "other.cpp"
    other.write_text(
        "#include <cstdio>\nint main() { long long s = 0, x; "
        'while (scanf("%lld", &x) == 1) s += x; printf("%lld\\n", s); }\n'
    )
    before = snapshot(finished_run)
    proc = optimize(
        str(other),
        "--tests",
        str(tests),
        "--out",
        str(finished_run),
        "--resume",
        "--depth",
        "1",
        "--k",
        "2",
        "--timing",
        "wall",
    )
    line = one_line_error(proc)
    assert "target.file: 'slow.cpp' in the records, 'other.cpp' now" in line
    assert "Nothing in --out was changed" in line
    assert snapshot(finished_run) == before  # byte for byte
    proc = optimize(
        str(program[0]),
        "--tests",
        str(tests),
        "--out",
        str(finished_run),
        "--resume",
        "--depth",
        "1",
        "--k",
        "3",
        "--timing",
        "wall",
    )
    assert "settings.method.k: 2 in the records, 3 now" in one_line_error(proc)
    assert snapshot(finished_run) == before


@pytest.mark.slow
def test_resume_with_a_larger_depth_extends_and_keeps_every_record(program, finished_run, tmp_path):
    import shutil

    src, tests = program
    out = tmp_path / "out"
    shutil.copytree(finished_run, out)
    before = (out / "run.jsonl").read_bytes()
    best_before = (out / "best.cpp").read_bytes() if (out / "best.cpp").exists() else None
    proc = optimize(
        str(src),
        "--tests",
        str(tests),
        "--out",
        str(out),
        "--resume",
        "--depth",
        "2",
        "--k",
        "2",
        "--timing",
        "wall",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (out / "run.jsonl").read_bytes().startswith(before)  # every record kept
    records = list(read_jsonl(out / "run.jsonl"))
    assert [r["kind"] for r in records].count("run_extend") == 1
    assert len(records[-1]["step_rewards"]) == 2
    assert "resumed: replayed 1 finished steps" in proc.stderr
    best = (out / "best.cpp").read_bytes() if (out / "best.cpp").exists() else None
    winner = next(r for r in records if r.get("candidate_id") == records[-1]["best_candidate_id"])
    assert best == winner["source"].encode() or best == best_before


def test_a_fresh_run_never_overwrites_files_in_out(program, tmp_path):
    src, tests = program
    out = tmp_path / "o"
    out.mkdir()
    (out / "best.cpp").write_text("// the user's own file\n")
    proc = optimize(str(src), "--tests", str(tests), "--out", str(out))
    assert "best.cpp" in one_line_error(proc)
    assert (out / "best.cpp").read_text() == "// the user's own file\n"


# ---- 3. one line, exit 2, no traceback --------------------------------------------------


def test_common_mistakes_are_one_line_naming_the_flag(program, tmp_path):
    src, tests = program
    base = [str(src), "--tests", str(tests), "--out", str(tmp_path / "o")]
    assert "--depth 0" in one_line_error(optimize(*base, "--depth", "0"))
    assert "--kind rust: choose cpp or cuda" in one_line_error(optimize(*base, "--kind", "rust"))
    line = one_line_error(optimize(*base, "--timing", "bogus"))
    assert "--timing bogus" in line and "instructions" in line
    assert "--make-tests 0" in one_line_error(optimize(*base, "--make-tests", "0"))
    line = one_line_error(optimize(*base, "--llm", "openai:gpt-4o"))  # no key, not local
    assert "OPENAI_API_KEY" in line and "nothing was spent" in line
    line = one_line_error(optimize(*base, "--method", "nope"))
    assert "--method nope" in line and "cuda-llm" in line
    line = one_line_error(optimize(*base, "--params", str(tmp_path / "missing.yaml")))
    assert "--params" in line and "missing.yaml: parameter file not found" in line
    assert not (tmp_path / "o").exists()


def test_wrong_expected_outputs_name_the_test_and_the_fix(program, tmp_path):
    src, tests = program
    wrong = tmp_path / "tests"
    wrong.mkdir()
    (wrong / "input.0.txt").write_bytes((tests / "input.0.txt").read_bytes())
    (wrong / "output.0.txt").write_text("42\n")
    line = one_line_error(
        optimize(str(src), "--tests", str(wrong), "--out", str(tmp_path / "o"), "--timing", "wall")
    )
    assert f"fails --tests {wrong}" in line and "test 0" in line and "--make-tests" in line
    debug = optimize(
        str(src), "--tests", str(wrong), "--out", str(tmp_path / "d"), "--timing", "wall", "--debug"
    )
    assert debug.returncode != 0 and "Traceback" in debug.stderr  # --debug shows it


def test_a_compile_error_names_the_users_file(program, tmp_path):
    _, tests = program
    bad = tmp_path / "mine.cpp"
    bad.write_text("int main() {\n  return x;\n}\n")
    line = one_line_error(
        optimize(str(bad), "--tests", str(tests), "--out", str(tmp_path / "o"), "--timing", "wall")
    )
    assert f"{bad}:2:" in line and "main.cpp" not in line


# ---- 4. timing: repeatable by default ---------------------------------------------------


@contextmanager
def live_run(src: Path, tests: Path, out: Path) -> Iterator[subprocess.Popen]:
    """`maxcode optimize` in its own process group, its stderr piped line by line, that
    Ctrl-C (SIGINT to the group) reaches; killed if still running at the end."""
    proc = subprocess.Popen(
        [*MAXCODE, "optimize", str(src), "--tests", str(tests), "--out", str(out)],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        env=NO_KEYS,
        start_new_session=True,
        # Ctrl-C as in a terminal: a pytest started in the background (``cmd &``, nohup) has
        # SIGINT ignored, the run inherits that and rightly keeps running (it exited 0 here).
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)


def test_cpp_timing_defaults_to_instruction_counts_and_says_so(program, tmp_path):
    src, tests = program
    with live_run(src, tests, tmp_path / "o") as proc:
        first = proc.stderr.readline()
        assert "timing instructions" in first and "--timing wall" in first
        # ---- 5. a live start: the first line names target, policy, evaluator, tests, budget,
        # then a progress line for the original's evaluation, before any record exists.
        for part in (str(src), "policy offline", "evaluator cpp", f"tests {tests}", "budget"):
            assert part in first
        assert proc.stderr.readline().startswith("evaluating the original on 3 tests")
        second = proc.stderr.readline()
        assert second.startswith("original: correct on 3 tests") and "instructions" in second
        assert proc.stderr.readline().startswith("[step 1/")  # piped, line by line
        os.killpg(proc.pid, signal.SIGINT)
        rest = proc.stderr.read()
        assert proc.wait(timeout=120) == 130, rest
        assert "resume with --resume" in rest and "Traceback" not in rest


def test_ctrl_c_before_the_search_says_nothing_was_recorded(program, tmp_path):
    src, tests = program
    out = tmp_path / "o"
    with live_run(src, tests, out) as proc:
        proc.stderr.readline()
        assert proc.stderr.readline().startswith("evaluating the original")
        os.killpg(proc.pid, signal.SIGINT)  # while the original compiles and runs
        rest = proc.stderr.read()
        assert proc.wait(timeout=120) == 130, rest
        assert "before the search began, so nothing was recorded" in rest, rest
        assert not (out / "report.html").exists() and "Traceback" not in rest


# ---- 5. a live start --------------------------------------------------------------------


@pytest.mark.slow
def test_generated_tests_are_named_and_a_resumed_run_says_what_it_replayed(program, tmp_path):
    src, tests = program
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    for p in tests.glob("input.*.txt"):
        (inputs / p.name).write_bytes(p.read_bytes())
    out = tmp_path / "o"
    args = [
        str(src),
        "--tests",
        str(inputs),
        "--make-tests",
        "2",
        "--out",
        str(out),
        "--depth",
        "2",
        "--k",
        "2",
        "--timing",
        "wall",
    ]
    proc = subprocess.Popen(
        [*MAXCODE, "optimize", *args],
        stderr=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        env=NO_KEYS,
        start_new_session=True,
    )
    run = out / "run.jsonl"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and not any(r["kind"] == "step_end" for r in read_jsonl(run)):
        time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    resumed = optimize(*args, "--resume")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "resumed: replayed 1 finished steps" in resumed.stderr
    made = [str(out / "tests" / f"output.{i}.txt") for i in range(2)]
    assert all(m in resumed.stderr for m in made)  # terminal
    html = (out / "report.html").read_text()
    assert all(m in html for m in made)  # report


# ---- and the command line itself ----------------------------------------------------------


def test_version_and_upper_case_usage():
    version = subprocess.run([*MAXCODE, "--version"], capture_output=True, text=True)
    assert version.returncode == 0 and version.stdout.startswith("maxcode ")
    usage = subprocess.run([*MAXCODE, "optimize", "--help"], capture_output=True, text=True)
    assert "TARGET" in usage.stdout and "{target}" not in usage.stdout
    assert "--tests" in usage.stdout and "DIR" in usage.stdout
    for command in (["eval", "cpp"], ["r2g", "evaluate"], ["rollout"], ["llm", "cache-info"]):
        help_text = subprocess.run(
            [*MAXCODE, *command, "--help"], capture_output=True, text=True
        ).stdout
        line = next(x for x in help_text.splitlines() if "Usage:" in x)
        names = line.split("[OPTIONS]")[1].split()
        assert names and all(n.strip("{}[].") == n.strip("{}[].").upper() for n in names), line
