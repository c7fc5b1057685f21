"""The offline critic: a rule-based natural-language critique of one evaluated attempt.

It follows the seeds' critique prompt (diagnose the bottleneck, suggest actions, explain
compile and correctness failures) using only what was measured: the evaluator's status
and reason, the first compiler error, the first mismatching test, runtime growth across
test sizes, a callgrind profile when present, source patterns, and for CUDA the achieved
bandwidth and FLOP/s against the GPU's peak. The first line is a one-line diagnosis.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from maxcode.errors import TaskFormatError
from maxcode.evaluate.result import EvalResult, Status
from maxcode.policy.cpp_transforms import TRANSFORMS, CppSource
from maxcode.search.types import Critique
from maxcode.tasks.model import Task

# Growth exponents at or above this, across test sizes, read as super-linear work.
SUPERLINEAR_EXPONENT = 1.4
# A growth fit below this R^2 is shown but concludes nothing.
MIN_FIT_R2 = 0.9
# Fractions of peak that count as saturating a resource (CUDA roofline reading).
SATURATED_FRACTION = 0.6
UNDERUSED_FRACTION = 0.3
# Per-test input + output above this (bytes) makes I/O a plausible bottleneck.
HEAVY_IO_BYTES = 200_000

_COMPILE_HINTS: tuple[tuple[str, str], ...] = (
    (r"was not declared|undeclared identifier|is not a member of", "a name is used that is not declared here: add the missing declaration or #include, or fix the spelling"),
    (r"discards qualifiers|read-only|assignment of read-only|passing 'const", "something passed or declared const is modified: pass it by value or by non-const reference, or stop modifying it"),
    (r"no matching function|no matching member|cannot convert|invalid conversion", "a call's argument types do not match any overload: check the types (const, references, integer widths) at the call"),
    (r"expected .* before|expected ';'|expected '\)'|expected primary-expression", "a syntax error: a missing ';', bracket or parenthesis near the reported line"),
    (r"redefinition|redeclared|conflicting declaration", "a name is declared twice in one scope: rename or remove one declaration"),
    (r"undefined reference", "the program links against a function that is declared but never defined: define it or link its library"),
    (r"no such file or directory", "an #include names a header that does not exist on this toolchain"),
)  # fmt: skip
_RUNTIME_HINTS: tuple[tuple[str, str], ...] = (
    (r"sigsegv|segmentation|signal 11", "an out-of-bounds access or a stack overflow (deep recursion, large local arrays): check indices and move big arrays to static storage"),
    (r"sigfpe|floating point|signal 8", "an integer division or modulo by zero"),
    (r"sigabrt|abort|signal 6|bad_alloc|length_error|out_of_range", "an exception or assertion: a too-large allocation, a negative size converted to size_t, or .at() out of range"),
)  # fmt: skip


@dataclass
class OfflineCritic:
    """Critic protocol, no model: the same feedback an LLM critic reads, turned into text by rules."""

    name: str = "offline-critic/1"
    offline: bool = True

    def critique(self, task: Task, source: str, result: EvalResult) -> Critique:
        if result.status is Status.OK:
            if task.language == "cuda":
                head, body = _cuda_performance(result)
            else:
                head, body = _cpp_performance(task, source, result)
        else:
            head, body = _failure(task, source, result)
        lines = [head, *(f"- {b}" for b in body)]
        return Critique(text="\n".join(lines), critic=self.name, offline=True)


# ---------------------------------------------------------------- failures
def _failure(task: Task, source: str, result: EvalResult) -> tuple[str, list[str]]:
    status = result.status
    reason = _one_line(result.reason) or status.value.replace("_", " ")
    if status in (Status.NO_CODE, Status.UNSUPPORTED):
        return (
            f"No program to evaluate: {reason}.",
            [
                "Suggest: return one complete program that reads the same input and prints the same output."
            ],
        )
    if status is Status.REJECTED:
        return (
            f"Rejected before running by a static check: {reason}.",
            [
                "Suggest: remove the flagged construct; speedups must come from doing the same work faster."
            ],
        )
    if status is Status.COMPILE_ERROR:
        first = _first_error(result.compile_log) or reason
        hint = _hint(first + "\n" + result.compile_log, _COMPILE_HINTS)
        body = [
            f"Why: {hint}."
            if hint
            else "Why: see the first compiler error above; later errors often follow from it."
        ]
        body.append(
            "Suggest: fix this error first, keeping the rest of the attempt; if unsure, start again from the best program so far."
        )
        return f"Compile error: {first}", body
    failing = next((t for t in result.tests if t.status is status), None)
    where = f"test {failing.index}" if failing is not None else "a test"
    detail = _one_line(failing.reason) if failing is not None and failing.reason else reason
    passed = f"{result.tests_passed}/{len(result.tests)} tests passed" if result.tests else ""
    if status is Status.WRONG_ANSWER:
        body = [f"First mismatch: {detail}." + (f" ({passed})" if passed else "")]
        body += _wrong_answer_hints(source, detail)
        body.append(
            "Suggest: revert the change that altered the output and re-apply only transformations that keep the exact output."
        )
        return f"Wrong answer on {where}: the attempt changed the program's output.", body
    if status is Status.TIMEOUT:
        return (
            f"Timed out on {where}: the attempt is far slower than the reference or never terminates.",
            [
                f"Evidence: {detail}." + (f" ({passed})" if passed else ""),
                "Diagnose: an infinite loop (a changed loop bound or counter) or a worse complexity than the reference.",
                "Suggest: check every modified loop's condition and update; keep the reference's algorithm unless the new one is clearly better.",
            ],
        )
    if status is Status.MEMORY_LIMIT:
        return (
            f"Memory limit exceeded on {where}.",
            [
                f"Evidence: {detail}.",
                "Suggest: avoid O(n^2) tables and oversized reserve()/resize() calls; stream the input instead of storing it whole.",
            ],
        )
    if status is Status.OUTPUT_LIMIT:
        return (
            f"Output limit exceeded on {where}: the attempt prints far more than expected.",
            [
                f"Evidence: {detail}.",
                "Suggest: check the output loop's bounds and stray debug printing.",
            ],
        )
    hint = _hint(detail + " " + reason, _RUNTIME_HINTS)
    body = [f"Evidence: {detail}."]
    if hint:
        body.append(f"Diagnose: likely {hint}.")
    body.append(
        "Suggest: check indices and sizes changed by the attempt; run the failing input under a sanitizer."
    )
    return f"Runtime error on {where}: the program crashed or exited non-zero.", body


def _wrong_answer_hints(source: str, detail: str) -> list[str]:
    hints = []
    numbers = re.findall(r"'([-+0-9.eE]+)'", detail)
    if len(numbers) >= 2 and any("." in n or "e" in n.lower() for n in numbers[:2]):
        hints.append(
            "Diagnose: the numbers differ slightly, which points at a changed floating-point evaluation order or precision (reordered sums, float instead of double, pow vs multiply)."
        )
    elif re.search(r"got ''|got nothing|missing|fewer lines", detail):
        hints.append(
            "Diagnose: output is missing, e.g. not flushed before exit or a loop that stops early."
        )
    if "unordered_" in source:
        hints.append(
            "Check: iteration over an unordered container has no defined order; never print in that order."
        )
    if "sync_with_stdio(false)" in source and re.search(r"\b(printf|scanf|puts)\s*\(", source):
        hints.append(
            "Check: with sync_with_stdio(false), mixing printf/scanf with cin/cout reorders input and output."
        )
    return hints


# ---------------------------------------------------------------- C++ performance
def _cpp_performance(task: Task, source: str, result: EvalResult) -> tuple[str, list[str]]:
    speed = _speed_phrase(result)
    cues = _source_cues(source)
    fit = growth_fit(task, result)
    growth = fit.exponent if fit is not None and fit.r2 >= MIN_FIT_R2 else None
    io_bytes = _io_bytes_per_test(task)
    hotspots = _hotspots(result.profile)
    body: list[str] = []
    if fit is not None:
        body.append(fit.describe())
    if hotspots:
        shown = ", ".join(f"{name} {share:.0f}%" for name, share in hotspots[:3])
        body.append(f"Profile hotspots (instructions): {shown}.")
    if io_bytes is not None and io_bytes >= HEAVY_IO_BYTES:
        body.append(f"Each test moves about {io_bytes / 1e6:.1f} MB of input and output.")
    io_in_profile = any(_is_io_symbol(name) for name, share in hotspots[:3] if share >= 20)
    kind, reasons = _classify(cues, growth, io_bytes, io_in_profile)
    head = f"{speed}; likely bottleneck: {kind} ({'; '.join(reasons[:2])})."
    body.extend(f"Suggest: {s}" for s in _suggestions(kind, cues))
    if result.timing is not None and _noisy(result):
        body.append(
            "Caution: the timing spread is as large as the measured difference; the change may be noise."
        )
    return head, body


_KINDS = {
    "io": "I/O-bound",
    "algorithm": "algorithmic inefficiency",
    "memory_layout": "memory-bound (poor locality)",
    "constant_factor": "constant-factor overhead",
}


@dataclass(frozen=True)
class _Cue:
    cls: str  # io | algorithm | memory_layout | constant_factor
    finding: str
    suggestion: str
    strong: bool = True  # weak cues only decide when nothing else does


def _classify(
    cues: list[_Cue],
    growth: float | None,
    io_bytes: float | None,
    io_in_profile: bool,
) -> tuple[str, list[str]]:
    """Pick one bottleneck class, strongest evidence first."""

    def of(cls: str, strong: bool | None = None) -> list[str]:
        return [c.finding for c in cues if c.cls == cls and (strong is None or c.strong == strong)]

    if of("io") and (io_in_profile or (io_bytes or 0) >= HEAVY_IO_BYTES):
        return _KINDS["io"], of("io")
    for cls in ("algorithm", "memory_layout", "constant_factor"):
        if of(cls, strong=True):
            return _KINDS[cls], of(cls, strong=True)
    if growth is not None and growth >= SUPERLINEAR_EXPONENT:
        return _KINDS["algorithm"], [f"runtime grows super-linearly (n^{growth:.1f})"]
    # Weak cues: a specific pattern before the generic "nested loops"; I/O patterns only
    # when the amount of I/O is unknown (known and small, they cannot be the bottleneck).
    weak = ["memory_layout", "constant_factor", "algorithm"] + (["io"] if io_bytes is None else [])
    for cls in weak:
        if of(cls):
            return _KINDS[cls], of(cls)
    if io_in_profile:
        return _KINDS["io"], ["the profile is dominated by I/O library functions"]
    return "compute-bound with no obvious local fix", [
        "no I/O, locality, copying or complexity pattern found"
    ]


def _source_cues(source: str) -> list[_Cue]:
    """Findings from patterns in the source, each with the fix it suggests."""
    cues: list[_Cue] = []
    try:
        src = CppSource(source)
    except (ValueError, UnicodeError):
        return cues
    checks = {
        "fast_io": (
            "io",
            "cin/cout are synchronised with C stdio",
            "call std::ios::sync_with_stdio(false) and cin.tie(nullptr) at the start of main (then use only iostreams)",
        ),
        "endl_to_newline": (
            "io",
            "endl flushes the stream on every line",
            "write '\\n' instead of endl and let the buffer flush once",
        ),
        "loop_interchange": (
            "memory_layout",
            "a nested loop walks a row-major array column by column",
            "swap the loops (or transpose the data) so the innermost loop walks contiguous memory",
        ),
        "const_ref_params": (
            "constant_factor",
            "a container parameter is passed by value and copied on every call",
            "pass read-only containers by const reference",
        ),
        "map_to_unordered": (
            "constant_factor",
            "an ordered map/set is used only for lookups (tree lookups)",
            "use unordered_map/unordered_set, or a flat array when keys are small integers",
        ),
        "reserve_vectors": (
            "constant_factor",
            "vectors grow by push_back without reserve (reallocation and copies)",
            "reserve() the final size before the loop, or avoid storing the values at all",
        ),
    }
    for name, (cls, finding, suggestion) in checks.items():
        if TRANSFORMS[name].apply(source) is not None:
            cues.append(_Cue(cls, finding, suggestion, strong=name != "reserve_vectors"))
    cues.extend(_quadratic_cues(src))
    hoisted = TRANSFORMS["hoist_invariant_calls"].apply(source)
    if hoisted is not None and re.search(r"=\s*(std::)?strlen\s*\(", hoisted):
        cues.append(
            _Cue(
                "algorithm",
                "strlen() in a loop condition rescans the string every iteration (quadratic)",
                "compute strlen() once before the loop",
            )
        )
    text = src.text
    if re.search(r"scanf\s*\(\s*\"%c\"", text) or (
        re.search(r"\bgetchar\s*\(", text) and "fread" not in text
    ):
        cues.append(
            _Cue(
                "io",
                "input is read one character per library call",
                "read the whole input at once (fread into a buffer) and parse it in memory",
            )
        )
    if re.search(r"->\s*next\b", text):
        cues.append(
            _Cue(
                "memory_layout",
                "a linked structure is traversed by pointer chasing",
                "store the elements contiguously (a vector in traversal order) and iterate over that",
            )
        )
    if re.search(r"map\s*<\s*(std::)?pair\s*<", text):
        cues.append(
            _Cue(
                "memory_layout",
                "a grid or table is stored in a map keyed by pairs",
                "use a flat array indexed by row * width + column",
            )
        )
    depth = _max_loop_depth(src)
    if depth >= 2 and re.search(r"%\s*[a-z_]\w*\s*[;)]", text):
        cues.append(
            _Cue(
                "constant_factor",
                "a modulo by a run-time value sits inside nested loops (a division per iteration)",
                "keep values reduced and replace % by a conditional subtraction",
            )
        )
    if depth >= 2:
        cues.append(
            _Cue(
                "algorithm",
                f"{depth} nested loops",
                "look for a lower-complexity algorithm (sorting, prefix sums, hashing, a Fenwick tree) or cache repeated work",
                strong=False,
            )
        )
    return cues


_LOOPS = ("for_statement", "while_statement", "do_statement", "for_range_loop")


def _quadratic_cues(src: CppSource) -> list[_Cue]:
    """The common patterns that make a loop quadratic, or a lookup a tree walk."""
    text = src.text
    cues = []
    if TRANSFORMS["string_append"].apply(text) is not None:
        cues.append(
            _Cue(
                "algorithm",
                "s = s + x copies the whole string on every append (quadratic in a loop)",
                "append in place with s += x (amortised linear), or build the pieces and join once",
            )
        )
    front = re.compile(
        r"(\w+)\s*\.\s*(erase|insert)\s*\(\s*(\1\s*\.\s*begin\s*\(\s*\)|(std::)?begin\s*\(\s*\1\s*\))"
    )
    if any(front.search(_node_text(c)) and _in_loop(c) for c in src.nodes("call_expression")):
        cues.append(
            _Cue(
                "algorithm",
                "erase/insert at the front of a vector or string inside a loop moves every element each time (quadratic)",
                "use a deque (pop_front/push_front), or keep a start index instead of erasing",
            )
        )
    search = re.compile(
        r"^(std::)?(find|count)\s*\(\s*(\w+)\s*\.\s*begin\s*\(\s*\)\s*,\s*\3\s*\.\s*end\s*\("
    )
    if any(search.search(_node_text(c)) and _in_loop(c) for c in src.nodes("call_expression")):
        cues.append(
            _Cue(
                "algorithm",
                "a linear search (find/count over a whole container) runs inside a loop (quadratic)",
                "keep the searched values in an unordered_set (or sort once and binary-search)",
            )
        )
    if re.search(r"\bmap\s*<\s*(int|long|long long|unsigned|size_t)\s*,", text):
        cues.append(
            _Cue(
                "constant_factor",
                "a std::map keyed by integers walks a tree on every access",
                "use a vector indexed by the value when the keys are small and dense (else an unordered_map)",
            )
        )
    return cues


def _node_text(node) -> str:
    return node.text.decode(errors="replace") if node.text is not None else ""


def _in_loop(node) -> bool:
    parent = node.parent
    while parent is not None:
        if parent.type in _LOOPS:
            return True
        parent = parent.parent
    return False


def _max_loop_depth(src: CppSource) -> int:
    depth = 0
    for loop in src.nodes("for_statement", "while_statement", "do_statement", "for_range_loop"):
        d, node = 1, loop.parent
        while node is not None:
            if node.type in ("for_statement", "while_statement", "do_statement", "for_range_loop"):
                d += 1
            node = node.parent
        depth = max(depth, d)
    return depth


def _suggestions(kind: str, cues: list[_Cue]) -> list[str]:
    wanted = next((cls for cls, label in _KINDS.items() if label == kind), None)
    first = [c.suggestion for c in cues if c.cls == wanted]
    rest = [c.suggestion for c in cues if c.cls != wanted]
    out = list(dict.fromkeys(first + rest))[:4]
    return out or [
        "profile the largest test and optimise the hottest function; the reference leaves no simple pattern to fix"
    ]


@dataclass(frozen=True)
class GrowthFit:
    """cost = a + b * n^exponent over the tests, n being the size measure that fits best."""

    exponent: float
    r2: float  # of the fit, on the costs themselves
    size: str  # what n is
    tests: int

    def describe(self) -> str:
        quality = "" if self.r2 >= MIN_FIT_R2 else "; a poor fit, so no growth is concluded"
        return (
            f"Runtime grows like n^{self.exponent:.1f} (n = {self.size}; fit R^2 "
            f"{self.r2:.2f} over {self.tests} tests{quality})."
        )


def growth_fit(task: Task, result: EvalResult) -> GrowthFit | None:
    """The best fit of cost = a + b * n^p over the tests, for each meaningful size n.

    n is the first integer of each input (a count, as most input formats begin with) or
    the number of whitespace-separated values in it; input bytes mislead when a few digits
    encode a large problem. The constant a absorbs start-up work (iostream set-up), which
    hides growth on small tests when fitted as a pure power. The cost is the repeatable
    per-test count where the evaluator measured one, else the wall time, so the critique
    is the same on every run."""
    costs = _per_test_costs(result) or {
        v.index: c for v in result.tests if (c := _positive(v.runtime_s)) is not None
    }
    fits = []
    for label, sizes in _size_measures(task, result).items():
        points = [(sizes[i], c) for i, c in costs.items() if i in sizes]
        if len(points) < 3 or max(n for n, _ in points) < 1.5 * min(n for n, _ in points):
            continue  # too few tests, or sizes too alike (inputs that only carry a seed)
        exponent, r2 = _fit_power(points)
        fits.append(GrowthFit(exponent, r2, label, len(points)))
    return max(fits, key=lambda f: f.r2, default=None)


def _fit_power(points: list[tuple[float, float]]) -> tuple[float, float]:
    """(p, R^2) of the least-squares fit cost = a + b * n^p with a, b >= 0, p on a grid."""
    ys = [c for _, c in points]
    mean = sum(ys) / len(ys)
    total = sum((y - mean) ** 2 for y in ys) or 1.0
    best = (0.0, -math.inf)
    for step in range(5, 81):  # p from 0.25 to 4.0
        p = step / 20
        xs = [n**p for n, _ in points]
        a, b = _nonnegative_line(xs, ys)
        r2 = 1 - sum((y - a - b * x) ** 2 for x, y in zip(xs, ys, strict=True)) / total
        if r2 > best[1] + 1e-9:
            best = (p, r2)
    return best


def _nonnegative_line(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """Least-squares y = a + b x with a, b >= 0."""
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    var = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / var if var else 0.0
    a = my - b * mx
    if a < 0:  # through the origin
        a, b = 0.0, sum(x * y for x, y in zip(xs, ys, strict=True)) / sum(x * x for x in xs)
    return a, max(b, 0.0)


def _size_measures(task: Task, result: EvalResult) -> dict[str, dict[int, float]]:
    """Per-test sizes by meaning: the first integer of the input, the count of values in
    it, or (given by the evaluator) ``figures["input_sizes"]``."""
    given = _given_sizes(result)
    if given:
        return {"the size the evaluator gives": given}
    first, values = {}, {}
    try:
        cases = task.tests()
    except TaskFormatError:
        cases = []
    for case in cases:
        try:
            tokens = case.input_path.read_text(errors="replace").split()
        except OSError:
            continue
        if tokens and re.fullmatch(r"\d{1,18}", tokens[0]) and int(tokens[0]) > 0:
            first[case.index] = float(tokens[0])
        if tokens:
            values[case.index] = float(len(tokens))
    if values:
        measures = {"the first integer of each input": first} if len(first) == len(values) else {}
        return measures | {"the number of values in each input": values}
    rows = result.figures.get("tests") if isinstance(result.figures, dict) else None
    sizes = {
        row["index"]: float(row["input_bytes"])
        for row in (rows if isinstance(rows, list) else [])
        if isinstance(row, dict)
        and isinstance(row.get("index"), int)
        and _positive(row.get("input_bytes"))
    }
    return {"input bytes (the test files are not readable here)": sizes} if sizes else {}


def _per_test_costs(result: EvalResult) -> dict[int, float]:
    """Per-test instruction or cycle counts from the evaluator's ``figures["tests"]`` rows."""
    figures = result.figures if isinstance(result.figures, dict) else {}
    unit = result.timing.unit if result.timing is not None else ""
    if unit not in ("instructions", "cycles"):
        return {}
    rows = figures.get("tests")
    costs: dict[int, float] = {}
    for i, row in enumerate(rows if isinstance(rows, list) else []):
        cost = _positive(row.get(unit)) if isinstance(row, dict) else None
        if cost is not None:
            costs[int(row.get("index", i))] = cost
    return costs


