"""Content-addressed compile cache: hits, keys, diagnostics, concurrent processes."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest

from maxcode.evaluate.compile import Compiler, CompilerError, first_error_line, trim_log

HELLO = '#include <cstdio>\nint main() { puts("hi"); }\n'


def test_second_compile_is_a_cache_hit(tmp_path):
    c = Compiler(tmp_path)
    first, second = c.compile(HELLO), c.compile(HELLO)
    assert first.ok and not first.cached and first.seconds > 0
    assert second.ok and second.cached and second.binary == first.binary
    assert first.binary.stat().st_mode & 0o755 == 0o755


def test_key_covers_flags_compiler_version_and_source(tmp_path):
    o3, o0 = Compiler(tmp_path), Compiler(tmp_path, flags=("--std=c++17", "-O0"))
    assert o3.key(HELLO) != o0.key(HELLO)
    assert o3.key(HELLO) != o3.key(HELLO + "\n")


def test_compile_error_keeps_first_error_and_is_cached(tmp_path):
    c = Compiler(tmp_path)
    bad = "int main() { return missing_name; }\n"
    first = c.compile(bad)
    assert not first.ok and first.binary is None
    assert "missing_name" in first.first_error and "main.cpp" in first.log
    again = c.compile(bad)
    assert again.cached and again.first_error == first.first_error


def test_missing_compiler_is_a_clear_error(tmp_path):
    with pytest.raises(CompilerError, match="not found on PATH"):
        Compiler(tmp_path, compiler="no-such-g++")


def test_trim_log_keeps_the_head():
    log = "main.cpp:1: error: first\n" + "x" * 10_000
    trimmed = trim_log(log, 100)
    assert trimmed.startswith("main.cpp:1: error: first") and "more characters" in trimmed
    assert first_error_line(log) == "main.cpp:1: error: first"


def _compile_in_process(cache: str) -> str:
    out = Compiler(Path(cache)).compile(HELLO + "// concurrent\n")
    return str(out.binary) if out.ok else "failed"


def test_concurrent_processes_share_one_binary(tmp_path):
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        paths = pool.map(_compile_in_process, [str(tmp_path)] * 4)
    assert len(set(paths)) == 1 and paths[0] != "failed"
    leftovers = [p for p in (tmp_path / "bin").iterdir() if p.name.startswith(".")]
    assert leftovers == []
