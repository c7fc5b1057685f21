"""LLM layer overheads: cache-hit cost per call, and request throughput against the
fake OpenAI-compatible server at 1, 8 and 32 calls in flight.

Every ratio compares against a baseline measured in the same run:
- cache hit: ``LLMClient.complete`` answered from SQLite vs a raw ``ResponseCache.get``
  and vs an uncached call through the openai SDK to the local server;
- throughput: calls/s with the server adding a fixed latency (a model's generation
  time) against the ideal ``in_flight / latency``, and calls/s with no latency (pure
  client + SDK + HTTP overhead).

The server runs in its own process, as a real one would, so its work does not compete
with the client for this interpreter's GIL.

Run: ``PYTHONPATH=src python benchmarks/bench_llm.py [--latency 0.05] [--hits 2000]``
"""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from result_json import add_json_argument, headline, write_result

from maxcode.llm.backend import SamplingParams
from maxcode.llm.cache import ResponseCache, cache_key
from maxcode.llm.client import LLMClient
from maxcode.llm.config import role_config_from_dict
from maxcode.llm.factory import build_client
from maxcode.records import provenance

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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--latency", type=float, default=0.05, help="server latency per call (s)")
    ap.add_argument("--hits", type=int, default=2000, help="cache hits to time")
    ap.add_argument("--calls", type=int, default=64, help="calls per concurrency level")
    add_json_argument(ap, "llm-overhead")
    args = ap.parse_args()
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


if __name__ == "__main__":
    main()
