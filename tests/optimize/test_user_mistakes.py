"""Small mistakes in `maxcode optimize` read as what they are: one line, exit code 2 (also
with --debug), a compile error called a compile error, the flags on the first line, plurals."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from maxcode.optimize.live import LiveView, plural
from maxcode.search.config import MethodConfig

MAXCODE = [sys.executable, "-m", "maxcode"]
NO_KEYS = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")}


@pytest.fixture
def program(tmp_path: Path) -> tuple[Path, Path]:
    src = tmp_path / "prog.cpp"
    src.write_text(
        '#include <cstdio>\nint main() { int n; scanf("%d", &n); printf("%d\\n", n); }\n'
    )
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "input.0.txt").write_text("3\n")
    (tests / "output.0.txt").write_text("3\n")
    return src, tests


def optimize(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*MAXCODE, "optimize", *args], capture_output=True, text=True, timeout=300, env=NO_KEYS
    )


def last_error(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 2, proc.stderr[-3000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
    assert errors == proc.stderr.strip().splitlines()[-1:], proc.stderr
    return errors[0]


@pytest.mark.parametrize("debug", [False, True])
def test_an_out_that_is_a_file_is_one_line_and_exit_2(program, tmp_path, debug):
    src, tests = program
    out = tmp_path / "taken"
    out.write_text("mine\n")
    proc = optimize(str(src), "--tests", str(tests), "--out", str(out), *(["--debug"] * debug))
    line = last_error(proc)
    assert f"--out {out}: is a file" in line and "Errno" not in line
    assert ("Traceback" in proc.stderr) == debug
    assert out.read_text() == "mine\n"


def test_a_compile_error_of_the_original_is_called_one(program, tmp_path):
    _, tests = program
    bad = tmp_path / "bad.cpp"
    bad.write_text("int main() {\n  return x;\n}\n")
    proc = optimize(
        str(bad), "--tests", str(tests), "--out", str(tmp_path / "o"), "--depth", "1", "--k", "1",
        "--cxxflags", "-std=c++17 -O2", "--timing", "wall",
    )  # fmt: skip
    first = proc.stderr.splitlines()[0]
    assert "flags g++ -std=c++17 -O2," in first and "1 step x 1 evaluation," in first
    line = last_error(proc)
    assert f"{bad} does not compile with g++ -std=c++17 -O2: {bad}:2:" in line
    assert "fails its own tests" not in line


@pytest.mark.parametrize(
    ("flags", "words"),
    [
        (["--cxxflags", "-O2 -o x"], "-o is set by maxcode"),
        (["--cxxflags", "'-O2"], "--cxxflags"),
        (["--min-speedup", "0.9"], "--min-speedup 0.9: must be at least 1"),
    ],
)
def test_bad_flag_values_name_the_flag(program, tmp_path, flags, words):
    src, tests = program
    line = last_error(
        optimize(str(src), "--tests", str(tests), "--out", str(tmp_path / "o"), *flags)
    )
    assert words in line
    assert not (tmp_path / "o").exists()


def test_counts_read_as_english():
    assert [plural(n, "evaluation") for n in (0, 1, 2)] == [
        "0 evaluations",
        "1 evaluation",
        "2 evaluations",
    ]


def test_an_offline_policy_with_nothing_left_says_so(capsys):
    from rich.console import Console

    console = Console(file=sys.stderr, force_terminal=False)
    view = LiveView(MethodConfig(name="m", depth=3, k=2), console, offline=True)
    view.handle("evaluate", {"step": 1, "n": 0, "reasons": ["every rewrite was already tried"]})
    view.handle("evaluate", {"step": 2, "n": 1, "reasons": []})
    err = capsys.readouterr().err
    assert "nothing to evaluate: every rewrite was already tried" in err
    assert "nothing left to try (an --llm model would go further)" in err
    assert "evaluating 1 candidate..." in err and "0 candidates" not in err
