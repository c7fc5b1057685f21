"""Configuration of the KernelCompare stages that do not train (extraction, split).

Every default is written once, on its field; they load through the one strict loader (``maxcode.loader``), so a
misspelled key in ``params.yaml`` stops the run with the allowed keys listed.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from typing import TypeVar

from maxcode.errors import ConfigError
from maxcode.kernelcompare.naive import TRANSFORMS

T = TypeVar("T")

SYSTEM_PROMPT = (
    "You are a CUDA optimization expert. Given an unoptimized CUDA kernel, your task is to "
    "provide an optimized version that improves performance while maintaining the same "
    "functionality."
)


@dataclass(frozen=True)
class ExtractConfig:
    """How slow/fast pairs are found, cleaned, generated and verified."""

    extensions: tuple[str, ...] = field(
        default=(".cu", ".cuh"), metadata={"help": "file suffixes read as CUDA sources"}
    )
    parboil_variants: tuple[tuple[str, str], ...] = field(
        default=(("cuda_base", "cuda"), ("cuda-base", "cuda")),
        metadata={
            "help": "(naive dir, optimized dir) pairs under benchmarks/<b>/src/; the first "
            "naive dir that exists wins"
        },
    )
    min_device_fraction: float = field(
        default=0.15,
        metadata={
            "help": "drop a file as 'mostly host code' when device code is a smaller share of "
            "its non-comment characters"
        },
    )
    naive_generator: str = field(
        default="offline",
        metadata={
            "help": "who writes Rodinia's naive side: offline (parse-tree transformations) or "
            "llm (the llm.generator role, through the response cache, as in the report)",
            "choices": ("offline", "llm"),
        },
    )
    naive_transforms: tuple[str, ...] = field(
        default=tuple(TRANSFORMS),
        metadata={"help": "parse-tree transformations of the offline naive generator, in order"},
    )
    compile_check: bool = field(
        default=True,
        metadata={"help": "keep a generated (Rodinia) pair only when both kernels compile"},
    )
    output_check: bool = field(
        default=False,
        metadata={
            "help": "also run the generated differential harness (kernelcompare.harness) on a "
            "GPU; a pair whose outputs differ is dropped"
        },
    )
    nvcc: str = field(default="nvcc", metadata={"help": "CUDA compiler for the compile check"})
    nvcc_flags: tuple[str, ...] = field(
        default=("-std=c++17", "-c", "-w"), metadata={"help": "flags of the compile check"}
    )
    compile_timeout_s: float = field(
        default=120.0, metadata={"help": "time limit of one compile-check invocation"}
    )
    system_prompt: str = field(
        default=SYSTEM_PROMPT, metadata={"help": "system message of every chat record"}
    )

    def __post_init__(self) -> None:
        if not 0.0 <= self.min_device_fraction < 1.0:
            raise ConfigError(
                "kernelcompare.extract.min_device_fraction: must be in [0, 1), "
                f"got {self.min_device_fraction}"
            )
        bad = [e for e in self.extensions if not e.startswith(".")]
        if bad:
            raise ConfigError(
                f"kernelcompare.extract.extensions: {bad} must start with a dot, e.g. '.cu'"
            )
        if self.naive_generator not in ("offline", "llm"):
            raise ConfigError(
                f"kernelcompare.extract.naive_generator: {self.naive_generator!r} is not one of "
                "['offline', 'llm']"
            )
        unknown = [t for t in self.naive_transforms if t not in TRANSFORMS]
        if unknown:
            raise ConfigError(
                f"kernelcompare.extract.naive_transforms: unknown {unknown}; "
                f"choose from {list(TRANSFORMS)}"
            )
        for pair in self.parboil_variants:
            if len(pair) != 2:
                raise ConfigError(
                    "kernelcompare.extract.parboil_variants: each entry is [naive_dir, "
                    f"optimized_dir], got {list(pair)}"
                )
        if self.compile_timeout_s <= 0:
            raise ConfigError("kernelcompare.extract.compile_timeout_s: must be > 0")

    def nvcc_path(self) -> str:
        """The compiler's path; a clear error when the compile check cannot run."""
        path = shutil.which(self.nvcc)
        if path is None:
            raise ConfigError(
                f"kernelcompare.extract.nvcc: {self.nvcc!r} not found on PATH; install the CUDA "
                "toolkit or set compile_check: false (pairs are then marked 'not compiled')"
            )
        return path


@dataclass(frozen=True)
class SplitConfig:
    """KernelBench level-1 train/test split used by GRPO and the held-out table."""

    train_fraction: float = field(default=0.8, metadata={"help": "share of tasks for training"})
    seed: int = field(default=42, metadata={"help": "shuffle seed (the report's 42)"})

    def __post_init__(self) -> None:
        if not 0.0 < self.train_fraction < 1.0:
            raise ConfigError(
                f"kernelcompare.split.train_fraction: must be in (0, 1), got {self.train_fraction}"
            )
