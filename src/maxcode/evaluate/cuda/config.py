"""Configuration of the CUDA evaluator: one dataclass, every default written once."""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from maxcode.evaluate.cuda.semantics import PRECISIONS, SEMANTICS
from maxcode.loader import load

SEVERITIES = ("error", "warn", "off")
TF32_SETTINGS = ("torch-default", "off")


@dataclass
class CudaEvalConfig:
    """How candidates are built, checked, run and timed.

    Groups: correctness (seed, trials, KernelBench semantics and precision; the
    tolerances come from the semantics), timing (warm-up, floor/target/ceiling of
    rounds, L2 flush, compiled reference), building (workers, optimisation, cache),
    sandbox (timeouts, per-call watchdog, memory) and anti-cheat (per-check severity,
    speedup flag).
    """

    # correctness
    seed: int = field(
        default=42, metadata={"help": "base seed; trial i uses a seed derived from it"}
    )
    correctness_trials: int = field(
        default=5,
        metadata={"help": "fresh random inputs per candidate, each with its own seed", "min": 1},
    )
    semantics: str = field(
        default="kernelbench-v0.1",
        metadata={
            "help": "the KernelBench harness reproduced (module mode, seeding points, tolerances): kernelbench-v0.1 or kernelbench-head; see maxcode.evaluate.cuda.semantics",
            "choices": sorted(SEMANTICS),
        },
    )
    precision: str = field(
        default="fp32",
        metadata={
            "help": "fp32, fp16 or bf16: inputs and weights cast as KernelBench casts them (fp16/bf16 need kernelbench-head)",
            "choices": list(PRECISIONS),
        },
    )
    tf32: str = field(
        default="torch-default",
        metadata={
            "help": "TF32 use of the reference and the candidate: torch-default (torch's flags as shipped, as KernelBench runs: cuDNN convolutions may use TF32 tensor cores, cuBLAS matmuls do not) or off (strict FP32: cuDNN and cuBLAS TF32 off for both)",
            "choices": list(TF32_SETTINGS),
        },
    )
    fast_inputs: bool = field(
        default=False,
        metadata={
            "help": "generate correctness inputs on the GPU: same distributions, other values than KernelBench's CPU generator, seconds faster for multi-GB inputs"
        },
    )
    # timing
    warmup: int = field(
        default=5, metadata={"help": "untimed calls of each variant before timing", "min": 0}
    )
    timing_trials: int = field(
        default=20,
        metadata={
            "help": "floor of timed calls per variant, interleaved candidate/eager",
            "min": 1,
        },
    )
    timing_seconds: float = field(
        default=1.0,
        metadata={
            "help": "target: rounds are added above the floor until they fill about this many seconds, judged from the warm-up rounds (none without warm-up)",
            "min": 0,
        },
    )
    timing_max_trials: int = field(
        default=1000, metadata={"help": "ceiling of timed calls per variant", "min": 1}
    )
    timed_output_checks: int = field(
        default=3,
        metadata={
            "help": "timed rounds, drawn at random (and the last two), whose candidate output is compared with its own untimed output for the same inputs (checks timed_result_reuse and nondeterministic)",
            "min": 0,
        },
    )
    reference_drift_max: float = field(
        default=0.1,
        metadata={
            "help": "relative difference allowed between the eager reference timed in the candidate's process and in the reference process before a warning",
            "exclusive_min": 0,
        },
    )
    flush_l2: bool = field(
        default=True,
        metadata={"help": "overwrite a buffer twice the L2 size before each timed call"},
    )
    hold_us: float = field(
        default=100.0,
        metadata={
            "help": "shortest GPU spin queued before each timed call (nvbench's blocking kernel), so a call whose host side is shorter is timed without the host's launch latency; 0 = none, as KernelBench times",
            "min": 0,
        },
    )
    hold_max_us: float = field(
        default=1000.0,
        metadata={
            "help": "longest GPU spin: the spin grows to twice a variant's 90th-percentile host time (launches after a long call were seen taking 0.16-0.4 ms on the H100) up to this"
        },
    )
    time_compiled_reference: bool = field(
        default=True,
        metadata={"help": "also time torch.compile(Model) interleaved with the candidate"},
    )
    # building
    compile_workers: int = field(
        default=0,
        metadata={
            "help": "parallel compile jobs shared by all GPU workers; 0 = one per CPU core less one per GPU worker (each keeps a core for its launches)",
            "min": 0,
        },
    )
    gpu_concurrency: int = field(
        default=0,
        metadata={
            "help": "candidates' processes sharing one GPU for loading and checking (timings always have the GPU alone: the others are stopped meanwhile); a job that runs out of memory or time beside others is run again alone; 0 = one per 4 CPU cores, at most 4; 1 = one at a time",
            "min": 0,
        },
    )
    cuda_arch: str = field(
        default="",
        metadata={
            "help": "compute capability such as '9.0'; empty = read from the GPU with nvidia-smi"
        },
    )
    host_pch: bool = field(
        default=True,
        metadata={"help": "precompile torch/extension.h once per toolchain for the host binding"},
    )
    light_host_headers: bool = field(
        default=True,
        metadata={
            "help": "with host_pch: compile the host binding first against a lighter precompiled header: ATen's Tensor and torch's pybind11 casters (plus the headers of the ops it calls); host code that fails on a missing name, or names torch's C++ frontend (nn, optim, jit, ...), gets the whole torch/extension.h"
        },
    )
    build_ahead: bool = field(
        default=True,
        metadata={
            "help": "start the builds of the load_inline calls a candidate writes out at its top level (read from its source, never run) while its compile job starts Python and torch; a call that asks for anything else is built when it asks"
        },
    )
    light_cuda_headers: bool = field(
        default=True,
        metadata={
            "help": "compile .cu sources against the lightest headers that work (CUDA only, ATen ops, as written); falls back on error"
        },
    )
    split_host_functions: bool = field(
        default=True,
        metadata={
            "help": "with light_cuda_headers: first build a .cu's host functions (their launches through generated stubs) in the host binding with the precompiled header, its kernels without torch; falls back to the header tiers on failure (identical kernel machine code and exports; the same outputs on an H100)"
        },
    )
    profile: bool = field(
        default=False,
        metadata={
            "help": "add a per-kernel GPU-time profile of the candidate and the reference from the torch profiler (Effi-Learner)"
        },
    )
    profile_calls: int = field(
        default=3,
        metadata={"help": "forward calls recorded by the profiler; times are per call", "min": 1},
    )
    # sandbox
    require_full_sandbox: bool = field(
        default=False,
        metadata={
            "help": "refuse to evaluate where candidates would run with less than the full sandbox (no namespaces here, or a GPU the jail cannot reach); off: evaluate with the strongest confinement this host allows, said once and recorded in every result's sandbox level"
        },
    )
    compile_timeout_s: float = field(
        default=600.0,
        metadata={"help": "wall-clock limit of one candidate's build", "exclusive_min": 0},
    )
    run_timeout_s: float = field(
        default=300.0,
        metadata={"help": "wall-clock limit of one candidate's GPU evaluation", "exclusive_min": 0},
    )
    watchdog_factor: float = field(
        default=10.0,
        metadata={
            "help": "a candidate call running longer than this many times the reference's call (or watchdog_floor_s) is killed: timeout",
            "exclusive_min": 1,
        },
    )
    watchdog_floor_s: float = field(
        default=5.0,
        metadata={"help": "shortest watchdog limit of one call, seconds", "exclusive_min": 0},
    )
    watchdog_first_call_s: float = field(
        default=12.0,
        metadata={
            "help": "watchdog limit of a candidate's first call (Triton JIT, lazy initialisation), seconds",
            "exclusive_min": 0,
        },
    )
    memory_limit_mb: int = field(
        default=32768,
        metadata={"help": "host RSS limit of a compile job or evaluation process; killed above it"},
    )
    # anti-cheat
    check_severity: dict[str, str] = field(
        default_factory=dict,
        metadata={"help": "override per check id: 'error' rejects, 'warn' records, 'off' skips"},
    )
    forbid_torch_compute: bool = field(
        default=False,
        metadata={
            "help": "reject candidates whose forward runs torch compute ops (tasks can set metadata forbid_torch_compute)"
        },
    )
    excessive_speedup: float = field(
        default=10.0,
        metadata={
            "help": "speedups above this are flagged for review (check excessive_speedup)",
            "exclusive_min": 1,
        },
    )
    batch_constant_names: tuple[str, ...] = field(
        default=("batch_size", "N", "batch"),
        metadata={
            "help": "module constants of a problem changed to test that shapes are not hard-coded"
        },
    )

    def __post_init__(self) -> None:
        from maxcode.evaluate.cuda.checks import CHECKS
        from maxcode.evaluate.cuda.semantics import check_semantics

        check_semantics(self.semantics, self.precision)
        for name in ("correctness_trials", "timing_trials", "profile_calls"):
            if getattr(self, name) < 1:
                raise ValueError(f"CudaEvalConfig.{name} must be >= 1, got {getattr(self, name)}")
        if (
            self.warmup < 0
            or self.compile_workers < 0
            or self.gpu_concurrency < 0
            or self.timing_seconds < 0
            or self.hold_us < 0
        ):
            raise ValueError(
                "CudaEvalConfig.warmup, compile_workers, gpu_concurrency, timing_seconds and hold_us must be >= 0"
            )
        if self.hold_max_us < self.hold_us:
            raise ValueError(
                f"CudaEvalConfig.hold_max_us ({self.hold_max_us}) must be >= hold_us ({self.hold_us})"
            )
        if self.timing_max_trials < self.timing_trials:
            raise ValueError(
                f"CudaEvalConfig.timing_max_trials ({self.timing_max_trials}) must be >= timing_trials ({self.timing_trials})"
            )
        if self.timed_output_checks < 0 or self.reference_drift_max <= 0:
            raise ValueError(
                "CudaEvalConfig.timed_output_checks must be >= 0 and reference_drift_max > 0"
            )
        if (
            self.watchdog_factor <= 1
            or self.watchdog_floor_s <= 0
            or self.watchdog_first_call_s <= 0
        ):
            raise ValueError(
                f"CudaEvalConfig.watchdog_factor must be > 1 (got {self.watchdog_factor}) and watchdog_floor_s, watchdog_first_call_s > 0 seconds"
            )
        if self.compile_timeout_s <= 0 or self.run_timeout_s <= 0:
            raise ValueError("CudaEvalConfig timeouts must be > 0 seconds")
        if self.excessive_speedup <= 1:
            raise ValueError(
                f"CudaEvalConfig.excessive_speedup must be > 1, got {self.excessive_speedup}"
            )
        if self.cuda_arch and not _is_arch(self.cuda_arch):
            raise ValueError(
                f"CudaEvalConfig.cuda_arch must look like '9.0', got {self.cuda_arch!r}"
            )
        for check_id, severity in self.check_severity.items():
            if check_id not in CHECKS:
                raise ValueError(
                    f"CudaEvalConfig.check_severity: unknown check id {check_id!r}; known: {', '.join(sorted(CHECKS))}"
                )
            if severity not in SEVERITIES:
                raise ValueError(
                    f"CudaEvalConfig.check_severity[{check_id!r}] = {severity!r}; choose one of {SEVERITIES}"
                )
        self.batch_constant_names = tuple(self.batch_constant_names)

    def severity(self, check_id: str) -> str:
        """Configured severity of a check, else its default."""
        from maxcode.evaluate.cuda.checks import CHECKS

        return self.check_severity.get(check_id, CHECKS[check_id].default_severity)

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None, origin: str = "evaluation.cuda") -> CudaEvalConfig:
        """Through the one strict loader: a bad key or value names its key path."""
        return load(cls, d, origin)

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def _is_arch(text: str) -> bool:
    major, _, minor = text.partition(".")
    return major.isdigit() and minor.isdigit()


def default_cache_dir() -> Path:
    """Build cache location when none is given: $MAXCODE_CACHE or ~/.cache/maxcode."""
    return Path(os.environ.get("MAXCODE_CACHE", Path.home() / ".cache" / "maxcode")) / "cuda"
