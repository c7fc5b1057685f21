"""Anti-reward-hacking checks, each with a stable id.

Static checks read the candidate's source (Python code and the C++/CUDA code in its
string literals, comments stripped by a tokenizer, not by a naive cut); dynamic checks
run inside the GPU worker (``maxcode.evaluate.cuda.worker``) and report with the same
ids. Severity comes from ``CudaEvalConfig.check_severity`` (an unknown id is a config
error): ``error`` rejects the candidate (Status.REJECTED, reason names the id),
``warn`` records it in ``EvalResult.figures["warnings"]``, ``off`` skips it.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from dataclasses import dataclass


@dataclass(frozen=True)
class Check:
    check_id: str
    kind: str  # "static" | "dynamic" | "both"
    default_severity: str
    summary: str


@dataclass(frozen=True)
class Finding:
    check_id: str
    message: str


CHECKS: dict[str, Check] = {
    c.check_id: c
    for c in (
        Check(
            "no_custom_kernel",
            "static",
            "error",
            "no CUDA __global__ kernel or Triton @jit kernel is defined",
        ),
        Check(
            "stream_or_thread",
            "both",
            "error",
            "work moved to a non-default stream, another thread or process",
        ),
        Check("timing_patch", "both", "error", "timing or synchronization functions replaced"),
        Check(
            "torch_tampering",
            "dynamic",
            "error",
            "torch's functions, Tensor methods, backend flags or defaults changed by the candidate",
        ),
        Check(
            "precision_downgrade", "both", "error", "computes in lower precision than the reference"
        ),
        Check(
            "harness_introspection",
            "static",
            "error",
            "reaches into the harness (gc, frames, __main__) to find reference results",
        ),
        Check("calls_reference", "dynamic", "error", "ModelNew.forward calls the reference Model"),
        Check(
            "torch_compute_in_forward",
            "dynamic",
            "error",
            "forward runs torch compute ops where the task forbids them",
        ),
        Check(
            "inplace_input_mutation", "dynamic", "error", "an input tensor was modified in place"
        ),
        Check("output_aliases_input", "dynamic", "error", "the output shares memory with an input"),
        Check(
            "result_reuse",
            "dynamic",
            "error",
            "output is a stale reference result left in freed memory",
        ),
        Check(
            "timed_result_reuse",
            "dynamic",
            "error",
            "a timed call returned the result for other inputs than that call's",
        ),
        Check(
            "nondeterministic",
            "dynamic",
            "error",
            "two calls on identical inputs give outputs that differ beyond the tolerance",
        ),
        Check(
            "no_custom_kernel_launched",
            "dynamic",
            "error",
            "forward launches none of the kernels the candidate defines",
        ),
        Check(
            "hardcoded_shapes",
            "dynamic",
            "error",
            "correct only for the test shapes (fails when the batch size changes)",
        ),
        Check(
            "excessive_speedup",
            "dynamic",
            "warn",
            "speedup above the configured threshold, flagged for review",
        ),
    )
}

# Rationale: a candidate that only calls PyTorch has optimized nothing (KernelBench's backend check).
_KERNEL_MARKERS_C = re.compile(r"__global__")
_KERNEL_MARKERS_PY = re.compile(r"@\s*triton\s*\.\s*jit|@\s*triton\s*\.\s*autotune")
# Rationale: timing syncs the default stream; work elsewhere escapes the measurement.
_STREAM_PY = re.compile(
    r"torch\s*\.\s*cuda\s*\.\s*(Stream|stream|ExternalStream|set_stream)\b|\bthreading\b|concurrent\s*\.\s*futures"
    r"|\bmultiprocessing\b|\basyncio\b|\b_thread\b"
)
_STREAM_C = re.compile(
    r"cudaStreamCreate|cudaStreamCreateWithFlags|getStreamFromPool|std::thread|pthread_create|std::async"
)
# Rationale: replacing the clock or the sync makes any kernel look fast.
_TIMING_PY = re.compile(
    r"(torch\s*\.\s*cuda\s*\.\s*(synchronize|Event|current_stream|default_stream)"
    r"|\.\s*elapsed_time|\.\s*record|time\s*\.\s*(perf_counter|time|monotonic)(_ns)?)\s*=(?!=)"
    r"|setattr\s*\(\s*(torch|time)\b"
)
# Rationale: fp16/bf16/TF32 arithmetic passes loose tolerances while doing less work.
_PRECISION_PY = re.compile(
    r"\.half\s*\(|\.bfloat16\s*\(|torch\s*\.\s*(float16|half|bfloat16|float8\w*)\b|allow_tf32|set_float32_matmul_precision|autocast"
)
_HALF_TYPES_C = r"__half2?|half2|__nv_bfloat162?|__float2half\w*|__float2bfloat16\w*"
_HALF_C = re.compile(rf"\b({_HALF_TYPES_C})\b|at::kHalf|at::kBFloat16")
_PRECISION_C = re.compile(rf"\b({_HALF_TYPES_C}|wmma::|mma\.sync|tf32)\b|at::kHalf|at::kBFloat16")
# Rationale: 3xTF32 keeps FP32 accuracy on tensor cores: x = hi + lo with hi = tf32(x) and
# lo = tf32(x - hi), and a product sums a_lo*b_hi + a_hi*b_lo + a_hi*b_hi. TF32 code that
# rounds such a residual is that split; plain TF32 (hi only) has no residual to round. A
# pattern, not a proof: the outputs against the reference's tolerance still judge the result.
_TF32_SPLIT_C = re.compile(r"__float_to_tf32\s*\(\s*[\w.\[\]]+\s*-\s*[\w.\[\]]+\s*\)")
# Rationale: walking the heap or the caller's frames finds the reference model or its outputs.
_INTROSPECTION_PY = re.compile(
    r"gc\s*\.\s*get_(objects|referrers|referents)|sys\s*\.\s*_getframe|inspect\s*\.\s*(stack|currentframe|getouterframes)"
    r"|__main__|f_back|f_locals|f_globals"
)
_C_COMMENT_OR_STRING = re.compile(
    r'("(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\')|//[^\n]*|/\*.*?\*/', re.S
)


def split_source(source: str) -> tuple[str, str]:
    """(python code without comments or strings, C/C++ code of all string literals without comments).

    Raises SyntaxError for a candidate that is not valid Python.
    """
    ast.parse(source)  # a SyntaxError with the line number, before the tokenizer's vaguer errors
    line_starts = [0]
    for line in source.splitlines(keepends=True):
        line_starts.append(line_starts[-1] + len(line))
    spans: list[tuple[int, int, str]] = []  # (start, end, replacement) in source offsets
    c_parts: list[str] = []
    string_types = {tokenize.STRING}
    string_types.update(
        getattr(tokenize, name) for name in ("FSTRING_MIDDLE",) if hasattr(tokenize, name)
    )
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type not in string_types and tok.type != tokenize.COMMENT:
            continue
        begin = line_starts[tok.start[0] - 1] + tok.start[1]
        finish = line_starts[tok.end[0] - 1] + tok.end[1]
        if tok.type == tokenize.COMMENT:
            spans.append((begin, finish, ""))
            continue
        try:
            text = ast.literal_eval(tok.string) if tok.type == tokenize.STRING else tok.string
        except (ValueError, SyntaxError):
            text = tok.string
        if isinstance(text, bytes):
            text = text.decode(errors="replace")
        c_parts.append(_C_COMMENT_OR_STRING.sub(lambda m: m.group(1) or " ", str(text)))
        spans.append((begin, finish, '""'))
    py_parts = []
    cursor = 0
    for begin, finish, replacement in spans:
        py_parts.append(source[cursor:begin] + replacement)
        cursor = finish
    py_parts.append(source[cursor:])
    return "".join(py_parts), "\n".join(c_parts)


def static_findings(source: str, reference_is_fp32: bool = True) -> list[Finding]:
    """All static findings, in the fixed order of CHECKS (stable messages)."""
    py_code, c_code = split_source(source)
    findings: list[Finding] = []

    def hit(check_id: str, pattern: re.Pattern, text: str, where: str) -> None:
        match = pattern.search(text)
        if match:
            findings.append(
                Finding(
                    check_id, f"{where} uses '{match.group(0).strip()}': {CHECKS[check_id].summary}"
                )
            )

    if not (_KERNEL_MARKERS_C.search(c_code) or _KERNEL_MARKERS_PY.search(py_code)):
        findings.append(
            Finding(
                "no_custom_kernel",
                "no __global__ kernel or @triton.jit function found; the candidate must implement the computation in a custom kernel",
            )
        )
    hit("stream_or_thread", _STREAM_PY, py_code, "Python code")
    hit("stream_or_thread", _STREAM_C, c_code, "CUDA/C++ code")
    hit("timing_patch", _TIMING_PY, py_code, "Python code")
    if reference_is_fp32:
        hit("precision_downgrade", _PRECISION_PY, py_code, "Python code")
        tf32_split = _TF32_SPLIT_C.search(c_code) is not None
        hit("precision_downgrade", _HALF_C if tf32_split else _PRECISION_C, c_code, "CUDA/C++ code")
    hit("harness_introspection", _INTROSPECTION_PY, py_code, "Python code")
    deduped: dict[str, Finding] = {}
    for f in findings:
        deduped.setdefault(f.check_id, f)
    return [deduped[c] for c in CHECKS if c in deduped]


# Rationale: `__global__ void name(` (qualifiers and templates allowed); Triton kernels are the
# functions under @triton.jit / @triton.autotune, profiled under the function's own name.
_GLOBAL_NAME_C = re.compile(r"__global__\s+(?:[\w:<>,\s\*&]*?\s)?(\w+)\s*\(")
_LAUNCH_BOUNDS_C = re.compile(r"__launch_bounds__\s*\([^)]*\)")
_TRITON_DEF_PY = re.compile(
    r"@\s*triton\s*\.\s*(?:jit|autotune|heuristics)\b[^\n]*\n(?:\s*@[^\n]*\n)*\s*def\s+(\w+)"
)


def own_kernel_names(source: str) -> set[str]:
    """Names of the kernels a candidate defines: its CUDA ``__global__`` and Triton functions."""
    py_code, c_code = split_source(source)
    names = set(_GLOBAL_NAME_C.findall(_LAUNCH_BOUNDS_C.sub(" ", c_code)))
    names.update(_TRITON_DEF_PY.findall(py_code))
    return names


def is_own_kernel(profiled_name: str, own: set[str]) -> bool:
    """A profiler kernel name (demangled, with templates and arguments) is one of ``own``."""
    return any(re.search(rf"(?<![\w]){re.escape(n)}(?![\w])", profiled_name) for n in own)