def _given_sizes(result: EvalResult) -> dict[int, float]:
    """``figures["input_sizes"]`` (list or dict) when the evaluator measured a size."""
    figures = result.figures if isinstance(result.figures, dict) else {}
    given = figures.get("input_sizes")
    sizes: dict[int, float] = {}
    if isinstance(given, dict):
        sizes = {int(k): v for k, v in given.items() if str(k).isdigit() and _positive(v)}
    elif isinstance(given, list):
        indices = [t.index for t in result.tests] or list(range(len(given)))
        sizes = {i: v for i, v in zip(indices, given, strict=False) if _positive(v)}
    return sizes


def _io_bytes_per_test(task: Task) -> float | None:
    try:
        cases = task.tests()
        total = sum(c.input_path.stat().st_size + c.output_path.stat().st_size for c in cases)
    except (TaskFormatError, OSError):
        return None
    return total / len(cases) if cases else None


def _hotspots(profile: dict | None) -> list[tuple[str, float]]:
    """(function, share %) from the evaluator's profile (callgrind or torch profiler), largest first."""
    if not isinstance(profile, dict) or not isinstance(profile.get("functions"), list):
        return []
    out = []
    for row in profile["functions"]:
        if not isinstance(row, dict):
            continue
        share = _positive(row.get("share_pct"))
        name = row.get("function")
        if share is not None and isinstance(name, str):
            out.append((_short_symbol(name), share))
    return sorted(out, key=lambda r: -r[1])


