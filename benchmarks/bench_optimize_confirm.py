"""Does the confirmed speedup of `maxcode optimize` match an independent timing of the same binaries?

Three slow C++ programs written here, each with a quadratic (or tree-walk) pattern:

- ``concat``: ``s = s + w + ","`` in a loop (each append copies the whole string: O(n^2));
- ``queue``: a work queue in a vector drained with ``erase(begin())`` (each pop moves every
  element: O(n^2));
- ``map_dp``: a DP keyed by value in a ``std::map<int, int>`` (a tree walk, with cache
  misses, per access, where a hash table or an array indexed by value fits).

Each has four PIE-style tests (a count n, then n records) whose expected outputs the program
makes (``--make-tests``). ``maxcode optimize`` runs with the offline policy and the user's
flags (``--cxxflags``, default ``--std=c++17 -O2``) into a fresh ``--out``; its confirmation
times the original and the best by wall clock on the largest test scaled up. Then the
benchmark, independently, builds the original and the best candidate (the written
``best.cpp``, or the search's best when none was written) with ``g++`` and the same flags
(its own binaries, outside maxcode's cache and sandbox) and times them on the same
confirmation input with a plain loop (interleaved batches: the original once, the best as
many times as fit, its fastest run; the medians over the batches). It reports both
speedups and their ratio; the claim checked is agreement within 20%.

    python3 benchmarks/bench_optimize_confirm.py      # writes under benchmarks/results/optimize-confirm/

Which code runs is whatever ``python -m maxcode`` imports (set PYTHONPATH to compare versions).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import random
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from result_json import add_json_argument, headline, json_path, write_result

CONCAT = r"""#include <iostream>
#include <string>
using namespace std;

// Joins n words with commas; prints the length and a checksum of the result.
int main() {
    int n;
    cin >> n;
    string joined, word;
    for (int i = 0; i < n; i++) {
        cin >> word;
        joined = joined + word + ",";
    }
    unsigned long long h = 0;
    for (char c : joined) h = h * 131 + (unsigned char)c;
    cout << joined.size() << " " << h << endl;
    return 0;
}
"""

QUEUE = r"""#include <iostream>
#include <vector>
using namespace std;

// Drains a work queue: each job x pays x, and an even job spawns a job of half its size.
int main() {
    int n;
    cin >> n;
    vector<long long> jobs;
    for (int i = 0; i < n; i++) {
        long long x;
        cin >> x;
        jobs.push_back(x);
    }
    long long paid = 0, handled = 0;
    while (!jobs.empty()) {
        long long x = jobs[0];
        jobs.erase(jobs.begin());
        paid += x;
        handled++;
        if (x % 2 == 0 && x > 0) jobs.push_back(x / 2);
    }
    cout << handled << " " << paid << endl;
    return 0;
}
"""

MAP_DP = r"""#include <iostream>
#include <map>
using namespace std;

