"""Rendered kernels compiled together: one nvcc run for the project's target architecture,
each kernel in a namespace of its own (a module name no other test directory uses)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest


def compile_units(units: dict[str, str], work: Path) -> None:
    """``units``: a label per rendered ``.cu`` text. Their ``#include`` lines are gathered once
    at the top; skips without nvcc, fails with nvcc's last 3,000 characters of errors."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc not installed")
    includes: list[str] = []
    bodies = []
    for i, (label, cuda) in enumerate(units.items()):
        lines = cuda.splitlines()
        includes += [x for x in lines if x.startswith("#include") and x not in includes]
        body = "\n".join(x for x in lines if not x.startswith("#include"))
        bodies.append(f"namespace unit{i} {{  // {label}\n{body}\n}}")
    (work / "k.cu").write_text("\n".join(includes + bodies))
    proc = subprocess.run(
        [nvcc, "-c", "-arch=sm_90", "-std=c++17", "k.cu", "-o", "k.o"],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