def _short_symbol(name: str) -> str:
    name = name.split(":", 1)[-1] if re.match(r"^[^ (]*:", name) else name
    name = re.sub(r"\s*\[[^\]]*\]\s*$", "", name.strip())
    return name[:60]


def _is_io_symbol(name: str) -> bool:
    return bool(
        re.search(
            r"istream|ostream|_IO_|getc|putc|scanf|printf|fflush|write|read|vfscanf|locale|num_get|num_put|sync_filebuf",
            name,
        )
    )


def _speed_phrase(result: EvalResult) -> str:
    speedup = result.speedup
    if speedup is None:
        return "Correct (no timing)"
    if speedup >= 1.05:
        return f"Correct, {speedup:.2f}x faster than the reference"
    if speedup <= 0.95:
        return f"Correct but {1 / speedup:.2f}x slower than the reference"
    return f"Correct, about as fast as the reference ({speedup:.2f}x)"


def _noisy(result: EvalResult) -> bool:
    timing = result.timing
    speedup = result.speedup
    if timing is None or speedup is None:
        return False
    spread = max(
        _positive(timing.candidate_spread) or 0.0, _positive(timing.reference_spread) or 0.0
    )
    return spread > 0 and abs(speedup - 1.0) < spread


# ---------------------------------------------------------------- CUDA performance
def _cuda_performance(result: EvalResult) -> tuple[str, list[str]]:
    head, body = _cuda_roofline(result)
    return head, body + _kernel_hotspots(result.profile)