// Longest chain x, x+1, x+2, ... taken in input order: a DP keyed by value, in a std::map.
int main() {
    int n;
    cin >> n;
    map<int, int> chain;
    int longest = 0;
    for (int i = 0; i < n; i++) {
        int x;
        cin >> x;
        chain[x] = max(chain[x], chain[x - 1] + 1);
        longest = max(longest, chain[x]);
    }
    cout << longest << endl;
    return 0;
}
"""

BENCHMARK = "optimize-confirm"

PROGRAMS = {
    "concat": (CONCAT, "s = s + x concatenation in a loop (O(n^2))", [500, 1000, 2000, 4000]),
    "queue": (QUEUE, "vector erase(begin()) in a loop (O(n^2))", [1000, 2000, 4000, 8000]),
    "map_dp": (
        MAP_DP,
        "DP keyed by value in a std::map<int, int> (a tree walk per access)",
        [1000, 2000, 4000, 8000],
    ),
}


def make_input(name: str, n: int, rng: random.Random) -> str:
    if name == "concat":
        words = [
            "".join(rng.choice("abcdefghij") for _ in range(rng.randint(3, 12))) for _ in range(n)
        ]
        return f"{n}\n" + " ".join(words) + "\n"
    values = [rng.randint(0, 10**6) if name == "map_dp" else rng.randint(1, 4096) for _ in range(n)]
    return f"{n}\n" + " ".join(map(str, values)) + "\n"


def write_program(root: Path, name: str) -> tuple[Path, Path]:
    source, _, sizes = PROGRAMS[name]
    target = root / f"{name}.cpp"
    target.write_text(source)
    inputs = root / f"{name}_inputs"
    inputs.mkdir()
    rng = random.Random(name)
    for i, n in enumerate(sizes):
        (inputs / f"input.{i}.txt").write_text(make_input(name, n, rng))
    return target, inputs


def timed_run(exe: Path, stdin: Path) -> float:
    """Seconds from spawn to exit, as a launcher sees them (posix_spawn, output discarded)."""
    with stdin.open("rb") as inp, open(os.devnull, "wb") as out:
        actions = [(os.POSIX_SPAWN_DUP2, inp.fileno(), 0), (os.POSIX_SPAWN_DUP2, out.fileno(), 1)]
        t0 = time.perf_counter()
        pid = os.posix_spawn(str(exe), [str(exe)], {}, file_actions=actions)
        _, status = os.waitpid(pid, 0)
        took = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{exe} failed on {stdin}")
    return took


def independent_speedup(
    original: Path,
    best: Path,
    inputs: list[Path],
    flags: str,
    repeats: int,
    min_seconds: float,
    work: Path,
) -> dict:
    """Both programs built here with g++ and the flags, timed in a plain interleaved loop."""
    binaries = {}
    for role, src in (("original", original), ("best", best)):
        exe = work / f"{role}.bin"
        subprocess.run(["g++", *shlex.split(flags), "-o", str(exe), str(src)], check=True)
        binaries[role] = exe
    # A plain interleaved loop: in each batch the original runs once and the best `batch`
    # times (as many as fit in 0.25 s, at most 25), the batch taking the best's fastest run; at least --repeats batches and --min-seconds of the original's runs.
    # The speedup is the ratio of the medians over the batches; the medians of every
    # single run (hyperfine's figure) are stored beside it.
    first = {role: timed_run(exe, inputs[0]) for role, exe in binaries.items()}
    batch = min(25, max(1, math.ceil(0.25 / max(first["best"], 1e-4))))
    runs: dict[str, list[float]] = {"original": [], "best": []}
    batches: dict[str, list[float]] = {"original": [], "best": []}
    while len(batches["original"]) < repeats or sum(runs["original"]) < min_seconds:
        runs["original"].append(sum(timed_run(binaries["original"], p) for p in inputs))
        batches["original"].append(runs["original"][-1])
        best = [sum(timed_run(binaries["best"], p) for p in inputs) for _ in range(batch)]
        runs["best"] += best
        batches["best"].append(min(best))
    med_o, med_b = statistics.median(batches["original"]), statistics.median(batches["best"])
    return {
        "batches": len(batches["original"]),
        "best_runs_per_batch": batch,
        "original_median_s": med_o,
        "best_median_s": med_b,
        "speedup": med_o / med_b,
        "every_run_median_speedup": statistics.median(runs["original"])
        / statistics.median(runs["best"]),
    }


def one_program(name: str, root: Path, args) -> dict:
    target, inputs = write_program(root, name)
    out = root / f"{name}_out"
    cmd = [
        sys.executable,
        "-m",
        "maxcode",
        "optimize",
        str(target),
        "--tests",
        str(inputs),
        "--make-tests",
        "4",
    ]
    cmd += [
        "--out",
        str(out),
        "--depth",
        str(args.depth),
        "--k",
        str(args.k),
        "--cxxflags",
        args.cxxflags,
    ]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    took = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{name}: maxcode optimize failed:\n{proc.stderr[-3000:]}")
    summary = proc.stdout.splitlines()[0]
    row = {
        "pattern": PROGRAMS[name][1],
        "test_sizes": PROGRAMS[name][2],
        "optimize_s": round(took, 1),
        "first_line": proc.stderr.splitlines()[0],
        "summary": summary,
        "best_written": (out / "best.cpp").exists(),
    }
    records = [json.loads(line) for line in (out / "run.jsonl").read_text().splitlines()]
    end = records[-1]
    winner = next((r for r in records if r.get("candidate_id") == end["best_candidate_id"]), None)
    row["search_speedup_on_tests"] = end["best_reward"]
    if winner is not None:
        # Per-test instruction ratios, original / best: a ratio that grows like n^g across
        # the tests' sizes n means the best does asymptotically less work (g ~ 1: n^2 -> n).
        figures = winner["evaluation"]["figures"]
        ratios = [
            ref / row_["instructions"]
            for ref, row_ in zip(figures["reference_tests"], figures["tests"], strict=True)
        ]
        sizes = PROGRAMS[name][2]
        row["per_test_instruction_ratio"] = [round(r, 3) for r in ratios]
        row["ratio_growth_exponent"] = round(
            math.log(ratios[-1] / ratios[0]) / math.log(sizes[-1] / sizes[0]), 2
        )
    row["best_transformations"] = (winner or {}).get("meta", {}).get("transformations")
    confirmation_path = out / "confirmation.json"
    if not confirmation_path.exists():
        return row
    confirmation = json.loads(confirmation_path.read_text())
    row["confirmation"] = confirmation
    # The best candidate the confirmation timed, whether or not its gain was enough to write it.
    best = root / f"{name}_best.cpp"
    best.write_text(winner["source"])
    inputs = [Path(p) for p in confirmation["inputs"]]
    indep = independent_speedup(
        target, best, inputs, args.cxxflags, args.repeats, args.min_seconds, root
    )
    row["independent"] = indep
    row["confirmed_over_independent"] = confirmation["speedup"] / indep["speedup"]
    row["within_20_percent"] = abs(row["confirmed_over_independent"] - 1) <= 0.2
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--programs", nargs="+", default=list(PROGRAMS), choices=list(PROGRAMS))
    ap.add_argument(
        "--cxxflags", default="--std=c++17 -O2", help="the user's flags (default: %(default)s)"
    )
    ap.add_argument("--depth", type=int, default=3)
    ap.add_argument("--k", type=int, default=3)
    ap.add_argument(
        "--repeats", type=int, default=10, help="independent timing: at least N runs per binary"
    )
    ap.add_argument(
        "--min-seconds",
        type=float,
        default=3.0,
        help="independent timing: at least this many seconds of runs per binary",
    )
    add_json_argument(ap, BENCHMARK)
    args = ap.parse_args()
    results: dict = {
        "machine": {
            "cpu": platform.processor() or platform.machine(),
            "python": platform.python_version(),
        },
        "settings": {k: v for k, v in vars(args).items() if k != "json"},
        "programs": {},
    }
    try:
        with open("/proc/cpuinfo") as f:
            model = next(
                (line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), None
            )
        results["machine"]["cpu"] = model or results["machine"]["cpu"]
        with open("/proc/loadavg") as f:
            results["machine"]["loadavg_at_start"] = f.read().split()[:3]
    except OSError:
        pass
    with tempfile.TemporaryDirectory(prefix="bench-confirm-") as tmp:
        for name in args.programs:
            row = one_program(name, Path(tmp), args)
            results["programs"][name] = row
            c = row.get("confirmation") or {}
            ind = row.get("independent") or {}
            print(
                f"{name:7s} tests {row['search_speedup_on_tests']:.2f}x | confirmed "
                f"{c.get('speedup', float('nan')):.2f}x | independent {ind.get('speedup', float('nan')):.2f}x"
                f" | best written {row['best_written']} | {row['best_transformations']}",
                flush=True,
            )
    write_result(
        BENCHMARK, results, headlines(results["programs"]), json_path(args.json, BENCHMARK)
    )


def headlines(programs: dict) -> list[dict]:
    """Per program: the confirmed speedup against the independent timing of the same binaries."""
    out = []
    for name, row in programs.items():
        c, ind = row.get("confirmation") or {}, row.get("independent") or {}
        if c.get("speedup") and ind.get("speedup"):
            out.append(
                headline(
                    f"{name}: confirmed / independent wall-clock speedup",
                    f"{c['speedup']:.1f}x / {ind['speedup']:.1f}x",
                )
            )
    return out


if __name__ == "__main__":
    main()
