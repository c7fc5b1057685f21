"""Extraction on fixture trees written in Parboil's and Rodinia's layouts."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from maxcode.errors import ConfigError
from maxcode.kernelcompare.config import ExtractConfig
from maxcode.kernelcompare.cudaparse import isolate
from maxcode.kernelcompare.extract import (
    CompileChecker,
    SourceTreeError,
    extract_parboil,
    extract_rodinia,
)
from maxcode.kernelcompare.naive import SourceTransformGenerator
from maxcode.kernelcompare.records import read_dataset, write_dataset
from maxcode.loader import load

FIXTURES = Path(__file__).parent / "fixtures"
PARBOIL = FIXTURES / "parboil"
RODINIA = FIXTURES / "rodinia"
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")


def _drops(extraction) -> set[tuple[str, str, str]]:
    return {(d.benchmark, d.file, d.reason) for d in extraction.drops}


def test_isolate_keeps_device_code_and_referenced_macros_only():
    code = isolate((PARBOIL / "benchmarks/vecadd/src/cuda/kernel.cu").read_text())
    text = code.text()
    assert [(u.kind, u.name) for u in code.units] == [
        ("macro", "CHUNK"),
        ("macro", "BLOCK"),
        ("global", "scale"),
    ]
    assert "UNUSED_HOST_MACRO" not in text and "void launch" not in text and "printf" not in text
    assert code.includes == ["#include <cstdio>", '#include "config.h"']


def test_isolate_handles_templates_and_several_kernels_per_file():
    code = isolate((PARBOIL / "benchmarks/matmul/src/cuda_base/mm.cu").read_text())
    assert [(u.kind, u.name) for u in code.units] == [
        ("device", "dot_row_col"),
        ("global", "matmul"),
        ("global", "transpose"),
    ]
    assert code.text().startswith("template <typename T>\n__device__ T dot_row_col")


def test_isolate_finds_shared_constant_texture_and_device_variables():
    src = (
        "texture<float, 1, cudaReadModeElementType> tex_in;\n"
        "__constant__ float coeffs[8];\n"
        "extern __shared__ float dyn[];\n"
        "__device__ int counter;\n"
        "int host_global = 3;\n"
        'extern "C" { __global__ void k(float *o) { o[0] = tex1Dfetch(tex_in, 0) + coeffs[0]; } }\n'
    )
    kinds = [(u.kind, u.name) for u in isolate(src).units]
    assert kinds == [
        ("texture", "tex_in"),
        ("constant", "coeffs"),
        ("shared", "dyn"),
        ("device_var", "counter"),
        ("global", "k"),
    ]


def test_parboil_fixture_exact_pairs_and_drop_reasons():
    result = extract_parboil(PARBOIL)
    assert result.raw == 7  # matched file pairs; cpuonly has no cuda_base/cuda
    kept = sorted((p.benchmark, p.naive_file, p.source_file) for p in result.pairs)
    assert kept == [
        ("matmul", "mm.cu", "mm_tiled.cu"),  # paired through the shared kernel name
        ("vecadd", "kernel.cu", "kernel.cu"),
        ("vecadd_copy", "kernel.cu", "kernel.cu"),  # removed as a duplicate when written
    ]
    assert _drops(result) == {
        ("broken", "k.cu", "parse_error"),
        ("hosty", "app.cu", "mostly_host"),
        ("matmul", "cuda/extra_reduce.cu", "no_counterpart"),
        ("same", "k.cu", "identical"),
        ("vecadd", "main.cu", "host_only"),
    }
    by_bench = {p.benchmark: p for p in result.pairs}
    assert by_bench["vecadd"].techniques == ["coalescing", "shared_memory", "unrolling"]
    assert by_bench["matmul"].techniques == [
        "shared_memory",
        "tiling",
        "unrolling",
        "thread_organization",
    ]
    broken = next(d for d in result.drops if d.reason == "parse_error")
    assert broken.detail == "cuda/k.cu: global 'axpy' at line 2"


def test_mostly_host_threshold_is_the_configured_one():
    result = extract_parboil(PARBOIL, ExtractConfig(min_device_fraction=0.0))
    assert ("hosty", "app.cu", "mostly_host") not in _drops(result)
    assert "hosty" in {p.benchmark for p in result.pairs}


@needs_nvcc
def test_rodinia_fixture_exact_pairs_drops_and_compile_check(tmp_path):
    checker = CompileChecker(ExtractConfig(), cache_path=tmp_path / "nvcc.json")
    result = extract_rodinia(RODINIA, SourceTransformGenerator(), checker=checker)
    assert result.raw == 4  # main.cu is host-only, so not a kernel file
    assert _drops(result) == {
        ("badfast", "bad.cu", "fast_compile_error"),
        ("mostlyhost", "app.cu", "mostly_host"),
        ("plain", "plain.cu", "no_naive_variant"),
    }
    (pair,) = result.pairs
    assert (pair.benchmark, pair.source_file) == ("stencil1d", "stencil_kernel.cu")
    assert pair.checks == {"compiled": True, "outputs": "unchecked"}
    assert pair.changes == {
        "drop_unroll_pragmas": 1,
        "ldg_to_plain_load": 1,
        "fast_math_to_precise": 1,
        "drop_restrict": 2,
        "drop_launch_bounds": 1,
        "constant_to_global": 1,
        "forceinline_to_noinline": 1,
    }
    assert "__ldg" not in pair.slow_code and "(*(in + i + k))" in pair.slow_code
    assert "#pragma unroll" not in pair.slow_code and "__constant__" not in pair.slow_code
    assert "BUILD_TIME_OFFSET" in next(d.detail for d in result.drops if d.benchmark == "badfast")
    cached = json.loads((tmp_path / "nvcc.json").read_text())
    assert len(cached) == 3  # badfast (fails), stencil fast + slow
    assert (
        extract_rodinia(RODINIA, SourceTransformGenerator(), checker=checker)
        .pairs[0]
        .checks["compiled"]
    )


def test_rodinia_without_compile_check_says_not_compiled():
    result = extract_rodinia(
        RODINIA, SourceTransformGenerator(), ExtractConfig(compile_check=False)
    )
    assert {p.source_file: p.checks["compiled"] for p in result.pairs} == {
        "bad.cu": None,
        "stencil_kernel.cu": None,
    }


def test_dataset_is_chat_jsonl_deduplicated_with_card(tmp_path):
    result = extract_parboil(PARBOIL)
    out = tmp_path / "pairs.jsonl"
    stats = write_dataset([result], out, "You are a CUDA optimization expert.")
    records = read_dataset(out)
    assert [r["benchmark"] for r in records] == ["matmul", "vecadd"]
    assert stats["suites"]["parboil"]["dropped"]["duplicate"] == 1
    assert stats["suites"]["parboil"]["kept"] == 2
    first = records[1]
    assert [m["role"] for m in first["messages"]] == ["system", "user", "assistant"]
    assert "threadIdx.x * CHUNK" in first["messages"][1]["content"]
    assert "#pragma unroll" in first["messages"][2]["content"]
    assert len(first["content_hash"]) == 16
    assert stats["techniques"]["shared_memory"] == 2
    card = out.with_suffix(".card.md").read_text()
    assert "| parboil | 7 | 2 |" in card and "duplicate: 1" in card


@pytest.mark.parametrize(
    ("maker", "root", "needle"),
    [
        (lambda r: extract_parboil(r), "missing", "Parboil tree does not exist"),
        (lambda r: extract_parboil(r), "file.txt", "Parboil tree is not a directory"),
        (lambda r: extract_parboil(r), "empty", "benchmarks dir does not exist"),
        (lambda r: extract_parboil(r), "nobench", "no benchmark has both"),
        (
            lambda r: extract_rodinia(r, SourceTransformGenerator()),
            "empty",
            "cuda dir does not exist",
        ),
    ],
)
def test_missing_or_malformed_tree_names_the_path(tmp_path, maker, root, needle):
    (tmp_path / "file.txt").write_text("x")
    (tmp_path / "empty").mkdir()
    (tmp_path / "nobench/benchmarks/foo/src/cuda").mkdir(parents=True)
    with pytest.raises(SourceTreeError, match=needle) as err:
        maker(tmp_path / root)
    assert str(tmp_path / root) in str(err.value)


def test_config_is_strict_and_validated():
    with pytest.raises(ConfigError, match="did you mean 'min_device_fraction'"):
        load(ExtractConfig, {"min_device_fractio": 0.2}, "kernelcompare.extract")
    with pytest.raises(ConfigError, match="unknown \\['unstage'\\]"):
        ExtractConfig(naive_transforms=("unstage",))
    cfg = load(ExtractConfig, {"parboil_variants": [["cuda_base_tex", "cuda_tex"]]}, "x")
    assert cfg.parboil_variants == (("cuda_base_tex", "cuda_tex"),)
