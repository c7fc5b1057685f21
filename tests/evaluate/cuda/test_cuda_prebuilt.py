"""The GPU process loads the builds its compile job made, found by what the candidate asked for.

On the H100 (2026-11-24) the key the sandboxed GPU process computed for a spec differed from
the evaluator's, so every candidate was rebuilt there (and failed: its cache is read-only).
"""

from __future__ import annotations

import json

import pytest

from maxcode.evaluate.cuda.build import BuildCache, BuildOutcome, ExtensionSpec, PrebuiltBuilds


def spec(source: str = "torch::Tensor f(torch::Tensor x);") -> ExtensionSpec:
    return ExtensionSpec.from_load_inline(
        name="k", cpp_sources=source, cuda_sources="__global__ void k() {}", functions=["f"]
    )


@pytest.fixture
def cache_with_a_build(tmp_path) -> BuildCache:
    cache = BuildCache(tmp_path / "build", "9.0")
    built = tmp_path / "build" / "ext" / "key-from-the-evaluator"
    built.mkdir(parents=True)
    outcome = BuildOutcome(key=built.name, name="k", ok=True, so_path=str(built / "k.so"))
    (built / "outcome.json").write_text(json.dumps(outcome.to_dict()))
    return cache


def test_a_prebuilt_spec_is_loaded_without_computing_its_key_again(cache_with_a_build, monkeypatch):
    def probe_elsewhere(_spec):
        raise AssertionError("the GPU process computed a build key")

    monkeypatch.setattr(cache_with_a_build, "key_of", probe_elsewhere)
    builds = PrebuiltBuilds(cache_with_a_build, {spec().digest(): "key-from-the-evaluator"})
    outcome = builds.build(spec())
    assert outcome.ok and outcome.cached and outcome.key == "key-from-the-evaluator"


def test_a_spec_the_compile_job_never_saw_goes_to_the_cache(cache_with_a_build, monkeypatch):
    asked = []
    monkeypatch.setattr(
        cache_with_a_build, "build", lambda s, timeout_s=0: asked.append(s) or "built"
    )
    builds = PrebuiltBuilds(cache_with_a_build, {spec().digest(): "key-from-the-evaluator"})
    other = spec("torch::Tensor g(torch::Tensor x);")
    assert builds.build(other) == "built" and asked == [other]


def test_the_digest_survives_the_trip_through_the_compile_jobs_channel():
    asked = spec()
    assert (
        ExtensionSpec.from_dict(json.loads(json.dumps(asked.to_dict()))).digest() == asked.digest()
    )
