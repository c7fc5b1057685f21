"""The wall-clock confirmation after a C++ search: the original and the best, built with the
run's flags, timed on inputs larger than the tests.

The search ranks candidates on the tests (by instruction count by default); a gain that
grows with the input, or one that instruction counts cannot see, shows only on larger
inputs and real time. The inputs are the user's (``--confirm DIR``) or the largest test
scaled up where its format allows: a first integer n that counts the records that follow
(the same number of values each). Both programs run interleaved, alternating which goes
first, and must print the same output on every confirmation input.
"""

from __future__ import annotations

import math
import re
import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path

DEFAULT_MIN_SPEEDUP = 1.05
DEFAULT_REPEATS = 5
# Scale the largest test until the original takes this long on it (or the factor's cap).
TARGET_SECONDS = 1.0
MAX_FACTOR = 1024
# A round times a fast program this long at least (its runs' median), at most this often.
MIN_ROUND_S = 0.25
MAX_RUNS_PER_ROUND = 25
# A confirmation run may take this many times the evaluator's per-test time limit.
TIME_LIMIT_FACTOR = 3.0


class ConfirmError(RuntimeError):
    """The confirmation could not be run; the message says why."""


@dataclass
class Confirmation:
    """Wall-clock medians of the original and the best on the confirmation inputs."""

    inputs: list[str]
    how: str  # where the inputs come from, in words
    repeats: int
    original_s: list[float]  # per round: the sum over the inputs of each one's fastest run
    best_s: list[float]
    min_speedup: float
    outputs_match: bool
    runs_per_round: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def speedup(self) -> float:
        return statistics.median(self.original_s) / statistics.median(self.best_s)

    @property
    def low(self) -> float:
        """The speedup with the spread against it: the original's fastest, the best's slowest."""
        return min(self.original_s) / max(self.best_s)

    @property
    def high(self) -> float:
        return max(self.original_s) / min(self.best_s)

    @property
    def meaningful(self) -> bool:
        """Above the threshold even at the low end of the measured spread."""
        return self.outputs_match and self.low > self.min_speedup

    def describe(self) -> str:
        med_o, med_b = statistics.median(self.original_s), statistics.median(self.best_s)
        return (
            f"{self.speedup:.2f}x by wall clock on {self.how} (original {med_o:.3f} s, best "
            f"{med_b:.4f} s, median of {self.repeats} interleaved rounds; range over the rounds "
            f"{self.low:.2f}x-{self.high:.2f}x)"
        )

    def to_dict(self) -> dict:
        return asdict(self) | {"speedup": self.speedup, "low": self.low, "high": self.high}


def scale_input(text: str, factor: int) -> str | None:
    """The input with its records repeated ``factor`` times and its count raised to match,
    or None when the format is not a count followed by that many equal-sized records."""
    lines = text.split("\n")
    head = lines[0].split()
    if len(head) != 1 or not re.fullmatch(r"\d{1,9}", head[0]) or int(head[0]) < 1:
        return None
    n = int(head[0])
    rest = [line for line in lines[1:] if line.strip()]
    values = " ".join(rest).split()
    if not values or len(values) % n:
        return None
    if len(rest) == n:  # one record per line: keep the lines
        body = "\n".join(rest[i % n] for i in range(n * factor))
    elif len(rest) == 1:  # all records on one line
        width = len(values) // n
        records = [" ".join(values[i * width : (i + 1) * width]) for i in range(n)]
        body = " ".join(records[i % n] for i in range(n * factor))
    else:
        return None
    return f"{n * factor}\n{body}\n"


