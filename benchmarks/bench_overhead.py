"""Overheads around the expensive parts: the LLM layer and the search loop. Subcommands:

``llm``: cache-hit cost per call, and request throughput against the fake OpenAI-compatible
server at 1, 8 and 32 calls in flight. Every ratio compares against a baseline measured in
the same run: ``LLMClient.complete`` answered from SQLite vs a raw ``ResponseCache.get`` and vs
an uncached call through the openai SDK to the local server; calls/s with the server adding a
fixed latency (a model's generation time) against the ideal ``in_flight / latency``, and with
no latency (pure client + SDK + HTTP overhead). The server runs in its own process, as a real
one would, so its work does not compete with the client for this interpreter's GIL.

``search``: the time the search loop spends outside LLM calls and evaluations per step. Runs
the real loop (observation building, record writing with fsync, returns) with a policy and
evaluator that answer instantly, and compares the per-step overhead with the cost of one real
C++ evaluation measured in the same run.

    PYTHONPATH=src python benchmarks/bench_overhead.py llm [--latency 0.05] [--hits 2000]
    PYTHONPATH=src python benchmarks/bench_overhead.py search [--depth 8] [--k 8]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from result_json import add_json_argument, headline, write_result

from maxcode.evaluate.result import EvalResult, Status, Timing
from maxcode.llm.backend import SamplingParams
from maxcode.llm.cache import ResponseCache, cache_key
from maxcode.llm.client import LLMClient
from maxcode.llm.config import role_config_from_dict
from maxcode.llm.factory import build_client
from maxcode.records import provenance
from maxcode.search.config import MethodConfig
from maxcode.search.loop import RunContext, run_search
from maxcode.search.types import Critique, Observation, Proposal
from maxcode.tasks.model import Task

LEVELS = (1, 8, 32)
MSGS = [
    {"role": "system", "content": "You optimize C++ programs for speed."},
    {
        "role": "user",
        "content": "```cpp\n#include <iostream>\nint main() { int a; std::cin >> a; "
        "std::cout << a << std::endl; }\n```\n" + "context line\n" * 200,
    },
]


@contextlib.contextmanager
def fake_server(latency: float) -> Iterator[str]:
    """``python -m maxcode.llm.fake_servers`` on a free port; yields the OpenAI base URL."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [sys.executable, "-m", "maxcode.llm.fake_servers", "--port", str(port)]
    proc = subprocess.Popen([*cmd, "--latency", str(latency)], stdout=subprocess.PIPE, text=True)
    try:
        proc.stdout.readline()  # printed once the socket is bound
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        proc.terminate()
        proc.wait(10)


def _client(base_url: str, cache: ResponseCache | None, concurrency: int = 8) -> LLMClient:
    cfg = role_config_from_dict(
        "generator",
        {
            "backend": "openai",
            "model": "bench",
            "base_url": base_url,
            "concurrency": concurrency,
            "cache_path": None,
            "max_retries": 0,
        },
    )
    return build_client(cfg, "generator", cache=cache)


