"""KernelBench's correctness inputs on the CPU: torch's serial generator against the same
values made in several threads (``maxcode.evaluate.cuda.parallel_rand``), on real problems.

Problems: the KernelBench problem files under ``--problems`` (default
``$KB/technoabsurdist/KernelBench/level1``, the copy the public runs used, else
``$KB/KernelBench/level1``) whose one trial of inputs is largest (shapes on ``meta``), at most
``--count`` of them and none above ``--max-gb``. For each, a trial is made as KernelBench makes
it (``torch.manual_seed(trial); get_inputs()``) serially, then within ``ParallelCpuRand`` at
each thread count; the values must be bit for bit the serial ones and the generator must end
in the same state (checked, not assumed). The serial time of the same run is the baseline.

    python benchmarks/bench_parallel_rand.py --count 4 --threads 2,4,8 --json rand.json
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import time
from pathlib import Path

import torch
from result_json import add_json_argument, headline, write_result

from maxcode.evaluate.cuda.loader import load_module
from maxcode.evaluate.cuda.parallel_rand import ParallelCpuRand, agrees_with_torch
from maxcode.evaluate.cuda.trial_inputs import input_bytes

TRIAL_SEED = 1234


def default_problems() -> Path:
    kb = Path(os.environ.get("KB", ".kb"))
    used = kb / "technoabsurdist" / "KernelBench" / "level1"
    return used if used.is_dir() else kb / "KernelBench" / "level1"


def largest_problems(folder: Path, count: int, max_bytes: int) -> list[tuple[Path, int]]:
    sized = []
    for path in sorted(folder.glob("*.py")):
        module = load_module(path, f"kb_{path.stem}")
        nbytes = input_bytes(module.get_inputs)
        if nbytes is not None and nbytes <= max_bytes:
            sized.append((path, nbytes))
    sized.sort(key=lambda item: -item[1])
    return sized[:count]


def make_trial(get_inputs, threads: int | None) -> tuple[float, list, torch.Tensor]:
    torch.manual_seed(TRIAL_SEED)
    start = time.perf_counter()
    if threads is None:
        inputs = list(get_inputs())
    else:
        with ParallelCpuRand(threads):
            inputs = list(get_inputs())
    return time.perf_counter() - start, inputs, torch.get_rng_state()


def same(a: list, b: list) -> bool:
    return len(a) == len(b) and all(
        torch.equal(x, y) if isinstance(x, torch.Tensor) else x == y
        for x, y in zip(a, b, strict=True)
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--problems", type=Path, default=None, help="folder of problem files")
    parser.add_argument("--count", type=int, default=4, help="problems with the largest inputs")
    parser.add_argument("--max-gb", type=float, default=9.0, help="largest trial considered")
    parser.add_argument("--threads", default="2,4,8", help="thread counts, comma-separated")
    parser.add_argument("--repeat", type=int, default=2, help="runs of each variant (median)")
    add_json_argument(parser, "cuda-parallel-rand")
    args = parser.parse_args()
    folder = args.problems or default_problems()
    if not folder.is_dir():
        print(f"--problems: {folder} is not a folder of KernelBench problems (set $KB)")
        return 2
    thread_counts = [int(t) for t in args.threads.split(",")]
    torch.set_num_threads(1)  # KernelBench's generator is serial whatever this says
    print(
        f"torch {torch.__version__}, {os.cpu_count()} cores, capability "
        f"{torch.backends.cpu.get_cpu_capability()}; self-check: {agrees_with_torch()}"
    )
    rows = []
    for path, nbytes in largest_problems(folder, args.count, int(args.max_gb * 2**30)):
        module = load_module(path, f"kb_{path.stem}")
        serial_s, serial, serial_state = [], None, None
        for _ in range(args.repeat):
            seconds, serial, serial_state = make_trial(module.get_inputs, None)
            serial_s.append(seconds)
        row = {"problem": path.name, "gb": nbytes / 2**30, "serial_s": statistics.median(serial_s)}
        for threads in thread_counts:
            times = []
            for _ in range(args.repeat):
                seconds, made, state = make_trial(module.get_inputs, threads)
                if not (same(serial, made) and torch.equal(state, serial_state)):
                    print(f"{path.name}: {threads} threads made other values: a defect")
                    return 1
                times.append(seconds)
                del made
                gc.collect()
            row[f"threads_{threads}_s"] = statistics.median(times)
        del serial
        gc.collect()
        rows.append(row)
        cells = "  ".join(
            f"{t} threads {row[f'threads_{t}_s']:.2f} s ({row['serial_s'] / row[f'threads_{t}_s']:.1f}x)"
            for t in thread_counts
        )
        print(f"{path.name:45s} {row['gb']:5.2f} GB  serial {row['serial_s']:.2f} s  {cells}")
    if not rows:
        print(f"--problems: no problem in {folder} has inputs of at most {args.max_gb} GB")
        return 2
    top = max(thread_counts)
    headlines = [
        headline(
            f"{r['problem']}, {top} threads vs serial",
            round(r["serial_s"] / r[f"threads_{top}_s"], 1),
            "x",
        )
        for r in rows
    ]
    print("wrote", write_result("cuda-parallel-rand", rows, headlines, args.json))
    return 0


if __name__ == "__main__":
    sys.exit(main())
