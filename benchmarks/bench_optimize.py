"""`maxcode optimize` on slow C++ programs written here: how far its reported speedup can be trusted.

Subcommands (``SUBCOMMAND --help`` for its options); each runs ``python -m maxcode optimize``
with the offline policy into a fresh ``--out`` per run (nothing cached between runs), on
programs written here with PIE-style tests whose expected outputs the program itself makes
(``--make-tests``):

* ``timing``: how repeatable the reported speedup is, per ``--timing`` mode. Three programs (a
  word counter with ``std::map`` and ``endl``, prefix sums rebuilt for every query, a matrix
  multiply in a cache-hostile loop order), ``--repeats`` runs per program and mode; every
  difference between the runs of one program and mode comes from the timing, not from the
  search. Prints the reported speedups and their spread, (max - min) / median.
  Result: ``optimize-timing``.
* ``confirm``: whether the wall-clock confirmation matches an independent timing of the same
  binaries. Three programs with a quadratic (or tree-walk) pattern (``concat``: ``s = s + w``
  in a loop; ``queue``: a vector drained with ``erase(begin())``; ``map_dp``: a DP keyed by
  value in a ``std::map``), four tests of growing size each, the user's ``--cxxflags``. The
  confirmation times the original and the best on the largest test scaled up; then this
  benchmark builds both itself with ``g++`` and the same flags (outside maxcode's cache and
  sandbox) and times them on the same input in a plain interleaved loop. It reports both
  speedups and their ratio; the claim checked is agreement within 20%.
  Result: ``optimize-confirm``.

    python3 benchmarks/bench_optimize.py timing --modes wall instructions --repeats 5
    python3 benchmarks/bench_optimize.py confirm --programs concat --repeats 2 --json c.json

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
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from result_json import add_json_argument, headline, json_path, write_result

from maxcode.records import hardware_fingerprint

WORDCOUNT = r"""#include <iostream>
#include <map>
#include <string>
using namespace std;
int main() {
    map<string, int> counts;
    string w;
    while (cin >> w) counts[w]++;
    for (auto it = counts.begin(); it != counts.end(); ++it) {
        if (it->second > 40) cout << it->first << " " << it->second << endl;
    }
    cout << counts.size() << endl;
    return 0;
}
"""

PREFIX = r"""#include <iostream>
#include <vector>
using namespace std;
int main() {
    int n, q;
    cin >> n >> q;
    vector<long long> a(n);
    for (int i = 0; i < n; i++) cin >> a[i];
    for (int t = 0; t < q; t++) {
        int l, r;
        cin >> l >> r;
        vector<long long> pre;
        pre.push_back(0);
        for (int i = 0; i < n; i++) pre.push_back(pre[i] + a[i]);
        cout << pre[r + 1] - pre[l] << endl;
    }
    return 0;
}
"""

MATMUL = r"""#include <cstdio>
#include <vector>
using namespace std;
int main() {
    int n;
    if (scanf("%d", &n) != 1) return 1;
    vector<vector<double>> a(n, vector<double>(n)), b(n, vector<double>(n)), c(n, vector<double>(n, 0.0));
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) scanf("%lf", &a[i][j]);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) scanf("%lf", &b[i][j]);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            for (int k = 0; k < n; k++) c[i][j] += a[i][k] * b[k][j];
    double trace = 0.0, total = 0.0;
    for (int i = 0; i < n; i++) {
        trace += c[i][i];
        for (int j = 0; j < n; j++) total += c[i][j];
    }
    printf("%.3f %.3f\n", trace, total);
    return 0;
}
"""

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


def wordcount_input(rng: random.Random, n: int) -> str:
    vocab = [
        "".join(rng.choice("abcdefghij") for _ in range(rng.randint(3, 9))) for _ in range(3000)
    ]
    return " ".join(rng.choice(vocab) for _ in range(n)) + "\n"


def prefix_input(rng: random.Random, n: int) -> str:
    q = 1500
    lines = [f"{n} {q}", " ".join(str(rng.randint(-1000, 1000)) for _ in range(n))]
    for _ in range(q):
        lo = rng.randrange(n)
        lines.append(f"{lo} {rng.randrange(lo, n)}")
    return "\n".join(lines) + "\n"


def matmul_input(rng: random.Random, n: int) -> str:
    rows = [" ".join(f"{rng.uniform(-1, 1):.2f}" for _ in range(n)) for _ in range(2 * n)]
    return f"{n}\n" + "\n".join(rows) + "\n"


def concat_input(rng: random.Random, n: int) -> str:
    words = ["".join(rng.choice("abcdefghij") for _ in range(rng.randint(3, 12))) for _ in range(n)]
    return f"{n}\n" + " ".join(words) + "\n"


def queue_input(rng: random.Random, n: int) -> str:
    return f"{n}\n" + " ".join(str(rng.randint(1, 4096)) for _ in range(n)) + "\n"


def map_dp_input(rng: random.Random, n: int) -> str:
    return f"{n}\n" + " ".join(str(rng.randint(0, 10**6)) for _ in range(n)) + "\n"


@dataclass(frozen=True)
class Program:
    """A slow program, what makes it slow, and its test inputs (one per size, seeded by name)."""

    source: str
    pattern: str
    make_input: Callable[[random.Random, int], str]
    sizes: tuple[int, ...]


TIMING_PROGRAMS = {
    "wordcount": Program(WORDCOUNT, "std::map word count with endl", wordcount_input, (60000,)),
    "prefix_sums": Program(PREFIX, "prefix sums rebuilt per query", prefix_input, (4000,)),
    "matmul": Program(MATMUL, "matrix multiply in i-j-k order", matmul_input, (160,)),
}
"""``timing``: each test has the program's one size (``--inputs`` of them)."""