def _kernel_hotspots(profile: dict | None) -> list[str]:
    """Where the candidate's GPU time goes, next to the reference's (torch profiler)."""
    hotspots = _hotspots(profile)
    if not hotspots or profile is None:
        return []
    top = ", ".join(f"{name} {share:.0f}%" for name, share in hotspots[:3])
    launches, total = _positive(profile.get("kernels_per_call")), _positive(profile.get("total_us"))
    reference = _positive(profile.get("reference_total_us"))
    line = "Profile:"
    if launches is not None and total is not None:
        line += f" {launches:g} kernel launches and {total:.1f} us of GPU time per call;"
    line += f" top kernels: {top}."
    if reference is not None:
        line += f" The reference's kernels take {reference:.1f} us per call."
    lines = [line]
    if launches is not None and launches > 1.5:
        lines.append(
            f"Suggest: fuse the {launches:g} launches per call into fewer kernels, "
            f"starting from the top one ({hotspots[0][0]})."
        )
    return lines


def _cuda_roofline(result: EvalResult) -> tuple[str, list[str]]:
    speed = _speed_phrase(result)
    figures = result.figures if isinstance(result.figures, dict) else {}
    bw, bw_peak = (
        _positive(figures.get("achieved_bandwidth_gbs")),
        _positive(figures.get("peak_bandwidth_gbs")),
    )
    fl, fl_peak = _positive(figures.get("achieved_tflops")), _positive(figures.get("peak_tflops"))
    bw_frac = bw / bw_peak if bw is not None and bw_peak is not None else None
    fl_frac = fl / fl_peak if fl is not None and fl_peak is not None else None
    body = []
    if bw_frac is not None:
        body.append(f"Memory: {bw:.0f} of {bw_peak:.0f} GB/s ({bw_frac:.0%} of peak bandwidth).")
    if fl_frac is not None:
        body.append(f"Compute: {fl:.2f} of {fl_peak:.0f} TFLOP/s ({fl_frac:.0%} of peak).")
    if bw_frac is None and fl_frac is None:
        head = f"{speed}; bottleneck unknown (no bandwidth or FLOP/s figures were measured)."
        body.append(
            "Suggest: fuse elementwise operations into one kernel to cut global-memory traffic and launches; measure again with the profiler."
        )
        return head, body
    if (
        bw_frac is not None
        and bw_frac >= SATURATED_FRACTION
        and (fl_frac is None or bw_frac >= fl_frac)
    ):
        head = f"{speed}; memory-bandwidth bound ({bw_frac:.0%} of peak bandwidth)."
        body += [
            "Suggest: move fewer bytes: fuse producer and consumer kernels so intermediates stay in registers or shared memory.",
            "Suggest: use vectorized (128-bit) loads and lower-precision storage where the tolerance allows.",
        ]
    elif fl_frac is not None and fl_frac >= SATURATED_FRACTION:
        head = f"{speed}; compute bound ({fl_frac:.0%} of peak FLOP/s)."
        body += [
            "Suggest: use tensor cores (WMMA/MMA, TF32 or BF16 inputs) for matrix products.",
            "Suggest: remove redundant arithmetic (hoist invariant math, use fused multiply-add, avoid recomputing indices).",
        ]
    elif (bw_frac is None or bw_frac < UNDERUSED_FRACTION) and (
        fl_frac is None or fl_frac < UNDERUSED_FRACTION
    ):
        head = (
            f"{speed}; latency or launch bound: neither memory bandwidth nor compute is near peak."
        )
        body += [
            "Suggest: check coalescing (consecutive threads should touch consecutive addresses) and occupancy (enough blocks to fill every SM).",
            "Suggest: fuse small kernels to cut launch overhead; tile through shared memory to reuse loaded data.",
        ]
    else:
        head = f"{speed}; partly memory bound, with headroom on both bandwidth and compute."
        body += [
            "Suggest: improve data reuse with shared-memory tiling, then fuse adjacent operations to cut traffic.",
        ]
    return head, body


# ---------------------------------------------------------------- helpers
def _positive(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    value = float(value)
    return value if math.isfinite(value) and value > 0 else None


def _first_error(log: str) -> str:
    if not isinstance(log, str):
        return ""
    for line in log.splitlines():
        if re.search(r"\berror\b", line, re.I):
            return _one_line(line)
    return ""


def _hint(text: str, table: tuple[tuple[str, str], ...]) -> str:
    for pattern, hint in table:
        if re.search(pattern, text, re.I):
            return hint
    return ""


def _one_line(text: object, limit: int = 240) -> str:
    if not isinstance(text, str):
        return ""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 3] + "..."
