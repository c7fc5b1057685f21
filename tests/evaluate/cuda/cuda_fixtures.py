"""Helpers shared by the CUDA evaluator tests (a module name no other test directory uses)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from maxcode.evaluate.cuda.figures import detect_cuda_arch

HOSTILE = Path(__file__).parent / "hostile"


def has_gpu() -> bool:
    return shutil.which("nvidia-smi") is not None and bool(detect_cuda_arch())


requires_gpu = pytest.mark.skipif(not has_gpu(), reason="needs an NVIDIA GPU")


def hostile(name: str) -> str:
    return (HOSTILE / f"{name}.py").read_text()
