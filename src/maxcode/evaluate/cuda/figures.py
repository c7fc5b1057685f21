"""Hardware fingerprint and roofline figures for the critic.

Peaks are computed from what the device reports (SM count, max SM clock, memory clock
and bus width), with one per-architecture constant: FP32 lanes per SM.
"""

from __future__ import annotations

import shutil
import subprocess
from typing import Any

# FP32 FMA lanes per SM by compute capability (CUDA C Programming Guide, arithmetic throughput table).
FP32_LANES_PER_SM = {
    (7, 0): 64,
    (7, 5): 64,
    (8, 0): 64,
    (8, 6): 128,
    (8, 7): 128,
    (8, 9): 128,
    (9, 0): 128,
    (10, 0): 128,
    (12, 0): 128,
}
_SMI_FIELDS = (
    "name",
    "driver_version",
    "clocks.sm",
    "clocks.max.sm",
    "clocks.mem",
    "clocks.max.mem",
    "compute_cap",
    "pci.bus_id",
    "memory.total",
)


def nvidia_smi(index: int | str = 0) -> dict[str, str]:
    """One GPU's row from nvidia-smi (by index or UUID), keyed by field; empty when there is no
    nvidia-smi or GPU."""
    if shutil.which("nvidia-smi") is None:
        return {}
    try:
        out = subprocess.run(
            [
                "nvidia-smi",
                f"--id={index}",
                f"--query-gpu={','.join(_SMI_FIELDS)}",
                "--format=csv,noheader,nounits",
            ],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return {}
    values = [v.strip() for v in out.splitlines()[0].split(",")] if out else []
    return dict(zip(_SMI_FIELDS, values, strict=False)) if len(values) == len(_SMI_FIELDS) else {}


def gpu_free_mb(index: int | str = 0) -> float | None:
    """The GPU's free memory now (MiB), every process's use counted (None: not readable)."""
    if shutil.which("nvidia-smi") is None:
        return None
    try:
        out = subprocess.run(
            [
                "nvidia-smi",
                f"--id={index}",
                "--query-gpu=memory.free",
                "--format=csv,noheader,nounits",
            ],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout.strip()
        return float(out.splitlines()[0])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None


def detect_cuda_arch(index: int = 0) -> str:
    """Compute capability such as '9.0' from nvidia-smi (does not create a CUDA context)."""
    return nvidia_smi(index).get("compute_cap", "")


def host_gpu_facts(gpu: int | str = 0) -> dict[str, Any]:
    """What nvidia-smi and NVML say of one GPU (index or UUID), read by the evaluator itself:
    the candidate's sandboxed process cannot run them (and must not supply its own clocks)."""
    facts: dict[str, Any] = dict(nvidia_smi(gpu))
    facts["memory_bus_bits"] = _nvml_bus_width(gpu)
    return facts


def gpu_environment(facts: dict[str, Any]) -> dict[str, Any]:
    """GPU name, clocks, driver, torch/CUDA versions and peaks; call inside the GPU worker,
    with the evaluator's ``host_gpu_facts`` for this GPU."""
    import torch

    props = torch.cuda.get_device_properties(0)
    return environment_from(props, facts, torch.__version__, torch.version.cuda)


def environment_from(
    props: Any, smi: dict[str, Any], torch_version: str, cuda_version: str | None
) -> dict[str, Any]:
    """The environment record from torch's device properties and the host's GPU facts."""
    env: dict[str, Any] = {
        "gpu": props.name,
        "compute_capability": f"{props.major}.{props.minor}",
        "sm_count": props.multi_processor_count,
        "l2_bytes": getattr(props, "L2_cache_size", None),
        "memory_mb": round(props.total_memory / 2**20),
        "driver": smi.get("driver_version"),
        "sm_clock_mhz": _num(smi.get("clocks.sm")),
        "max_sm_clock_mhz": _num(smi.get("clocks.max.sm")),
        "mem_clock_mhz": _num(smi.get("clocks.mem")),
        "max_mem_clock_mhz": _num(smi.get("clocks.max.mem")),
        "torch": torch_version,
        "cuda": cuda_version,
    }
    bus_bits = getattr(props, "memory_bus_width", None) or smi.get("memory_bus_bits")
    env["memory_bus_bits"] = bus_bits
    mem_mhz = env["max_mem_clock_mhz"]
    env["peak_bandwidth_gbs"] = (
        round(mem_mhz * 1e6 * 2 * bus_bits / 8 / 1e9, 1) if mem_mhz and bus_bits else None
    )
    lanes = FP32_LANES_PER_SM.get((props.major, props.minor))
    sm_mhz = env["max_sm_clock_mhz"]
    env["peak_fp32_tflops"] = (
        round(props.multi_processor_count * sm_mhz * 1e6 * lanes * 2 / 1e12, 1)
        if lanes and sm_mhz
        else None
    )
    return env


def roofline(
    bytes_moved: int, flops: int, runtime_ms: float, env: dict[str, Any]
) -> dict[str, float | None]:
    """Achieved bandwidth/FLOP rate of a run against the device peaks (keys the critic reads)."""
    seconds = runtime_ms / 1e3
    return {
        "bytes_moved": bytes_moved,
        "flops": flops,
        "achieved_bandwidth_gbs": round(bytes_moved / seconds / 1e9, 2) if seconds > 0 else None,
        "peak_bandwidth_gbs": env.get("peak_bandwidth_gbs"),
        "achieved_tflops": round(flops / seconds / 1e12, 3) if seconds > 0 else None,
        "peak_tflops": env.get("peak_fp32_tflops"),
    }


def speedup_figures(
    timing: dict[str, Any], reference: dict[str, Any], drift_max: float
) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
    """A correct candidate's speedups, from its own timing and the task's reference figures.

    ``timing`` is what the candidate's process measured (``candidate``, and
    ``eager_this_process``: the eager reference timed there after the candidate);
    ``reference`` the figures of the reference process, which never imported candidate code.
    Returns the merged timing, the figures and the warnings (a drift between the two
    processes' eager figures above ``drift_max``).
    """
    cand = timing["candidate"]["median"]
    here = timing["eager_this_process"]["median"]
    eager = reference["eager"]["median"]
    merged = {
        "candidate": timing["candidate"],
        **{k: reference[k] for k in ("eager", "compiled") if k in reference},
        "eager_this_process": timing["eager_this_process"],
    }
    figures: dict[str, Any] = {
        "speedup_vs_eager": round(eager / cand, 4) if cand > 0 else float("inf"),
        "speedup_vs_eager_this_process": round(here / cand, 4) if cand > 0 else None,
    }
    drift = here / eager - 1.0 if eager > 0 else 0.0
    figures["reference_drift"] = round(drift, 4)
    warnings = []
    if abs(drift) > drift_max:
        warnings.append(
            f"reference_drift: the eager reference took {here:.4g} ms in the candidate's process and {eager:.4g} ms in the reference process ({100 * drift:+.1f}%, more than {100 * drift_max:.0f}%); the speedup divides by the reference process's figure"
        )
    if "compiled" in reference:
        compiled = reference["compiled"]["median"]
        figures["speedup_vs_compiled"] = round(compiled / cand, 4) if cand > 0 else None
    elif "compiled_reference_error" in reference:
        figures["compiled_reference_error"] = reference["compiled_reference_error"]
    return merged, figures, warnings


def reference_fits(reference_peak_mb: float | None, total_mb: float | None) -> tuple[str, bool]:
    """Whether the reference alone fits on the GPU, said for an out-of-memory verdict."""
    if reference_peak_mb is None:
        return "the reference alone was not measured", False
    if total_mb and reference_peak_mb > total_mb:
        return (
            f"the reference alone needs {reference_peak_mb / 1024:.1f} GiB and does not fit either",
            False,
        )
    of = f" of {total_mb / 1024:.1f} GiB" if total_mb else ""
    return (
        f"the reference alone peaks at {reference_peak_mb / 1024:.1f} GiB{of} and fits, so the "
        "candidate's own memory use ran it out",
        True,
    )


def _nvml_bus_width(gpu: int | str) -> int | None:
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
        handle = (
            pynvml.nvmlDeviceGetHandleByIndex(int(gpu))
            if str(gpu).isdigit()
            else pynvml.nvmlDeviceGetHandleByUUID(str(gpu))
        )
        return int(pynvml.nvmlDeviceGetMemoryBusWidth(handle))
    except pynvml.NVMLError:
        return None


def _num(text: str | None) -> float | None:
    try:
        return float(text) if text not in (None, "", "[N/A]") else None
    except ValueError:
        return None
