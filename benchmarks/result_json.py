"""One place that writes a benchmark's figures: ``benchmarks/results/<benchmark>/<name>.json``.

Every result file carries what makes its figures traceable: the benchmark, the commit the
code ran at (``+dirty`` when the work tree had changes), the hardware, the command line and
the UTC time, then ``headline`` (the few figures ``report.py`` puts on ``docs/benchmarks.md``:
``{"label", "value", "unit"}``) and ``data`` (everything the run measured).
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import time
from pathlib import Path

from maxcode.records import hardware_fingerprint

RESULTS = Path(__file__).resolve().parent / "results"


def _git(*args: str) -> str:
    try:
        out = subprocess.run(
            ["git", *args], cwd=RESULTS.parent, capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


def commit() -> str:
    """The checked-out commit, ``+dirty`` when tracked files differ from it; "unknown" outside git."""
    head = _git("rev-parse", "--short=12", "HEAD")
    if not head:
        return "unknown"
    return head + ("+dirty" if _git("status", "--porcelain", "--untracked-files=no") else "")


def hardware() -> str:
    """CPU model and core count, and each GPU's name, as one line of the project's fingerprint."""
    fp = hardware_fingerprint()
    text = f"{fp['cpu']}, {fp['cores']} cores"
    gpus = list(fp.get("gpus", ()))
    if gpus:
        text += "; " + ", ".join(f"{gpus.count(g)}x {g}" for g in dict.fromkeys(gpus))
    return text


def headline(label: str, value: float | int | str, unit: str = "") -> dict:
    return {"label": label, "value": value, "unit": unit}


def default_path(benchmark: str) -> Path:
    stamp = time.strftime("%Y-%m-%dT%H%M%SZ", time.gmtime())
    return RESULTS / benchmark / f"{stamp}-{commit().replace('+', '-')}.json"


def add_json_argument(parser, benchmark: str) -> None:
    """The ``--json PATH`` option every benchmark shares; without it the result still gets a file."""
    parser.add_argument(
        "--json",
        type=Path,
        default=None,
        metavar="PATH",
        help="write the figures with their commit, hardware and command here "
        f"(default: a new file under benchmarks/results/{benchmark}/)",
    )


def json_path(path: Path | None, benchmark: str) -> Path:
    """The file a run writes (and rewrites as it grows): ``path``, else a new default one."""
    return path or default_path(benchmark)


def write_result(
    benchmark: str,
    data: object,
    headlines: list[dict] | None = None,
    path: Path | None = None,
    series: str = "",
    measured_on: str | None = None,
) -> Path:
    """Write ``data`` with its provenance to ``path`` (default: a new file under ``results/``);
    ``series``: what sets these figures apart from the benchmark's other results (its docs
    page shows the newest of each series); ``measured_on``: the hardware of runs this one
    only merges, named instead of this machine's."""
    path = path or default_path(benchmark)
    record = {
        "benchmark": benchmark,
        **({"series": series} if series else {}),
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "commit": commit(),
        "hardware": f"{measured_on} (merged on {hardware()})" if measured_on else hardware(),
        "command": shlex.join([Path(sys.argv[0]).as_posix(), *sys.argv[1:]]),
        "headline": headlines or [],
        "data": data,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(record, indent=1, default=str) + "\n")
    tmp.replace(path)
    return path
