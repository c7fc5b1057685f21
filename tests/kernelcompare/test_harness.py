"""The generated differential harness: built on CPU, run on a GPU (``gpu`` marker)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from maxcode.errors import ConfigError
from maxcode.kernelcompare.config import ExtractConfig
from maxcode.kernelcompare.cudaparse import isolate
from maxcode.kernelcompare.extract import extract_rodinia
from maxcode.kernelcompare.harness import HarnessConfig, build_program, check_outputs, kernels_of
from maxcode.kernelcompare.naive import NaiveVariant, SourceTransformGenerator

RODINIA = Path(__file__).parent / "fixtures" / "rodinia"
STENCIL = RODINIA / "cuda/stencil1d/stencil_kernel.cu"
has_nvcc = shutil.which("nvcc") is not None
has_gpu = shutil.which("nvidia-smi") is not None


def _pair() -> tuple[str, str, list[str]]:
    code = isolate(STENCIL.read_text())
    fast = code.text()
    return SourceTransformGenerator().generate("s", "f", fast).source, fast, code.includes


class SignFlip:
    """A wrong naive generator: its kernel subtracts where the original adds."""

    name = "test-sign-flip/1"
    offline = True

    def generate(self, benchmark: str, source_file: str, fast_code: str) -> NaiveVariant:
        return NaiveVariant(fast_code.replace("acc +=", "acc -="), self.name, {"flip": 1})


def test_kernel_parameters_are_read_from_the_tree():
    found = kernels_of(
        "__global__ void a(const float *__restrict__ x, int n, unsigned int *o) {}\n"
        "struct P { int v; };\n__global__ void b(P p) {}\n"
        "template <int N> __global__ void c(float *x) {}\n"
    )
    assert [(p.name, p.base, p.pointer) for p in found["a"]] == [
        ("x", "float", True),
        ("n", "int", False),
        ("o", "unsigned int", True),
    ]
    assert "not an arithmetic value" in found["b"] and found["c"] == "template kernel"


def test_program_namespaces_both_sides_and_copies_constants():
    slow, fast, includes = _pair()
    program = build_program(slow, fast, includes, HarnessConfig())
    assert "namespace slow {" in program and "namespace fast {" in program
    assert (
        "cudaMemcpyToSymbol(fast::coeff" in program and "cudaMemcpyToSymbol(slow::coeff" in program
    )
    assert "slow::stencil<<<" in program and "fast::stencil<<<" in program


def test_unsupported_kernels_are_named():
    code = "__global__ void k(float **p) {}"
    outcome = check_outputs(code, code, [], Path("."), "nvcc", run=False)
    assert outcome.status == "unsupported"
    assert outcome.detail == "kernel k: parameter 'float **p' is not an arithmetic value or pointer"


@pytest.mark.skipif(not has_nvcc, reason="nvcc not installed")
def test_harness_compiles_without_a_gpu():
    slow, fast, includes = _pair()
    outcome = check_outputs(slow, fast, includes, STENCIL.parent, "nvcc", run=False)
    assert outcome.status == "built", outcome.detail


@pytest.mark.skipif(has_gpu, reason="checks the message shown where there is no GPU")
def test_output_check_without_gpu_says_so():
    with pytest.raises(ConfigError, match="needs an NVIDIA GPU"):
        extract_rodinia(RODINIA, SourceTransformGenerator(), ExtractConfig(output_check=True))


@pytest.mark.gpu
@pytest.mark.skipif(not has_gpu, reason="needs an NVIDIA GPU")
def test_outputs_match_for_transformations_and_catch_a_wrong_variant():
    config = ExtractConfig(output_check=True)
    good = extract_rodinia(RODINIA, SourceTransformGenerator(), config)
    (pair,) = good.pairs
    assert pair.checks["outputs"] == "match", pair.checks
    bad = extract_rodinia(RODINIA, SignFlip(), config)
    assert ("stencil1d", "output_mismatch") in {(d.benchmark, d.reason) for d in bad.drops}
