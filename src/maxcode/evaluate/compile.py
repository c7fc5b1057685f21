"""Compile C++ sources into a content-addressed binary cache.

The key is source + compiler + flags + the compiler's version line, so a cached binary is
reused by every process (several Snakemake jobs share one cache) and a compiler upgrade
never serves a stale binary. Binaries and failures are published by atomic rename, so
concurrent compiles of the same source race harmlessly. Only a failure the compiler
explained is cached: a compiler killed by a signal (a cancelled job, the OOM killer) or by
the time limit says nothing about the source.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from maxcode.errors import CompilerError
from maxcode.evaluate.sandbox import signal_name

PIE_FLAGS = ("--std=c++17", "-O3")
LOG_LIMIT = 4000  # characters of diagnostics kept as feedback
# The driver's words when one of its programs (cc1plus, as, ld) died by a signal.
_SUBPROGRAM_KILLED = re.compile(r"signal terminated program|internal compiler error: Killed")


@dataclass(frozen=True)
class CompileOutcome:
    ok: bool
    binary: Path | None
    log: str  # trimmed diagnostics; empty when clean
    first_error: str  # the first "error:" line, for one-line reasons
    cached: bool
    seconds: float  # compile time (0 when served from the cache)


@functools.cache
def compiler_version(compiler: str) -> str:
    """First line of ``<compiler> --version``; part of every cache key."""
    exe = shutil.which(compiler)
    if exe is None:
        raise CompilerError(
            f"compiler {compiler!r} not found on PATH; install it or set `compiler`"
        )
    proc = subprocess.run([exe, "--version"], capture_output=True, text=True)
    if proc.returncode != 0:
        raise CompilerError(f"`{compiler} --version` failed: {proc.stderr.strip()[:500]}")
    return proc.stdout.splitlines()[0].strip()


def _run_compiler(
    cmd: list[str], tmp: Path, timeout_s: float
) -> subprocess.CompletedProcess[str] | None:
    """Run a compile in its own session with its temporary files in ``tmp``; None on timeout.

    At the time limit the whole process group is killed: killing only the driver (g++)
    would leave its cc1plus running, and its temporary files in /tmp.
    """
    proc = subprocess.Popen(
        cmd,
        cwd=tmp,
        env={**os.environ, "TMPDIR": str(tmp)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return None
    return subprocess.CompletedProcess(cmd, proc.returncode, stdout, stderr)


def trim_log(log: str, limit: int = LOG_LIMIT) -> str:
    """Keep the head of the diagnostics (the first errors matter most) within ``limit``."""
    log = log.replace("\r", "")
    if len(log) <= limit:
        return log
    return log[:limit] + f"\n[... {len(log) - limit} more characters of diagnostics cut]"


def first_error_line(log: str) -> str:
    for line in log.splitlines():
        if "error" in line:
            return line.strip()[:300]
    return log.strip().splitlines()[0][:300] if log.strip() else ""


class Compiler:
    """``compile(source)`` with a shared on-disk cache; ``compile_many`` runs in parallel."""

    def __init__(
        self,
        cache_dir: Path,
        compiler: str = "g++",
        flags: Sequence[str] = PIE_FLAGS,
        timeout_s: float = 60.0,
    ):
        self.compiler = compiler
        self.flags = tuple(flags)
        self.timeout_s = timeout_s
        self.version = compiler_version(compiler)
        self.dir = Path(cache_dir).resolve() / "bin"  # absolute: the compiler runs in a temp cwd
        self.dir.mkdir(parents=True, exist_ok=True)
        os.chmod(self.dir, 0o755)  # sandboxed uids need to read the binaries

    def key(self, source: str) -> str:
        payload = json.dumps([source, self.compiler, self.flags, self.version])
        return hashlib.sha256(payload.encode()).hexdigest()[:32]

    def compile(self, source: str) -> CompileOutcome:
        key = self.key(source)
        binary, failure = self.dir / key, self.dir / f"{key}.error.json"
        if binary.is_file():
            return CompileOutcome(True, binary, "", "", True, 0.0)
        if failure.is_file():
            d = json.loads(failure.read_text())
            return CompileOutcome(False, None, d["log"], d["first_error"], True, 0.0)
        return self._build(source, binary, failure)

    def compile_many(self, sources: Sequence[str], workers: int) -> list[CompileOutcome]:
        with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
            return list(pool.map(self.compile, sources))

    def _build(self, source: str, binary: Path, failure: Path) -> CompileOutcome:
        with tempfile.TemporaryDirectory(dir=self.dir, prefix=".build-") as tmp:
            src = Path(tmp) / "main.cpp"
            src.write_text(source)
            out = Path(tmp) / "prog"
            exe = shutil.which(self.compiler) or self.compiler
            start = time.perf_counter()
            cmd = ["nice", "-n", "5", exe, *self.flags, "-o", str(out), str(src)]
            finished = _run_compiler(cmd, Path(tmp), self.timeout_s)
            if finished is not None and finished.returncode < 0:  # the driver itself was killed
                finished = _run_compiler(cmd, Path(tmp), self.timeout_s)
                if finished is not None and finished.returncode < 0:
                    name = signal_name(-finished.returncode)
                    raise CompilerError(
                        f"{self.compiler} was killed by {name} twice while compiling (out of "
                        "memory, or the job was cancelled?); nothing was cached: run again"
                    )
            if finished is None:
                # not cached: a timeout can come from machine load rather than the source
                log = f"error: compilation exceeded {self.timeout_s:g} s"
                return CompileOutcome(False, None, log, log, False, self.timeout_s)
            log, ok = finished.stderr.replace(str(src), "main.cpp"), finished.returncode == 0
            seconds = time.perf_counter() - start
            log = trim_log(log)
            if ok and out.is_file():
                os.chmod(out, 0o755)
                os.replace(out, binary)
                return CompileOutcome(True, binary, log, "", False, seconds)
            first = first_error_line(log) or "compiler produced no binary"
            if finished.returncode > 0 and not _SUBPROGRAM_KILLED.search(log):
                tmp_fail = Path(tmp) / "error.json"
                tmp_fail.write_text(json.dumps({"log": log, "first_error": first}))
                os.replace(tmp_fail, failure)
            return CompileOutcome(False, None, log, first, False, seconds)
