"""The GPU process loads the builds its compile job made, found by what the candidate asked for,
and says why when it cannot see one (on the H100 the jail once carried no build cache: every
candidate then tried a rebuild its read-only cache could not hold, reported as a timeout)."""

from __future__ import annotations

import json
import os
import stat

import pytest

from maxcode.evaluate.cuda.build import (
    BuildCache,
    BuildOutcome,
    ExtensionSpec,
    PrebuiltBuilds,
    readable_by_all,
)


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


def test_a_build_is_readable_by_the_sandbox_uids_under_a_strict_umask(tmp_path):
    """Under a umask of 077 a shared build would be 0700 root, hidden from the GPU process
    (another uid)."""
    old = os.umask(0o077)
    try:
        cache = BuildCache(tmp_path / "build", "9.0", host_pch=False)
        work = tmp_path / "build" / "tmp" / "w"
        work.mkdir()
        (work / "outcome.json").write_text("{}")
        (work / "k.so").write_text("")
        (work / "k.so").chmod(0o700)
        readable_by_all(work)
    finally:
        os.umask(old)
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in (work, *work.iterdir())}
    assert modes == {"w": 0o755, "outcome.json": 0o644, "k.so": 0o755}
    assert all(
        stat.S_IMODE((cache.root / sub).stat().st_mode) == 0o755 for sub in ("", "ext", "pch")
    )


def test_a_prebuilt_build_the_gpu_process_cannot_see_says_so_instead_of_rebuilding(tmp_path):
    cache = BuildCache(tmp_path / "build", "9.0")
    outcome = PrebuiltBuilds(cache, {spec().digest(): "gone"}).build(spec())
    assert not outcome.ok and outcome.failed_step == "load"
    assert "not visible to the GPU process" in outcome.first_error and "gone" in outcome.first_error