def confirmation_inputs(
    tests: list[Path],
    confirm_dir: Path | None,
    work: Path,
    run_original,
    target_s: float = TARGET_SECONDS,
) -> tuple[list[Path], str, list[str]]:
    """(inputs, where they come from, notes). ``run_original(path)`` gives the original's
    wall time on one input, or None when it failed or ran out of time there."""
    if confirm_dir is not None:
        inputs = sorted(p for p in confirm_dir.glob("input*") if p.is_file()) or sorted(
            p for p in confirm_dir.iterdir() if p.is_file()
        )  # a PIE-style folder's inputs, else every file
        return inputs, f"{len(inputs)} inputs in --confirm {confirm_dir}", []
    largest = max(tests, key=lambda p: p.stat().st_size)
    text = largest.read_text(errors="replace")
    if scale_input(text, 2) is None:
        note = (
            f"the tests could not be scaled ({largest.name} does not begin with a count of "
            "the equal-sized records that follow); the confirmation ran on the tests "
            "themselves: give larger inputs with --confirm DIR"
        )
        return tests, f"the {len(tests)} tests (not scaled)", [note]
    work.mkdir(parents=True, exist_ok=True)
    factor, chosen, seconds = 1, None, 0.0
    while factor < MAX_FACTOR:
        factor *= 2
        path = work / f"{largest.stem}.x{factor}.txt"
        path.write_text(scale_input(text, factor))
        took = run_original(path)
        if took is None:
            break  # too large: keep the last size the original finished
        chosen, seconds = (path, factor), took
        if took >= target_s:
            break
    if chosen is None:
        note = f"the original failed or ran out of time on {largest.name} scaled x2"
        return tests, f"the {len(tests)} tests (not scaled)", [note]
    path, factor = chosen
    how = f"{largest.name} scaled x{factor} ({path.stat().st_size} bytes)"
    notes = [f"the original takes {seconds:.2f} s there (scaled until about {target_s:g} s)"]
    return [path], how, notes


def confirm(
    evaluator,
    original: str,
    best: str,
    tests: list[Path],
    confirm_dir: Path | None,
    work: Path,
    min_speedup: float = DEFAULT_MIN_SPEEDUP,
    repeats: int = DEFAULT_REPEATS,
    target_s: float = TARGET_SECONDS,
) -> Confirmation:
    """Time ``original`` and ``best`` by wall clock with ``evaluator.run_program`` (the
    run's flags, binary cache and sandbox)."""
    limit = evaluator.config.time_limit_s * TIME_LIMIT_FACTOR

    def run(source: str, path: Path):
        build, out = evaluator.run_program(source, path, limit)
        if out is None:
            raise ConfirmError(f"does not compile: {build.first_error}")
        ok = not out.timed_out and out.signal is None and out.exit_code == 0
        return out, ok

    def original_time(path: Path) -> float | None:
        out, ok = run(original, path)
        return out.wall_s if ok else None

    inputs, how, notes = confirmation_inputs(tests, confirm_dir, work, original_time, target_s)
    sources = {"original": original, "best": best}

    def timed(role: str, path: Path):
        out, ok = run(sources[role], path)
        if not ok:
            raise ConfirmError(
                f"the {role} program failed on {path.name} (exit {out.exit_code}, "
                f"signal {out.signal}, timed out: {out.timed_out}); give smaller "
                "inputs with --confirm DIR"
            )
        return out

    # A first run of each checks the outputs and sizes the rounds: a program much faster
    # than the original runs several times per round and the round takes its fastest run,
    # the one least delayed by other work on the machine, so a few milliseconds of
    # scheduling noise do not decide the speed of a program that runs for a few more.
    outputs_match, runs, first = True, {}, {"original": 0.0, "best": 0.0}
    for path in inputs:
        printed = {role: timed(role, path) for role in sources}
        for role, out in printed.items():
            first[role] += out.wall_s
        if printed["original"].stdout != printed["best"].stdout:
            outputs_match = False
            notes.append(f"the best program's output differs from the original's on {path}")
    for role, seconds in first.items():
        runs[role] = min(MAX_RUNS_PER_ROUND, max(1, math.ceil(MIN_ROUND_S / max(seconds, 1e-4))))
    totals = {"original": [0.0] * repeats, "best": [0.0] * repeats}
    for r in range(repeats):
        for path in inputs:
            for role in ("original", "best") if r % 2 == 0 else ("best", "original"):
                totals[role][r] += min(timed(role, path).wall_s for _ in range(runs[role]))
    return Confirmation(
        inputs=[str(p) for p in inputs],
        how=how,
        repeats=repeats,
        original_s=totals["original"],
        best_s=totals["best"],
        min_speedup=min_speedup,
        outputs_match=outputs_match,
        runs_per_round=runs,
        notes=notes,
    )
