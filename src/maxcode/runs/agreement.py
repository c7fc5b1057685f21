"""Why our verdict on a candidate and its published label differ.

The causes are the differential benchmark's (docs/cuda-evaluator.md): what is known about the
labels' machines (40 GB of memory, a build environment that failed without a compiler
message, kernels built for another GPU), semantics and tolerance versions, our own limits.
``label`` is anything with ``verdict`` and ``error`` (the corpus's ``Label`` or the
benchmark's).
"""

from __future__ import annotations

import ast
import re

CAUSES = (
    "semantics",
    "tolerance version",
    "labels' GPU memory",
    "labels' environment",
    "evaluator memory",
    "timeout",
    "hack",
    "build fallback",
    "harness class",
    "reference names",
    "other",
)
"""Why our verdict and the label differ."""

DOCUMENTED = (
    "semantics",
    "tolerance version",
    "labels' GPU memory",
    "labels' environment",
    "hack",
    "build fallback",
    "harness class",
    "reference names",
)
"""Causes that are a known, documented difference from the labels (docs/corpus.md): the
others (our own memory, a timeout, anything unexplained) count against agreement."""

LABEL_ATOL = 1e-2
"""The runs' tolerance: KernelBench v0/v0.1 compared with atol = rtol = 1e-2 at fp32."""

# Module mode and seeding matter only where forward depends on them: running statistics or
# randomness in training mode (KernelBench builds models in training mode, seeds before each).
MODE_SENSITIVE = re.compile(
    r"\b(BatchNorm\dd|InstanceNorm\dd|Dropout\dd?|AlphaDropout|dropout|RReLU)\b"
)
OOM = re.compile(r"out of memory", re.IGNORECASE)
NO_KERNEL_IMAGE = "no kernel image is available"
# The harness reports only this line when the build's log was not kept: the compiler never said why.
BARE_BUILD_ERROR = re.compile(r"^Error building extension '[^']*'$")
# Names that torch's headers of the labels' version did not declare where the kernel used them;
# a build with another torch finds them (the kernel is right for that torch).
TORCH_HEADER_VERSION = re.compile(
    r'identifier "C10_\w+" is undefined|namespace "(at|c10|torch)(::\w+)*" has no member'
)
UNDEFINED_NAME = re.compile(r"NameError: name '(\w+)' is not defined")
OUR_TOLERANCE = re.compile(r"atol=([0-9.e+-]+).*max abs err ([0-9.e+-]+|nan|inf)")


def agrees(label: str, ours: str) -> bool:
    """Label classes are named as our statuses; timeout, rejected and memory_limit never agree."""
    return label == ours


def catches_its_build(code: str) -> bool:
    """Whether a ``load_inline`` call sits in a ``try`` body that has a handler: a failed build
    is caught and the program goes on, usually on a PyTorch fallback."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError):
        return False
    for node in ast.walk(tree):
        if isinstance(node, ast.Try) and node.handlers:
            for inner in (n for stmt in node.body for n in ast.walk(stmt)):
                callee = getattr(inner, "func", None) if isinstance(inner, ast.Call) else None
                name = getattr(callee, "attr", None) or getattr(callee, "id", None)
                if name == "load_inline":
                    return True
    return False


def module_level_names(source: str) -> set[str]:
    """Names a module binds at its top level (assignments, functions, classes, imports)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError):
        return set()
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names


def disagreement_cause(problem_source: str, label, status: str, reason: str, code: str = "") -> str:
    """The documented cause of a disagreement, from the label's error, our reason, the problem
    and (where known) the candidate's code.

    Checked most specific first: our own rejections and time limits, a build failure the
    candidate catches (KernelBench then times its fallback; ours stops at the failed build), one
    failure filed under another class by the run's harness (KernelBench calls any exception
    while importing the module a compile failure; Kernel-Coder files some failed builds as
    runtime errors), then what is known about the labels' machine (40 GB of memory, an
    extension build environment that failed without a compiler message or with torch headers of
    another version, whatever class the harness filed it under; kernels built for another GPU),
    then a name only the reference defines (KernelBench executes the candidate in the
    namespace the reference ran in; ours imports it as a module of its own), then semantics
    and tolerances.
    """
    if status == "rejected":
        return "hack"
    if status == "timeout":
        return "timeout"
    if status == "compile_error" and label.verdict == "ok" and catches_its_build(code):
        return "build fallback"
    if label.verdict == "compile_error" and reason.startswith("candidate module raised at import"):
        return "harness class"
    build_failed_there = label.verdict == "compile_error" or label.error.startswith(
        "Error building extension"
    )
    if build_failed_there and label.verdict == "runtime_error" and status == "compile_error":
        return "harness class"
    if label.verdict == "runtime_error" and OOM.search(label.error):
        return "labels' GPU memory"
    if label.verdict == "runtime_error" and NO_KERNEL_IMAGE in label.error:
        return "labels' environment"
    if build_failed_there and (
        BARE_BUILD_ERROR.match(label.error) or TORCH_HEADER_VERSION.search(label.error)
    ):
        return "labels' environment"
    if status in ("runtime_error", "memory_limit") and OOM.search(reason):
        return "evaluator memory"
    undefined = UNDEFINED_NAME.search(reason) if status == "runtime_error" else None
    if undefined and undefined.group(1) in module_level_names(problem_source):
        return "reference names"
    if {label.verdict, status} == {"ok", "wrong_answer"}:
        if MODE_SENSITIVE.search(problem_source):
            return "semantics"
        m = OUR_TOLERANCE.search(reason)
        # a tighter tolerance than the labels', and an error within theirs: v0.1 passes it
        if status == "wrong_answer" and m:
            our_atol, max_abs = float(m.group(1)), float(m.group(2))
            if our_atol < LABEL_ATOL and max_abs <= LABEL_ATOL:
                return "tolerance version"
    return "other"
