"""Technique detection and the offline de-optimizing transformations, on small kernels."""

from __future__ import annotations

import pytest

from maxcode.kernelcompare.naive import LLMNaiveGenerator, SourceTransformGenerator
from maxcode.kernelcompare.techniques import differing, features

SLOW = """
__global__ void sum_rows(const float *m, float *out, int n) {
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    float acc = 0.0f;
    for (int k = 0; k < n; k++) acc += m[threadIdx.x * n + k];
    out[row] = acc;
}
"""
FAST = """
__constant__ float scale[1];
__global__ void sum_rows(const float *m, float *out, int n) {
    __shared__ float part[256];
    float regs[4];
    float acc = 0.0f;
    for (int k = threadIdx.x; k < n; k += blockDim.x) {
        acc += __ldg(m + blockIdx.x * n + k) * scale[0];
        __syncthreads();
    }
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) acc += __shfl_down_sync(0xffffffff, acc, off);
    part[threadIdx.x] = acc + tex1Dfetch(tex_m, 0) + __expf(regs[0]);
    if (threadIdx.x == 0) out[blockIdx.x] = part[0];
}
"""


def test_features_are_read_from_the_tree():
    slow, fast = features(SLOW), features(FAST)
    assert slow.strided_accesses == 1 and fast.strided_accesses == 0
    assert (fast.shared_decls, fast.constant_decls, fast.ldg_calls) == (1, 1, 1)
    assert (fast.unroll_pragmas, fast.warp_calls, fast.texture_uses) == (1, 1, 1)
    assert (fast.local_arrays, fast.fast_math_calls, fast.tiled_syncs) == (1, 1, 1)
    assert differing(slow, fast) == [
        "coalescing",
        "shared_memory",
        "tiling",
        "unrolling",
        "texture_memory",
        "constant_memory",
        "read_only_cache",
        "register_blocking",
        "warp_primitives",
        "fast_math",
    ]
    assert differing(fast, fast) == []


def test_comments_and_strings_do_not_count():
    code = '// __shared__ float x[4]; #pragma unroll\n__global__ void k(char *s) { s[0] = "__ldg"[0]; }'
    assert features(code).uses() == set()


def test_generator_rewrites_only_what_it_names():
    variant = SourceTransformGenerator().generate("b", "f.cu", FAST)
    assert variant.changes == {
        "drop_unroll_pragmas": 1,
        "ldg_to_plain_load": 1,
        "fast_math_to_precise": 1,
        "constant_to_global": 1,
    }
    assert "(*(m + blockIdx.x * n + k))" in variant.source
    assert "expf(regs[0])" in variant.source and "__expf" not in variant.source
    assert "__shfl_down_sync" in variant.source  # not a transformation it claims


def test_generator_says_why_there_is_no_variant():
    variant = SourceTransformGenerator(("drop_restrict",)).generate("b", "f.cu", SLOW)
    assert (
        variant.source is None and "drop_restrict" in variant.reason and "b/f.cu" in variant.reason
    )
    with pytest.raises(ValueError, match="unknown naive transformation"):
        SourceTransformGenerator(("remove_everything",))


def test_llm_generator_goes_through_the_cached_client(fake_llm_server, api_keys, tmp_path):
    """The project's real OpenAI client against the local fake server: the fake answers
    CUDA-without-Model prompts with prose, so no variant; the rerun is a cache hit."""
    from maxcode.llm.config import role_config_from_dict
    from maxcode.llm.factory import build_client, open_cache

    cfg = role_config_from_dict(
        "generator",
        {"backend": "openai", "model": "fake-model", "base_url": fake_llm_server.openai_base_url},
    )
    client = build_client(cfg, "generator", cache=open_cache(tmp_path / "llm.sqlite"))
    generator = LLMNaiveGenerator(client)
    first = generator.generate("b", "f.cu", FAST)
    calls = fake_llm_server.count()
    second = generator.generate("b", "f.cu", FAST)
    assert first.source is None and "no ```cuda code block" in first.reason
    assert second.reason == first.reason and fake_llm_server.count() == calls == 1
    assert generator.name.startswith("llm:") and generator.name.endswith("kernelcompare-naive/v1")


class _Answer:
    def __init__(self, text: str):
        self.text = text


def test_llm_generator_checks_the_kernels_of_the_answer():
    """A client answering fixed text: the check on the answer's kernels decides."""

    class Fixed:
        identity = "fixed:answers"

        def __init__(self, text: str):
            self.text = text

        def complete(self, messages, n=1, seed=0):
            return [_Answer(self.text)]

    renamed = "```cuda\n__global__ void other(float *o) { o[0] = 1; }\n```"
    assert (
        "expected ['sum_rows']" in LLMNaiveGenerator(Fixed(renamed)).generate("b", "f", SLOW).reason
    )
    good = LLMNaiveGenerator(Fixed(f"Here:\n\n```cuda\n{SLOW}```\n")).generate("b", "f", FAST)
    assert good.source == SLOW and good.changes == {"llm_rewrite": 1}
