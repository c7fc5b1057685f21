"""KernelBench's run-folder format, shared by the layouts that use it.

A run folder holds ``level_<L>_problem_<P>_..._kernel.py`` files and ``eval_results.json``
(per candidate: ``compiled``, ``correctness``, ``runtime`` in ms, ``metadata`` with
``hardware`` and the harness's error). The label rules live here once: the corpus readers
and the evaluator's differential benchmark both call them.
"""

from __future__ import annotations

import re

from maxcode.errors import CorpusFormatError
from maxcode.runs.record import Label

KERNELBENCH_HARNESS = "KernelBench eval_results.json"

BUILD_FAILURE = "Error building extension"
"""How torch's ``load_inline`` reports a failed build (the compiler's output follows)."""

COMPILER_DIAGNOSTIC = re.compile(r"(?:^|/)([\w.-]+\(\d+\): error: .*|[\w.-]+:\d+:\d+: error: .*)$")


def first_line(text: str) -> str:
    return text.strip().splitlines()[0][:300] if text.strip() else ""


def compiler_error(text: str) -> str:
    """The first compiler diagnostic of a failed build (its path cut to the file name); the
    harness's first line (``Error building extension 'x': <the nvcc command>``) when none."""
    for line in text.splitlines()[1:]:
        m = COMPILER_DIAGNOSTIC.search(line.strip())
        if m:
            return f"{text.split(':', 1)[0]}: {m.group(1)}"
    return text


def kernelbench_label(entry: dict, harness: str = KERNELBENCH_HARNESS) -> Label:
    """Map one ``eval_results.json`` entry to a label.

    KernelBench sets ``compiled`` false also for a CUDA error raised while loading the module
    (``cuda_error``): that is a crash, so any runtime or CUDA error counts as ``runtime_error``
    before ``compiled`` is looked at, except a build failure: ``load_inline`` builds while the
    module loads, so the harness files ``Error building extension ...`` as a runtime error; it is
    a ``compile_error``, as our evaluator calls it. ``other_error`` is the harness failing on its own (a
    shared object it never built, an exception in the harness): the row is kept, its label is
    ``harness_error`` and not usable as a measurement.
    """
    if not isinstance(entry, dict) or "compiled" not in entry or "correctness" not in entry:
        raise CorpusFormatError("entry lacks 'compiled' or 'correctness'")
    meta = entry.get("metadata") or {}
    usable, why = True, ""
    if "other_error" in meta:
        verdict, error = "harness_error", meta["other_error"]
        usable, why = False, "the harness failed on its own (metadata.other_error)"
    elif str(meta.get("runtime_error") or "").startswith(BUILD_FAILURE):
        verdict, error = "compile_error", compiler_error(str(meta["runtime_error"]))
    elif "runtime_error" in meta or "cuda_error" in meta:
        verdict, error = "runtime_error", meta.get("runtime_error") or meta.get("cuda_error")
    elif not entry["compiled"]:
        verdict, error = "compile_error", compiler_error(str(meta.get("compilation_error", "")))
    elif entry["correctness"]:
        verdict, error = "ok", ""
    else:
        verdict, error = "wrong_answer", meta.get("correctness_issue", "")
    runtime = _positive(entry.get("runtime")) if verdict == "ok" else None
    ref = _positive(entry.get("ref_runtime"))
    return Label(
        verdict=verdict,
        compiled=verdict in ("ok", "wrong_answer", "runtime_error") if usable else None,
        correct=verdict == "ok" if usable else None,
        runtime_ms=runtime,
        ref_runtime_ms=ref,
        speedup=ref / runtime if ref and runtime else None,
        harness=harness,
        gpu=str(meta.get("hardware") or ""),
        error=first_line(str(error or "")),
        usable=usable,
        unusable_reason=why,
    )


def _positive(value: object) -> float | None:
    """KernelBench writes -1 for "not measured"."""
    return float(value) if isinstance(value, int | float) and value > 0 else None
