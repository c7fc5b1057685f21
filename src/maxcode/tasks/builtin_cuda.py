"""Our own CUDA suite in KernelBench's format (``builtin_cuda/level<N>/<id>_<Name>.py``).

Written for this project (not copied from KernelBench), sized so that one evaluation
on an H100 takes well under a second of GPU time per variant.
"""

from __future__ import annotations

from pathlib import Path

from maxcode.tasks.kernelbench import load_kernelbench_dir
from maxcode.tasks.model import Task

BUILTIN_CUDA_DIR = Path(__file__).with_name("builtin_cuda")


def load_builtin_cuda(levels: list[int] | None = None) -> list[Task]:
    """Built-in CUDA tasks, optionally only the given levels (1 and/or 2)."""
    return load_kernelbench_dir(BUILTIN_CUDA_DIR, levels=levels, suite="builtin_cuda")
