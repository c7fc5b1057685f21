"""The sandbox launcher on ordinary system programs: limits, isolation, cleanup."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from maxcode.evaluate.sandbox import (
    Limits,
    Sandbox,
    SandboxError,
    build_helper,
    isolation_statement,
    signal_name,
)

ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(not ROOT, reason="namespace isolation needs root here")


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory) -> Sandbox:
    return Sandbox(tmp_path_factory.mktemp("sandbox-cache"))


SHORT = Limits(wall_s=5)


def sh(sandbox: Sandbox, script: str, limits: Limits = SHORT, **kw):
    return sandbox.run(["/bin/sh", "-c", script], limits, **kw)


def test_isolation_statement_matches_what_was_detected(sandbox):
    assert sandbox.level == ("full" if ROOT else "none: not root")  # EvalResult.sandbox
    if ROOT:
        assert sandbox.namespaces and sandbox.isolation == isolation_statement("")
        assert "no network" in sandbox.isolation
    else:
        assert sandbox.isolation == isolation_statement("not root")
        assert sandbox.isolation.startswith("NO namespaces (not root)")


def test_stdin_stdout_exit_status_and_measurements(sandbox, tmp_path):
    inp = tmp_path / "in.txt"
    inp.write_text("hello sandbox\n")
    out = sh(sandbox, "cat; echo err >&2; exit 3", stdin_path=inp)
    assert out.stdout == b"hello sandbox\n" and out.stderr == b"err\n"
    assert out.exit_code == 3 and out.signal is None and not out.timed_out
    assert out.wall_s > 0 and out.maxrss_kb > 0


def test_environment_is_scrubbed(sandbox, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-secret")
    out = sh(sandbox, "env")
    names = sorted(line.split("=", 1)[0] for line in out.stdout.decode().splitlines())
    assert "ANTHROPIC_API_KEY" not in names and "HOME" not in names
    assert set(names) <= {"PATH", "LANG", "LC_ALL", "PWD", "SHLVL", "_"}


@needs_root
def test_private_empty_cwd_hidden_paths_and_own_uid(sandbox, tmp_path):
    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "answer.txt").write_text("hidden-answer")  # text no uid or path can contain
    out = sh(sandbox, f"pwd; ls -A; id -u; cat {secret}/answer.txt", hide=[secret])
    lines = out.stdout.decode().split("\n")
    assert lines[0] == "/tmp" and lines[1] != "" and int(lines[1]) >= 61000  # empty dir, own uid
    assert b"hidden-answer" not in out.stdout


@needs_root
def test_no_network_interfaces_but_loopback_down(sandbox):
    out = sh(sandbox, "cat /proc/net/dev")
    ifaces = [ln.split(":")[0].strip() for ln in out.stdout.decode().splitlines()[2:]]
    assert ifaces == ["lo"]


def test_wall_limit_kills_the_whole_group(sandbox):
    start = time.monotonic()
    out = sh(sandbox, "sleep 30 & sleep 30 & wait", Limits(wall_s=0.5))
    assert out.timed_out and time.monotonic() - start < 3


def test_cpu_limit(sandbox):
    out = sh(sandbox, "while :; do :; done", Limits(wall_s=10, cpu_s=1))
    # Killed by the CPU limit (SIGXCPU/SIGKILL), not the wall clock; the kernel's CPU
    # accounting of the killed process lags under load, so only a rough lower bound.
    assert out.signal in (9, 24) and not out.timed_out and out.cpu_s >= 0.5


def test_output_cap_stops_the_program(sandbox):
    start = time.monotonic()
    out = sh(sandbox, "yes", Limits(wall_s=10, output_bytes=100_000))
    assert out.output_limited and len(out.stdout) == 100_000
    assert time.monotonic() - start < 5


def test_file_size_limit(sandbox):
    out = sh(
        sandbox, "head -c 5000000 /dev/zero > big; echo $?", Limits(wall_s=5, file_bytes=1_000_000)
    )
    assert out.stdout.strip() != b"0"  # write failed (SIGXFSZ or error)


@needs_root
def test_process_limit_stops_a_fork_storm(sandbox):
    script = "for i in $(seq 40); do sleep 3 & done; echo started all"
    capped = sh(sandbox, script, Limits(wall_s=5, processes=8))
    assert capped.exit_code != 0 and b"started all" not in capped.stdout
    assert b"fork" in capped.stderr.lower()
    roomy = sh(sandbox, script, Limits(wall_s=5, processes=64))
    assert roomy.stdout == b"started all\n" and roomy.wall_s < 2  # sleepers killed at exit


def test_the_launcher_built_under_a_relative_cache_dir_starts_from_any_directory(
    tmp_path, monkeypatch
):
    """``--cache-dir .work/cache`` on the command line: the CUDA evaluator starts the launcher
    from its workers' own working directories, so the path it gets must not be relative."""
    monkeypatch.chdir(tmp_path)
    helper = build_helper(Path("relative-cache"))
    proc = subprocess.run([helper, "--no-such-option"], cwd="/", capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stderr.startswith("mcbox: ")


def test_missing_program_is_a_sandbox_error(sandbox):
    with pytest.raises(SandboxError, match="exec"):
        sandbox.run(["/nonexistent/prog"], Limits())


def test_limits_are_validated():
    with pytest.raises(ValueError, match="memory_mb"):
        Limits(memory_mb=0)


def test_copied_program_runs_from_private_dir(sandbox, tmp_path):
    prog = tmp_path / "hello.sh"
    prog.write_text("#!/bin/sh\necho copied\n")
    prog.chmod(0o755)
    out = sandbox.run([Sandbox.PROGRAM], Limits(), copy_program=prog)
    assert out.stdout == b"copied\n"
    assert Path(prog).read_text().startswith("#!")


def test_fallback_without_namespaces_keeps_limits_and_says_so(
    tmp_path_factory, tmp_path, monkeypatch
):
    """The path taken when not root, forced here: launcher with --no-ns and no uid switch."""
    monkeypatch.setenv("MY_SECRET_TOKEN", "x")
    box = Sandbox(tmp_path_factory.mktemp("fallback-cache"))
    box.namespaces = False
    box.isolation = isolation_statement("forced by the test")
    assert box.isolation.startswith("NO namespaces")
    prog = tmp_path / "p.sh"
    prog.write_text("#!/bin/sh\npwd\nenv | grep -c SECRET\nsleep 30 &\nsleep 30\n")
    prog.chmod(0o755)
    start = time.monotonic()
    out = box.run([Sandbox.PROGRAM], Limits(wall_s=0.5), copy_program=prog)
    assert out.timed_out and time.monotonic() - start < 3
    cwd = out.stdout.decode().splitlines()[0]
    assert "mcbox-" in cwd and not Path(cwd).exists()  # private temp dir, removed afterwards
    assert out.stdout.decode().splitlines()[1] == "0"


def test_cpu_slots_are_exclusive_and_released():
    import threading

    from maxcode.evaluate.sandbox import cpu_slot

    cpus = [900001, 900002]  # lock names only; no pinning happens here
    with cpu_slot(cpus) as a, cpu_slot(cpus) as b:
        assert {a, b} == set(cpus)
        got: list[int] = []
        waiter = threading.Thread(target=lambda: got.append(cpu_slot(cpus).__enter__()))
        waiter.start()
        waiter.join(0.2)
        assert got == []  # both taken: the third evaluation waits
    waiter.join(2)
    assert got and got[0] in cpus


def test_signal_name_names_real_time_signals_python_has_no_name_for():
    # a candidate may die by SIGRTMIN+6; the reason must still be written, not raise
    assert signal_name(9) == "SIGKILL" and signal_name(40) == "signal 40"