CONFIRM_PROGRAMS = {
    "concat": Program(
        CONCAT, "s = s + x concatenation in a loop (O(n^2))", concat_input, (500, 1000, 2000, 4000)
    ),
    "queue": Program(
        QUEUE, "vector erase(begin()) in a loop (O(n^2))", queue_input, (1000, 2000, 4000, 8000)
    ),
    "map_dp": Program(
        MAP_DP,
        "DP keyed by value in a std::map<int, int> (a tree walk per access)",
        map_dp_input,
        (1000, 2000, 4000, 8000),
    ),
}
"""``confirm``: tests of growing size, so the instruction ratio's growth shows the complexity."""


def write_program(root: Path, name: str, program: Program, sizes: list[int]) -> tuple[Path, Path]:
    """The program's source and one test input per size (the same inputs on every machine)."""
    target = root / f"{name}.cpp"
    target.write_text(program.source)
    inputs = root / f"{name}_inputs"
    inputs.mkdir(exist_ok=True)
    rng = random.Random(name)
    for i, n in enumerate(sizes):
        (inputs / f"input.{i}.txt").write_text(program.make_input(rng, n))
    return target, inputs


def run_optimize(
    target: Path, inputs: Path, n_tests: int, out: Path, args: argparse.Namespace, *extra: str
) -> tuple[subprocess.CompletedProcess, list[dict], float]:
    """One ``maxcode optimize`` run: its process, its run.jsonl records and its wall seconds."""
    cmd = [sys.executable, "-m", "maxcode", "optimize", str(target), "--tests", str(inputs)]
    cmd += ["--make-tests", str(n_tests), "--out", str(out)]
    cmd += ["--depth", str(args.depth), "--k", str(args.k), *extra]
    started = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    wall = time.monotonic() - started
    if proc.returncode != 0:
        raise SystemExit(f"{shlex.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    records = [json.loads(line) for line in (out / "run.jsonl").read_text().splitlines()]
    return proc, records, wall


def machine() -> dict:
    """The project's hardware fingerprint and the load at the start: wall-clock figures depend
    on both."""
    load = [round(x, 2) for x in os.getloadavg()]
    return hardware_fingerprint() | {"platform": platform.platform(), "loadavg_at_start": load}


# -- timing: how repeatable is the reported speedup? ------------------------------------------


def spread(values: list[float]) -> float:
    return (max(values) - min(values)) / statistics.median(values)


def cmd_timing(args: argparse.Namespace) -> None:
    settings = {k: v for k, v in vars(args).items() if k not in ("run", "func")}
    results: dict = {"machine": machine(), "args": settings | {"json": str(args.json)}}
    results["runs"] = {}
    headlines = []
    with tempfile.TemporaryDirectory(prefix="bench-optimize-") as tmp:
        root = Path(tmp)
        for name in args.programs:
            program = TIMING_PROGRAMS[name]
            target, inputs = write_program(root, name, program, [program.sizes[0]] * args.inputs)
            for mode in args.modes:
                runs = []
                for r in range(args.repeats):
                    timing = [] if mode == "default" else ["--timing", mode]
                    out = root / f"{name}-{mode}-{r}"
                    proc, records, wall = run_optimize(
                        target, inputs, args.inputs, out, args, *timing
                    )
                    first = proc.stderr.splitlines()[0]
                    runs.append(
                        {"speedup": records[-1]["best_reward"], "wall_s": wall, "first_line": first}
                    )
                speedups = [r["speedup"] for r in runs]
                results["runs"][f"{name}/{mode}"] = runs
                headlines.append(
                    headline(
                        f"{name}, {mode}: spread of the reported speedup",
                        round(spread(speedups) * 100, 1),
                        "%",
                    )
                )
                print(
                    f"{name:12s} {mode:13s} speedups {' '.join(f'{s:.3f}' for s in speedups)}  "
                    f"median {statistics.median(speedups):.3f}  spread {spread(speedups) * 100:.1f}%  "
                    f"({statistics.mean(r['wall_s'] for r in runs):.0f} s/run)",
                    flush=True,
                )
    print("wrote", write_result("optimize-timing", results, headlines, args.json))


# -- confirm: does the confirmed speedup match an independent timing? -------------------------


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
    # times (as many as fit in 0.25 s, at most 25), the batch taking the best's fastest run;
    # at least --repeats batches and --min-seconds of the original's runs. The speedup is the
    # ratio of the medians over the batches; the medians of every single run (hyperfine's
    # figure) are stored beside it.
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


def confirm_program(name: str, root: Path, args: argparse.Namespace) -> dict:
    program = CONFIRM_PROGRAMS[name]
    sizes = list(program.sizes)
    target, inputs = write_program(root, name, program, sizes)
    out = root / f"{name}_out"
    proc, records, took = run_optimize(
        target, inputs, len(sizes), out, args, "--cxxflags", args.cxxflags
    )
    row = {
        "pattern": program.pattern,
        "test_sizes": sizes,
        "optimize_s": round(took, 1),
        "first_line": proc.stderr.splitlines()[0],
        "summary": proc.stdout.splitlines()[0],
        "best_written": (out / "best.cpp").exists(),
    }
    end = records[-1]
    winner = next((r for r in records if r.get("candidate_id") == end["best_candidate_id"]), None)
    row["search_speedup_on_tests"] = end["best_reward"]
    if winner is not None:
        # Per-test instruction ratios, original / best: a ratio that grows like n^g across
        # the tests' sizes n means the best does asymptotically less work (g ~ 1: n^2 -> n).
        figures = winner["evaluation"]["figures"]
        ratios = [
            ref / test["instructions"]
            for ref, test in zip(figures["reference_tests"], figures["tests"], strict=True)
        ]
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
    confirmed_on = [Path(p) for p in confirmation["inputs"]]
    indep = independent_speedup(
        target, best, confirmed_on, args.cxxflags, args.repeats, args.min_seconds, root
    )
    row["independent"] = indep
    row["confirmed_over_independent"] = confirmation["speedup"] / indep["speedup"]
    row["within_20_percent"] = abs(row["confirmed_over_independent"] - 1) <= 0.2
    return row


def cmd_confirm(args: argparse.Namespace) -> None:
    settings = {k: v for k, v in vars(args).items() if k not in ("json", "run", "func")}
    results: dict = {"machine": machine(), "settings": settings, "programs": {}}
    with tempfile.TemporaryDirectory(prefix="bench-confirm-") as tmp:
        for name in args.programs:
            row = confirm_program(name, Path(tmp), args)
            results["programs"][name] = row
            c = row.get("confirmation") or {}
            ind = row.get("independent") or {}
            print(
                f"{name:7s} tests {row['search_speedup_on_tests']:.2f}x | confirmed "
                f"{c.get('speedup', float('nan')):.2f}x | independent {ind.get('speedup', float('nan')):.2f}x"
                f" | best written {row['best_written']} | {row['best_transformations']}",
                flush=True,
            )
    path = json_path(args.json, "optimize-confirm")
    print(
        "wrote",
        write_result("optimize-confirm", results, confirm_headlines(results["programs"]), path),
    )


def confirm_headlines(programs: dict) -> list[dict]:
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


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="run", required=True)
    timing = sub.add_parser(
        "timing", help="repeatability of the reported speedup per --timing mode"
    )
    timing.add_argument(
        "--modes",
        nargs="+",
        default=["wall", "instructions"],
        help="--timing values; 'default' runs without --timing",
    )
    timing.add_argument(
        "--programs", nargs="+", default=list(TIMING_PROGRAMS), choices=list(TIMING_PROGRAMS)
    )
    timing.add_argument("--repeats", type=int, default=5, help="runs per program and mode")
    timing.add_argument("--inputs", type=int, default=3, help="test inputs per program")
    timing.add_argument("--depth", type=int, default=2)
    timing.add_argument("--k", type=int, default=4)
    add_json_argument(timing, "optimize-timing")
    timing.set_defaults(func=cmd_timing)
    confirm = sub.add_parser(
        "confirm", help="the wall-clock confirmation against an independent timing"
    )
    confirm.add_argument(
        "--programs", nargs="+", default=list(CONFIRM_PROGRAMS), choices=list(CONFIRM_PROGRAMS)
    )
    confirm.add_argument(
        "--cxxflags", default="--std=c++17 -O2", help="the user's flags (default: %(default)s)"
    )
    confirm.add_argument("--depth", type=int, default=3)
    confirm.add_argument("--k", type=int, default=3)
    confirm.add_argument(
        "--repeats", type=int, default=10, help="independent timing: at least N runs per binary"
    )
    confirm.add_argument(
        "--min-seconds",
        type=float,
        default=3.0,
        help="independent timing: at least this many seconds of runs per binary",
    )
    add_json_argument(confirm, "optimize-confirm")
    confirm.set_defaults(func=cmd_confirm)
    args = parser.parse_args(argv)
    args.func(args)


if __name__ == "__main__":
    main()
