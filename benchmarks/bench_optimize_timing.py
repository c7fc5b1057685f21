"""How repeatable is the speedup `maxcode optimize` reports? Three slow C++ programs, R runs each.

The programs are written here (a word counter with ``std::map`` and ``endl``, prefix sums
rebuilt for every query, a matrix multiply in a cache-hostile loop order), with inputs whose
expected outputs the program itself makes (``--make-tests``). Each run starts from an empty
``--out`` (nothing is cached between runs) with the offline policy, so every difference between
runs of one program and mode comes from the timing, not from the search. Per program and
``--timing`` mode it prints the reported speedups and their spread, (max - min) / median.

    python3 benchmarks/bench_optimize_timing.py --modes wall instructions --repeats 5 --json t.json

Which code runs is whatever ``python -m maxcode`` imports (set PYTHONPATH to compare versions).
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from result_json import add_json_argument, headline, write_result

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


def wordcount_input(rng: random.Random) -> str:
    vocab = [
        "".join(rng.choice("abcdefghij") for _ in range(rng.randint(3, 9))) for _ in range(3000)
    ]
    return " ".join(rng.choice(vocab) for _ in range(60000)) + "\n"


def prefix_input(rng: random.Random) -> str:
    n, q = 4000, 1500
    lines = [f"{n} {q}", " ".join(str(rng.randint(-1000, 1000)) for _ in range(n))]
    for _ in range(q):
        lo = rng.randrange(n)
        lines.append(f"{lo} {rng.randrange(lo, n)}")
    return "\n".join(lines) + "\n"


def matmul_input(rng: random.Random) -> str:
    n = 160
    rows = [" ".join(f"{rng.uniform(-1, 1):.2f}" for _ in range(n)) for _ in range(2 * n)]
    return f"{n}\n" + "\n".join(rows) + "\n"


PROGRAMS = {
    "wordcount": (WORDCOUNT, wordcount_input),
    "prefix_sums": (PREFIX, prefix_input),
    "matmul": (MATMUL, matmul_input),
}


def write_program(root: Path, name: str, n_inputs: int) -> tuple[Path, Path]:
    source, make_input = PROGRAMS[name]
    target = root / f"{name}.cpp"
    target.write_text(source)
    inputs = root / f"{name}_inputs"
    inputs.mkdir(exist_ok=True)
    rng = random.Random(name)
    for i in range(n_inputs):
        (inputs / f"input.{i}.txt").write_text(make_input(rng))
    return target, inputs


def one_run(target: Path, inputs: Path, n_inputs: int, out: Path, mode: str | None, args) -> dict:
    cmd = [
        sys.executable,
        "-m",
        "maxcode",
        "optimize",
        str(target),
        "--tests",
        str(inputs),
        "--make-tests",
        str(n_inputs),
        "--out",
        str(out),
        "--depth",
        str(args.depth),
        "--k",
        str(args.k),
    ]
    if mode is not None:
        cmd += ["--timing", mode]
    started = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.monotonic() - started
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    end = [json.loads(line) for line in (out / "run.jsonl").read_text().splitlines()][-1]
    return {
        "speedup": end["best_reward"],
        "wall_s": wall,
        "first_line": proc.stderr.splitlines()[0],
    }


def spread(values: list[float]) -> float:
    return (max(values) - min(values)) / statistics.median(values)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--modes",
        nargs="+",
        default=["wall", "instructions"],
        help="--timing values; 'default' runs without --timing",
    )
    ap.add_argument("--programs", nargs="+", default=list(PROGRAMS), choices=list(PROGRAMS))
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--inputs", type=int, default=3, help="test inputs per program")
    ap.add_argument("--depth", type=int, default=2)
    ap.add_argument("--k", type=int, default=4)
    add_json_argument(ap, "optimize-timing")
    args = ap.parse_args()
    results: dict = {
        "platform": platform.platform(),
        "args": vars(args) | {"json": str(args.json)},
        "runs": {},
    }
    headlines = []
    with tempfile.TemporaryDirectory(prefix="bench-optimize-") as tmp:
        root = Path(tmp)
        for name in args.programs:
            target, inputs = write_program(root, name, args.inputs)
            for mode in args.modes:
                runs = [
                    one_run(
                        target,
                        inputs,
                        args.inputs,
                        root / f"{name}-{mode}-{r}",
                        None if mode == "default" else mode,
                        args,
                    )
                    for r in range(args.repeats)
                ]
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


if __name__ == "__main__":
    main()
