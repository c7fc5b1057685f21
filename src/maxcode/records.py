"""Crash-safe files: append-only JSONL and atomic publication, plus provenance.

A kill at any moment leaves either the old or the new file (atomic rename), and a
JSONL file loses at most its last partial line, which readers skip.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

from maxcode import __version__


@functools.cache
def _umask() -> int:
    """Read once: the umask can only be read by setting it, unsafe while threads write."""
    umask = os.umask(0o022)
    os.umask(umask)
    return umask


def file_mode() -> int:
    """The mode open() gives a new file under the umask (0644 under 022): mkstemp's files
    are 0600, so a published file gets this mode, that of an appended one like run.jsonl."""
    return 0o666 & ~_umask()


def dir_mode() -> int:
    """The mode mkdir() gives a new folder under the umask (mkdtemp's are 0700)."""
    return 0o777 & ~_umask()


def atomic_write_text(path: Path, text: str) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, file_mode())
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_json(path: Path, obj: object) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True) + "\n")


class JsonlWriter:
    """Append one record per line, flushed and fsynced, so finished records survive kill -9."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        _drop_partial_last_line(self.path)
        self._f = open(self.path, "a")  # noqa: SIM115 - closed in close()

    def write(self, record: dict) -> None:
        self.write_line(json.dumps(record, sort_keys=True) + "\n")

    def write_line(self, line: str) -> None:
        """One record as already encoded (a line ``jsonl_lines`` read), newline included."""
        if not line.endswith("\n") or "\n" in line[:-1]:
            raise ValueError(f"{self.path}: a JSONL record is one line ending in a newline")
        self._f.write(line)
        self._f.flush()
        os.fsync(self._f.fileno())

    def close(self) -> None:
        self._f.close()

    def __enter__(self) -> JsonlWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _drop_partial_last_line(path: Path) -> None:
    """A kill mid-write can leave a line without newline; cut it so appends stay valid."""
    if not path.exists() or path.stat().st_size == 0:
        return
    with open(path, "rb+") as f:
        f.seek(-1, os.SEEK_END)
        if f.read(1) == b"\n":
            return
        data = path.read_bytes()
        f.truncate(data.rfind(b"\n") + 1)


def read_jsonl(path: Path) -> Iterator[dict]:
    """Complete records only; a trailing partial line (from a kill) is skipped."""
    for _, line in jsonl_lines(path):
        yield json.loads(line)


def jsonl_lines(path: Path) -> Iterator[tuple[int, str]]:
    """``(line number, text)`` of each complete, non-blank line, newline included; a
    trailing partial line (from a kill) is skipped. A missing file has none."""
    path = Path(path)
    if not path.exists():
        return
    with open(path) as f:
        for number, line in enumerate(f, 1):
            if not line.endswith("\n"):
                return
            if line.strip():
                yield number, line


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def code_version() -> str:
    """Git commit of the checkout if there is one, else the package version."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            cwd=Path(__file__).parent,
        )
        if out.returncode == 0:
            return f"{__version__}+{out.stdout.strip()}"
    except (OSError, subprocess.SubprocessError):
        pass
    return __version__


def hardware_fingerprint() -> dict:
    """Enough to tell whether two timings are comparable."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    fingerprint = {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "machine": platform.machine(),
        "system": platform.system(),
        "python": platform.python_version(),
    }
    gpus = _gpu_names()
    if gpus:
        fingerprint["gpus"] = gpus
    return fingerprint


@functools.cache
def _gpu_names() -> tuple[str, ...]:
    """NVIDIA GPUs by name (from nvidia-smi); empty on machines without one."""
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
        )
    except (OSError, subprocess.TimeoutExpired):
        return ()
    return (
        tuple(line.strip() for line in out.stdout.splitlines() if line.strip())
        if out.returncode == 0
        else ()
    )


def provenance(params: dict | None = None, **extra: object) -> dict:
    """What produced a file: code version, hardware, params; stored beside every output."""
    return {
        "code_version": code_version(),
        "hardware": hardware_fingerprint(),
        "params": params or {},
        **extra,
    }
