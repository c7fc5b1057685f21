import multiprocessing as mp
import sqlite3

import pytest

from maxcode.llm.backend import Completion, SamplingParams
from maxcode.llm.cache import ResponseCache, cache_key

MSGS = [{"role": "user", "content": "make it fast"}]
P = SamplingParams(max_tokens=100, temperature=0.7, seed=3)


def test_key_depends_on_every_part():
    base = cache_key("openai", "m", MSGS, P, 0)
    assert base == cache_key("openai", "m", [dict(MSGS[0])], P, 0)
    others = {
        cache_key("anthropic", "m", MSGS, P, 0),
        cache_key("openai", "m2", MSGS, P, 0),
        cache_key("openai", "m", [{"role": "user", "content": "make it faster"}], P, 0),
        cache_key("openai", "m", MSGS, SamplingParams(100, 0.8, seed=3), 0),
        cache_key("openai", "m", MSGS, SamplingParams(100, 0.7, seed=4), 0),
        cache_key("openai", "m", MSGS, P, 1),
    }
    assert base not in others and len(others) == 6


def test_roundtrip_marks_hits_cached(tmp_path):
    cache = ResponseCache(tmp_path / "c.sqlite")
    c = Completion(
        "```cpp\nint main(){}\n```",
        thinking="t",
        finish_reason="stop",
        input_tokens=5,
        output_tokens=7,
    )
    cache.put("k", "openai:m", c)
    got = cache.get("k")
    assert got is not None and got.cached and got.text == c.text and got.output_tokens == 7
    assert cache.get("other") is None
    assert len(cache) == 1


def test_first_writer_wins_so_parallel_jobs_agree(tmp_path):
    a = ResponseCache(tmp_path / "c.sqlite")
    b = ResponseCache(tmp_path / "c.sqlite")
    first = a.put("k", "x", Completion("first"))
    second = b.put("k", "x", Completion("second"))
    assert first.text == "first" and second.text == "first"


def _writer(path: str, worker: int, n: int) -> None:
    cache = ResponseCache(path)
    for i in range(n):
        cache.put(f"{worker}-{i}", "x", Completion(f"text {worker} {i}"))
        cache.put("shared", "x", Completion(f"shared from {worker}"))


def test_parallel_processes_share_one_file(tmp_path):
    path = str(tmp_path / "c.sqlite")
    ResponseCache(path).close()
    procs = [mp.get_context("spawn").Process(target=_writer, args=(path, w, 40)) for w in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    cache = ResponseCache(path)
    assert len(cache) == 3 * 40 + 1
    assert cache.get("2-39").text == "text 2 39"


def test_a_file_that_is_not_a_cache_is_a_clear_error(tmp_path):
    bad = tmp_path / "c.sqlite"
    bad.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(
        sqlite3.DatabaseError, match=r"c\.sqlite: not a usable response cache.*move it away"
    ):
        ResponseCache(bad)