def bench_cache_hits(base_url: str, hits: int, tmp: Path) -> dict:
    cache = ResponseCache(tmp / "bench_cache.sqlite")
    client = _client(base_url, cache)
    client.complete(MSGS, n=1, seed=0)  # fill
    t0 = time.perf_counter()
    for _ in range(hits):
        client.complete(MSGS, n=1, seed=0)
    per_hit = (time.perf_counter() - t0) / hits
    if client.usage.calls != 1:
        raise RuntimeError(f"cache hits reached the server: {client.usage}")
    key = cache_key("openai", "bench", MSGS, SamplingParams.from_role(client.cfg, 0), 0)
    t0 = time.perf_counter()
    for _ in range(hits):
        cache.get(key)
    per_get = (time.perf_counter() - t0) / hits
    uncached = _client(base_url, None)
    uncached.complete(MSGS, n=1, seed=999)  # open the connection
    n_miss = max(20, hits // 50)
    t0 = time.perf_counter()
    for i in range(n_miss):
        uncached.complete(MSGS, n=1, seed=1000 + i)
    per_miss = (time.perf_counter() - t0) / n_miss
    return {
        "hit_us": per_hit * 1e6,
        "raw_sqlite_get_us": per_get * 1e6,
        "uncached_call_us": per_miss * 1e6,
        "hit_vs_raw_get": per_hit / per_get,
        "uncached_vs_hit": per_miss / per_hit,
    }


def bench_throughput(latency: float, calls_per_level: int) -> list[dict]:
    rows = []
    with fake_server(latency) as base_url:
        for in_flight in LEVELS:
            client = _client(base_url, None, concurrency=in_flight)
            n = max(calls_per_level, 4 * in_flight)
            client.complete(MSGS, n=in_flight, seed=10**6 + in_flight)  # open connections
            t0 = time.perf_counter()
            client.complete(MSGS, n=n, seed=in_flight)
            wall = time.perf_counter() - t0
            row = {
                "latency_s": latency,
                "in_flight": in_flight,
                "calls": n,
                "calls_per_s": n / wall,
            }
            if latency > 0:
                row["ideal_calls_per_s"] = in_flight / latency
                row["efficiency"] = row["calls_per_s"] / row["ideal_calls_per_s"]
            rows.append(row)
    return rows


def main_llm(ap: argparse.ArgumentParser, argv: list[str]) -> None:
    ap.add_argument("--latency", type=float, default=0.05, help="server latency per call (s)")
    ap.add_argument("--hits", type=int, default=2000, help="cache hits to time")
    ap.add_argument("--calls", type=int, default=64, help="calls per concurrency level")
    add_json_argument(ap, "llm-overhead")
    args = ap.parse_args(argv)
    os.environ.setdefault("OPENAI_API_KEY", "bench-key")
    with tempfile.TemporaryDirectory() as tmp, fake_server(0.0) as base_url:
        hits = bench_cache_hits(base_url, args.hits, Path(tmp))
    print("cache hit overhead")
    print(f"  LLMClient.complete, cache hit : {hits['hit_us']:9.1f} us/call")
    print(
        f"  raw ResponseCache.get         : {hits['raw_sqlite_get_us']:9.1f} us/call "
        f"(hit = {hits['hit_vs_raw_get']:.2f}x raw get)"
    )
    print(
        f"  uncached call, local server   : {hits['uncached_call_us']:9.1f} us/call "
        f"({hits['uncached_vs_hit']:.1f}x a hit)"
    )
    rows = bench_throughput(args.latency, args.calls) + bench_throughput(0.0, args.calls)
    print("throughput: openai SDK -> fake OpenAI-compatible server (own process)")
    for r in rows:
        line = (
            f"  latency {r['latency_s'] * 1e3:5.1f} ms  in flight {r['in_flight']:3d}: "
            f"{r['calls_per_s']:8.1f} calls/s"
        )
        if "ideal_calls_per_s" in r:
            line += f"  (ideal {r['ideal_calls_per_s']:.0f}, efficiency {r['efficiency']:.2f})"
        print(line)
    figures = {"cache": hits, "throughput": rows, "provenance": provenance(vars(args))}
    headlines = [
        headline("LLMClient.complete answered from the cache", round(hits["hit_us"], 1), "us")
    ]
    headlines += [
        headline(
            f"calls/s, {r['in_flight']} in flight, {r['latency_s'] * 1e3:.0f} ms server latency",
            round(r["calls_per_s"], 1),
        )
        for r in rows
        if r["in_flight"] == max(x["in_flight"] for x in rows)
    ]
    print("wrote", write_result("llm-overhead", figures, headlines, args.json))


class InstantPolicy:
    name, offline = "instant", True

    def propose(self, obs: Observation, k: int, rng: random.Random) -> list[Proposal]:
        body = "x" * 4000  # a realistic source size: records carry full sources
        return [Proposal(source=f"// {obs.step}.{i}.{rng.random()}\n{body}") for i in range(k)]


class InstantEvaluator:
    name = "instant"

    def evaluate(self, task: Task, source: str) -> EvalResult:
        return EvalResult(
            Status.OK, timing=Timing("wall", "s", 0.5 + random.random(), 1.0), evaluator="instant"
        )


class InstantCritic:
    name, offline = "instant", True

    def critique(self, task: Task, source: str, result: EvalResult) -> Critique:
        return Critique("memory-bound: fuse the loops", "instant", True)


def overhead_per_step(depth: int, k: int, repeats: int) -> list[float]:
    task = Task(task_id="t", suite="bench", language="cpp", reference_source="int main(){}")
    method = MethodConfig(name="full", depth=depth, k=k, trajectory="all", critique=True, best=True)
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(repeats):
            ctx = RunContext(task, method, r, InstantPolicy(), InstantEvaluator(), InstantCritic())
            start = time.perf_counter()
            run_search(ctx, Path(tmp) / f"run{r}.jsonl")
            out.append((time.perf_counter() - start) / depth)
    return out


def one_real_evaluation() -> float:
    from maxcode.evaluate.cpp import CppEvalConfig, CppEvaluator
    from maxcode.tasks.builtin import materialize_builtin_cpp

    with tempfile.TemporaryDirectory() as tmp:
        task = materialize_builtin_cpp(
            Path(tmp) / "suite", n_tests=3, problems=["io_prefix_sums_endl"]
        )[0]
        evaluator = CppEvaluator(CppEvalConfig(), Path(tmp) / "cache")
        evaluator.evaluate(task, task.reference_source)  # warm: reference timing and compiler
        variant = task.reference_source + "\n// variant\n"
        start = time.perf_counter()
        evaluator.evaluate(task, variant)
        return time.perf_counter() - start


def main_search(ap: argparse.ArgumentParser, argv: list[str]) -> None:
    ap.add_argument("--depth", type=int, default=8, help="search steps")
    ap.add_argument("--k", type=int, default=8, help="proposals per step")
    ap.add_argument("--repeats", type=int, default=5, help="searches timed")
    add_json_argument(ap, "search-overhead")
    args = ap.parse_args(argv)
    per_step = overhead_per_step(args.depth, args.k, args.repeats)
    med = statistics.median(per_step)
    print(
        f"loop overhead per step (k={args.k}, full observation): median {med * 1e3:.2f} ms over {args.repeats} runs"
    )
    eval_s = one_real_evaluation()
    print(f"one real C++ evaluation (compile + tests + timing): {eval_s * 1e3:.1f} ms")
    print(f"overhead per step / one evaluation: {med / eval_s:.4f}")
    print(f"overhead per step / the step's {args.k} evaluations: {med / (args.k * eval_s):.5f}")
    figures = {"args": vars(args) | {"json": None}, "overhead_per_step_s": per_step}
    figures |= {"one_cpp_evaluation_s": eval_s}
    headlines = [
        headline(f"search loop overhead per step (k={args.k})", round(med * 1e3, 2), "ms"),
        headline("the same / the step's evaluations", round(med / (args.k * eval_s), 5)),
    ]
    print("wrote", write_result("search-overhead", figures, headlines, args.json))


PARTS = {"llm": main_llm, "search": main_search}


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] not in PARTS:
        top = argparse.ArgumentParser(
            description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
        )
        top.add_argument("part", choices=PARTS, help="what to measure; PART --help for its options")
        top.parse_args(argv[:1])
        return
    ap = argparse.ArgumentParser(prog=f"bench_overhead.py {argv[0]}")
    PARTS[argv[0]](ap, argv[1:])


if __name__ == "__main__":
    main()
