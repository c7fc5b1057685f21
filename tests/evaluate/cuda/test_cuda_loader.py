"""Reading a candidate's load_inline calls from its source, without running it."""

from __future__ import annotations

import pytest

from maxcode.evaluate.cuda.build import BuildError, BuildOutcome, ExtensionSpec
from maxcode.evaluate.cuda.loader import cached_load_inline, load_module, specs_written_out

WRITTEN_OUT = '''
import torch
from torch.utils.cpp_extension import load_inline

kernel = """
__global__ void twice(float* x) { x[threadIdx.x] *= 2; }
""" + "// joined"
decl: str = "torch::Tensor twice(torch::Tensor x);"
flags = ["-O3"] + ["--use_fast_math"]
ext = load_inline(
    name="twice_ext",
    cpp_sources=decl,
    cuda_sources=kernel,
    functions=["twice"],
    extra_cuda_cflags=flags,
    verbose=True,
)
other = torch.utils.cpp_extension.load_inline("other", [decl], cuda_sources=[kernel])
'''


class _Recorder:
    """A builder that records what the candidate asks for and builds nothing."""

    def __init__(self) -> None:
        self.specs: list[ExtensionSpec] = []

    def build(self, spec: ExtensionSpec, timeout_s: float = 0.0) -> BuildOutcome:
        self.specs.append(spec)
        return BuildOutcome(key="", name=spec.name, ok=False, failed_step="host")


def test_written_out_calls_are_the_specs_the_candidate_asks_for(tmp_path):
    path = tmp_path / "candidate.py"
    path.write_text(WRITTEN_OUT)
    written = specs_written_out(path.read_text())
    guessed = written.specs
    recorder = _Recorder()
    with cached_load_inline(recorder, 1.0, lambda outcome: None), pytest.raises(BuildError):
        load_module(path, "maxcode_candidate_written_out")
    assert [s.name for s in guessed] == ["twice_ext", "other"]
    assert recorder.specs and guessed[0].digest() == recorder.specs[0].digest()
    assert guessed[0].extra_cuda_cflags == ("-O3", "--use_fast_math")
    assert written.complete


@pytest.mark.parametrize(
    "change",
    [
        ("decl: str = ", "decl: str = make_decl() + "),  # computed at run time
        ("flags = [", "flags = []\nflags += ["),  # bound twice
        ("ext = load_inline(", "def build():\n    return load_inline("),  # not at top level
        ("    verbose=True,\n", "    **options,\n"),  # arguments not written out
        ('    name="twice_ext",', '    name=f"twice_{torch.__version__}",'),  # an f-string field
    ],
)
def test_calls_not_written_out_are_left_to_the_candidate(change):
    source = WRITTEN_OUT.replace(*change)
    assert source != WRITTEN_OUT
    written = specs_written_out(source)
    assert "twice_ext" not in [s.name for s in written.specs] and not written.complete


@pytest.mark.parametrize(
    "addition",
    [
        "from torch.utils.cpp_extension import load_inline as build\nb = build('b', '')",
        "b = getattr(torch.utils.cpp_extension, 'load_' + 'inline')('b', '')",
        "from torch.utils.cpp_extension import load\nb = load('b', ['b.cpp'])",
        "exec(open('more.py').read())",
        "class ModelNew:\n    def __init__(self):\n        self.b = load_inline('b', '')",
    ],
)
def test_a_build_reached_another_way_makes_the_reading_incomplete(addition):
    """The evaluator skips the compile job only when the source shows every build."""
    written = specs_written_out(WRITTEN_OUT + addition + "\n")
    assert [s.name for s in written.specs][:2] == ["twice_ext", "other"]
    assert not written.complete


def test_source_that_does_not_parse_gives_no_specs():
    written = specs_written_out("def broken(:\n")
    assert written.specs == [] and not written.complete


def test_a_call_torch_would_refuse_is_refused_in_torch_s_words(tmp_path):
    """A missing argument reads as torch's own error, not as a name inside the evaluator."""
    candidate = tmp_path / "candidate.py"
    candidate.write_text(
        "from torch.utils.cpp_extension import load_inline\n"
        "ext = load_inline(name='twice_ext', cuda_sources='// none')\n"
    )
    with (
        cached_load_inline(_Recorder(), 1.0, lambda outcome: None),
        pytest.raises(
            TypeError,
            match=r"^load_inline\(\) missing 1 required positional argument: 'cpp_sources'",
        ),
    ):
        load_module(candidate, "maxcode_candidate_refused")


def test_a_keyword_torch_does_not_take_is_refused_with_torch_s_own_message(tmp_path):
    """A misspelled flag fails the import as it does under torch, not silently ignored."""
    from torch.utils import cpp_extension

    call = "load_inline(name='twice_ext', cpp_sources='', extra_cuda_flags=['-O3'])"
    with pytest.raises(TypeError) as torch_says:
        cpp_extension.load_inline(name="twice_ext", cpp_sources="", extra_cuda_flags=["-O3"])
    candidate = tmp_path / "candidate.py"
    candidate.write_text(f"from torch.utils.cpp_extension import load_inline\next = {call}\n")
    recorder = _Recorder()
    with cached_load_inline(recorder, 1.0, lambda outcome: None), pytest.raises(TypeError) as ours:
        load_module(candidate, "maxcode_candidate_misspelled")
    assert str(ours.value) == str(torch_says.value)
    assert "extra_cuda_flags" in str(ours.value) and not recorder.specs
