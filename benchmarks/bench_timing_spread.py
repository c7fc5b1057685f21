"""Where the run-to-run spread of CUDA timings comes from (run on a GPU machine).

Timed without a GPU hold, as KernelBench times, the throughput benchmark's speedups moved by
several percent between runs of the same code, the reference's own median too. This separates
the suspects. For each built-in task, the eager ``Model`` and a
deep copy of it (identical work, so their ratio should be 1.0) are timed with the evaluator's
own timer (``time_interleaved``, ``CudaEvalConfig`` defaults: warm-up, L2 flush, at least 100
rounds and about 1 s), ``R`` times in each of four modes, the first three without a hold:

* ``fresh``: a new (spawned) process per repeat, as each candidate gets a new process in the
  evaluator (forked there from a zygote);
* ``same``: ``R`` timing blocks in one process;
* ``pinned``: a new process per repeat, pinned to one CPU local to the GPU's NUMA node;
* ``held``: a new process per repeat, each call preceded by the evaluator's GPU spin
  (``GpuHold``: at least ``--hold-us``, default ``CudaEvalConfig.hold_us``, longer where
  the host side is, up to ``CudaEvalConfig.hold_max_us``), so the host's launch latency
  is outside the timed window; this is how the evaluator times.

Per mode it prints how far the eager median moves across repeats (median over consecutive
pairs of the relative difference, the figure the throughput benchmark reports, and max/min)
and the same for the ratio eager/copy. ``fresh`` much noisier than ``same`` says the spread
is per process; ``pinned`` close to ``same`` says where the process runs is the cause;
``held`` much quieter than ``fresh`` says the host's launch latency is.

    python3 benchmarks/bench_timing_spread.py --repeats 5 --json spread.json
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
from multiprocessing import get_context
from pathlib import Path

from result_json import add_json_argument, headline, json_path, write_result

from maxcode.evaluate.cuda.config import CudaEvalConfig
from maxcode.evaluate.cuda.figures import nvidia_smi
from maxcode.evaluate.cuda.worker import GpuHold, summarize, time_interleaved
from maxcode.tasks.builtin_cuda import load_builtin_cuda

DEFAULT_TASKS = [
    "1_Scaled_vector_add.py",
    "3_Row_sum.py",
    "5_Softmax.py",
    "1_Linear_ReLU_BiasAdd.py",
]
CHILD_TIMEOUT_S = 300
MODES = ("fresh", "same", "pinned", "held")


def _time_blocks(
    reference: str, blocks: int, cpu: int | None, hold: GpuHold | None
) -> list[dict[str, float]]:
    """Median ms of eager and its copy, per timing block (runs in a spawned process)."""
    if cpu is not None:
        os.sched_setaffinity(0, {cpu})
    import copy

    import torch

    cfg = CudaEvalConfig()
    namespace: dict = {}
    exec(compile(reference, "reference.py", "exec"), namespace)
    torch.manual_seed(0)
    model = namespace["Model"](*namespace["get_init_inputs"]()).cuda().eval()
    twin = copy.deepcopy(model)
    inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in namespace["get_inputs"]()]
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    medians = []
    with torch.no_grad():
        for _ in range(blocks):
            times = time_interleaved(
                {"eager": model, "copy": twin},
                inputs,
                cfg.warmup,
                cfg.timing_trials,
                cfg.flush_l2,
                l2,
                cfg.timing_seconds,
                hold,
            )
            medians.append({name: summarize(ms)["median"] for name, ms in times.gpu_ms.items()})
    return medians


def _in_fresh_process(
    reference: str, blocks: int, cpu: int | None = None, hold: GpuHold | None = None
) -> list[dict[str, float]]:
    with get_context("spawn").Pool(1) as pool:
        job = pool.apply_async(_time_blocks, (reference, blocks, cpu, hold))
        return job.get(CHILD_TIMEOUT_S)


def gpu_local_cpu(bus_id: str) -> tuple[int, str]:
    """A CPU on the NUMA node of the GPU at PCI ``bus_id`` (from sysfs), else the first
    allowed one; and why."""
    allowed = sorted(os.sched_getaffinity(0))
    if bus_id:
        domain, rest = bus_id.lower().split(":", 1)
        cpulist = Path(f"/sys/bus/pci/devices/{domain[-4:]}:{rest}/local_cpulist")
        if cpulist.exists():
            local = _parse_cpulist(cpulist.read_text())
            for cpu in allowed:
                if cpu in local:
                    return cpu, f"local to GPU {bus_id} ({cpulist})"
    return allowed[0], "first allowed CPU (the GPU's local CPUs could not be read)"


def _parse_cpulist(text: str) -> set[int]:
    """'0-3,8,10-11' -> {0, 1, 2, 3, 8, 10, 11}."""
    cpus: set[int] = set()
    for part in text.strip().split(","):
        if "-" in part:
            lo, hi = part.split("-")
            cpus.update(range(int(lo), int(hi) + 1))
        elif part:
            cpus.add(int(part))
    return cpus


def moves(values: list[float]) -> dict[str, float]:
    """How far repeated measurements of the same thing move: consecutive pairs and range."""
    pairs = [abs(b - a) / a for a, b in itertools.pairwise(values)]
    return {
        "median_pair_diff": statistics.median(pairs) if pairs else 0.0,
        "max_over_min": max(values) / min(values) - 1,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tasks", nargs="+", default=DEFAULT_TASKS, help="built-in task files")
    parser.add_argument("--repeats", type=int, default=5, help="R: repeats per mode")
    parser.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES))
    parser.add_argument(
        "--hold-us",
        type=float,
        default=CudaEvalConfig().hold_us,
        help="shortest GPU spin before each call in `held` mode (default: the evaluator's)",
    )
    add_json_argument(parser, "cuda-timing-spread")
    args = parser.parse_args()
    args.json = json_path(args.json, "cuda-timing-spread")
    if args.repeats < 2:
        parser.error("--repeats must be at least 2: the spread needs two measurements")
    tasks = {t.metadata["file_name"]: t for t in load_builtin_cuda()}
    unknown = [name for name in args.tasks if name not in tasks]
    if unknown:
        parser.error(f"unknown built-in tasks {unknown}; choose from {sorted(tasks)}")
    smi = nvidia_smi()
    cpu, why = gpu_local_cpu(smi.get("pci.bus_id", ""))
    max_us = max(args.hold_us, CudaEvalConfig().hold_max_us)
    hold = GpuHold(args.hold_us, max_us, float(smi.get("clocks.max.sm") or 0) or None)
    print(
        f"machine: {smi.get('name')}; pinned mode uses CPU {cpu}: {why}; "
        f"held mode spins {args.hold_us:g}-{max_us:g} us"
    )
    out: dict = {"cpu": cpu, "cpu_choice": why, "hold_us": [args.hold_us, max_us], "tasks": {}}
    per_process = {"fresh": {}, "pinned": {"cpu": cpu}, "held": {"hold": hold}}
    headlines: list[dict] = []
    for name in args.tasks:
        reference = tasks[name].reference_source
        runs = {
            mode: (
                _in_fresh_process(reference, args.repeats)
                if mode == "same"
                else [
                    _in_fresh_process(reference, 1, **per_process[mode])[0]
                    for _ in range(args.repeats)
                ]
            )
            for mode in args.modes
        }
        out["tasks"][name] = runs
        for mode, blocks in runs.items():
            eager = moves([b["eager"] for b in blocks])
            headlines.append(
                headline(
                    f"{name}, {mode}: eager median moved between repeats",
                    round(100 * eager["median_pair_diff"], 2),
                    "%",
                )
            )
            ratio = moves([b["eager"] / b["copy"] for b in blocks])
            print(
                f"{name:28s} {mode:6s} eager ms {min(b['eager'] for b in blocks):.4f}-{max(b['eager'] for b in blocks):.4f}"
                f"  eager moves {100 * eager['median_pair_diff']:5.2f}% (max/min {100 * eager['max_over_min']:5.2f}%)"
                f"  eager/copy moves {100 * ratio['median_pair_diff']:5.2f}% (max/min {100 * ratio['max_over_min']:5.2f}%)",
                flush=True,
            )
        # after every task, so a run cut short keeps what it measured
        write_result("cuda-timing-spread", out, headlines, args.json)


if __name__ == "__main__":
    main()
