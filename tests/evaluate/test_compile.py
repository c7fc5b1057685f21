"""Content-addressed compile cache: hits, keys, diagnostics, concurrent processes."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest

from maxcode.errors import CompilerError
from maxcode.evaluate.compile import Compiler, first_error_line, trim_log

from .leftovers import processes_naming

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


# Each static_assert spends the compiler's whole constexpr budget: about 7 s apiece on 2 cores.
COMPILE_BOMB = """
template <int K> constexpr unsigned long long spin() {
  unsigned long long s = 0;
  for (unsigned long long i = 0; i < 200000; ++i)
    for (unsigned long long j = 0; j < 200000; ++j) s += (i ^ j) + K;
  return s;
}
static_assert(spin<1>() != 1, ""); static_assert(spin<2>() != 1, "");
static_assert(spin<3>() != 1, ""); static_assert(spin<4>() != 1, "");
int main() {}
"""


def test_a_compile_past_the_limit_is_killed_with_its_subprocesses_and_temp_files(
    tmp_path, monkeypatch
):
    system_tmp = tmp_path / "system-tmp"
    system_tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(system_tmp))
    c = Compiler(tmp_path / "cache", timeout_s=1)
    out = c.compile(COMPILE_BOMB)
    assert not out.ok and not out.cached and "exceeded 1 s" in out.first_error
    # killing only the g++ driver would leave cc1plus running, and its files in TMPDIR
    assert processes_naming(tmp_path) == []
    assert list(system_tmp.iterdir()) == []
    assert list(c.dir.iterdir()) == []  # a timeout is not cached: no binary, no failure


def _flaky_compiler(tmp_path: Path, monkeypatch, kills: int, stderr: str = "") -> Path:
    """A g++ whose first ``kills`` runs die: by SIGKILL, or saying ``stderr`` and exiting 1."""
    script = tmp_path / "flaky-g++"
    die = f'echo "{stderr}" >&2; exit 1' if stderr else "kill -9 $$"
    script.write_text(
        "#!/bin/sh\n"
        '[ "$1" = --version ] && exec g++ --version\n'
        'n=$(cat "$FLAKY_COUNT" 2>/dev/null || echo 0); echo $((n + 1)) > "$FLAKY_COUNT"\n'
        f'if [ "$n" -lt {kills} ]; then {die}; fi\n'
        'exec g++ "$@"\n'
    )
    script.chmod(0o755)
    monkeypatch.setenv("FLAKY_COUNT", str(tmp_path / "runs"))
    return script


def _runs(tmp_path: Path) -> int:
    return int((tmp_path / "runs").read_text())


def test_a_compiler_killed_once_by_a_signal_is_run_again(tmp_path, monkeypatch):
    # a cancelled SLURM job killed g++ mid-compile; that failure, cached, sank the rerun
    c = Compiler(tmp_path / "cache", compiler=str(_flaky_compiler(tmp_path, monkeypatch, 1)))
    out = c.compile(HELLO)
    assert out.ok and out.binary.is_file() and _runs(tmp_path) == 2


def test_a_compiler_killed_twice_is_an_error_and_nothing_is_cached(tmp_path, monkeypatch):
    c = Compiler(tmp_path / "cache", compiler=str(_flaky_compiler(tmp_path, monkeypatch, 2)))
    with pytest.raises(CompilerError, match="killed by SIGKILL twice"):
        c.compile(HELLO)
    assert list(c.dir.iterdir()) == []
    assert c.compile(HELLO).ok and _runs(tmp_path) == 3


def test_a_subprogram_killed_by_a_signal_is_not_cached(tmp_path, monkeypatch):
    said = "g++: fatal error: Killed signal terminated program cc1plus"
    c = Compiler(tmp_path / "cache", compiler=str(_flaky_compiler(tmp_path, monkeypatch, 1, said)))
    first = c.compile(HELLO)
    assert not first.ok and first.first_error == said and not first.cached
    assert c.compile(HELLO).ok and _runs(tmp_path) == 2


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
