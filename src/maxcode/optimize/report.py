"""A self-contained report.html for one optimize run: what was found, whether it holds
outside the tests, and every candidate with what it changed."""

from __future__ import annotations

import base64
import difflib
import html
import io
import re
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.ticker import MaxNLocator
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import DiffLexer

from maxcode.evaluate.result import EvalResult
from maxcode.llm.usage import Usage
from maxcode.optimize.confirm import Confirmation
from maxcode.records import atomic_write_text
from maxcode.search.observation import format_feedback
from maxcode.search.records import CandidateRecord, Record, RunEnd, RunStart

STYLE = """
body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;color:#222}
table{border-collapse:collapse;width:100%;font-size:13px;margin-bottom:1em}
td,th{border:1px solid #ddd;padding:4px 6px;vertical-align:top;text-align:left}
th{background:#f4f4f4} .ok{color:#0a7d2c} .fail{color:#b00020} .warn{color:#9a5b00}
td.num{text-align:right;font-variant-numeric:tabular-nums}
.summary{background:#f6f8fa;padding:1em;border-radius:6px} pre{overflow-x:auto;font-size:12px}
"""

# What a count of executed instructions does not measure; shown beside the results.
COUNT_BLIND_SPOTS = (
    "system calls and flushing: an endl per line, or unbuffered output, costs time in the "
    "kernel that the count barely shows",
    "memory: cache misses, page faults and poor locality cost cycles, not instructions "
    "(--timing cachegrind simulates the caches)",
    "vector width and code generation: one AVX2 instruction counts once whatever it does, and "
    "pragmas or flags that change code generation pay differently on another CPU",
    "input size: the tests are small; a gain that grows with the input shows only on larger "
    "inputs, hence the wall-clock confirmation",
)
_PRAGMA = re.compile(r"#\s*pragma\s+GCC\s+(target|optimize)\s*\(([^)]*)\)")


@dataclass
class ReportInputs:
    """What the report shows besides the records."""

    original: str
    target_name: str
    header: dict
    summary: str
    winner: CandidateRecord | None = None  # written as best.*
    best_found: CandidateRecord | None = None  # the search's best, written or not
    baseline: EvalResult | None = None  # the original's own evaluation (C++)
    confirmation: Confirmation | None = None
    timing: str | None = None


def pragma_changes(original: str, source: str | None) -> list[str]:
    """Code-generation pragmas a candidate adds, each with what it means for the user."""
    if not source:
        return []
    before = set(_PRAGMA.findall(original))
    notes = []
    for kind, args in _PRAGMA.findall(source):
        if (kind, args) in before:
            continue
        if kind == "target":
            notes.append(
                f"#pragma GCC target({args}): instruction-set pragma; the binary needs a CPU "
                "with these instructions (it fails with SIGILL elsewhere): not portable"
            )
        else:
            notes.append(
                f"#pragma GCC optimize({args}): changes code generation beyond the compile flags"
            )
    return notes


def speedup_plot_png(candidates: list[CandidateRecord], depth: int) -> bytes:
    """Speedup of every executed candidate per step, and the best so far."""
    fig, ax = plt.subplots(figsize=(8.5, 3.6), dpi=110)
    executed = [c for c in candidates if c.executed]
    steps = [c.step + 1 for c in executed]
    rewards = [c.reward or 0.0 for c in executed]
    colors = ["#0a7d2c" if (c.reward or 0) > 0 else "#b00020" for c in executed]
    ax.scatter(steps, rewards, c=colors, alpha=0.7, s=36, label="candidate (red: failed)")
    best, best_line = 1.0, []
    for s in sorted(set(steps)):
        best = max([best, *(r for st, r in zip(steps, rewards, strict=True) if st == s)])
        best_line.append((s, best))
    if best_line:
        ax.plot(*zip(*best_line, strict=True), color="#1f4e9c", marker="o", label="best so far")
    else:
        ax.text(0.5, 0.5, "no candidate evaluated", transform=ax.transAxes, ha="center")
    ax.axhline(1.0, color="#888", linestyle="--", linewidth=1, label="original")
    last = max([depth, *steps])
    ax.set_xlim(0.5, last + 0.5)  # one step is a column in the middle, not a squeezed axis
    ax.set_ylim(0, max([1.5, *rewards]) * 1.1)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True, nbins=min(last, 12)))
    ax.set_xlabel("search step")
    ax.set_ylabel("speedup on the tests (0 = incorrect)")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))  # beside the points
    ax.grid(alpha=0.3)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return buf.getvalue()


def diff_html(original: str, best: str, name: str) -> str:
    diff = "".join(
        difflib.unified_diff(
            original.splitlines(keepends=True),
            best.splitlines(keepends=True),
            f"a/{name}",
            f"b/{name}",
        )
    )
    return highlight(diff, DiffLexer(), HtmlFormatter(noclasses=True, nowrap=False))


def write_report(path: Path, records: list[Record], inputs: ReportInputs) -> None:
    """``records``: the run's file as :func:`maxcode.search.records.read_records` reads it."""
    start = records[0]
    assert isinstance(start, RunStart), "a rollout file starts with its run_start record"
    candidates = [r for r in records if isinstance(r, CandidateRecord)]
    end = records[-1] if isinstance(records[-1], RunEnd) else None
    depth = int(start.config.get("depth", 1))
    png = base64.b64encode(speedup_plot_png(candidates, depth)).decode()
    name = html.escape(inputs.target_name)
    sections = [
        f"<h1>maxcode optimize: {name}</h1>",
        f'<p class="summary" id="summary">{html.escape(inputs.summary)}</p>',
        "<h2>Settings</h2>" + _table("settings", inputs.header.items()),
        _confirmation_html(inputs),
        _per_test_html(inputs),
        _blind_spots_html(inputs),
        f'<h2>Speedup per step</h2><img id="speedup-plot" alt="speedup per step per candidate" '
        f'src="data:image/png;base64,{png}">',
        _change_html(inputs),
        _candidates_html(candidates, inputs.original),
        _budget_html(end, sum(c.executed for c in candidates)),
        "<h2>Run</h2>"
        + _table(
            "provenance",
            [
                ("evaluator", start.evaluator),
                ("hardware", _hardware(start.provenance.get("hardware", {}))),
                ("code version", start.provenance.get("code_version", "?")),
            ],
        ),
    ]
    body = (
        f'<!doctype html><html><head><meta charset="utf-8"><title>maxcode optimize: {name}'
        f"</title>\n<style>{STYLE}</style></head><body>\n"
        + "\n".join(s for s in sections if s)
        + "\n</body></html>\n"
    )
    atomic_write_text(path, body)


def _table(table_id: str, rows) -> str:
    cells = "".join(
        f"<tr><th>{html.escape(str(k))}</th><td>{html.escape(str(v))}</td></tr>" for k, v in rows
    )
    return f'<table id="{table_id}">{cells}</table>'


def _hardware(hw: object) -> str:
    if not isinstance(hw, dict):
        return str(hw)
    parts = [str(hw.get("cpu", "?"))]
    if hw.get("cores"):
        parts.append(f"{hw['cores']} cores")
    if hw.get("gpus"):
        parts.append(", ".join(hw["gpus"]))
    parts.append(f"{hw.get('system', '?')} {hw.get('machine', '')}".strip())
    if hw.get("python"):
        parts.append(f"Python {hw['python']}")
    return "; ".join(parts)


def _confirmation_html(inputs: ReportInputs) -> str:
    c = inputs.confirmation
    if c is None:
        return ""
    verdict = (
        f"above the {c.min_speedup:g}x threshold over the whole measured range"
        if c.meaningful
        else f"not above the {c.min_speedup:g}x threshold over the measured range"
        if c.outputs_match
        else "outputs differ from the original's"
    )
    rows = [
        ("inputs", c.how),
        ("original, wall s per round", " ".join(f"{t:.4f}" for t in c.original_s)),
        ("best, wall s per round", " ".join(f"{t:.4f}" for t in c.best_s)),
        (
            "runs per round (the round takes the fastest)",
            ", ".join(f"{role} {n}" for role, n in c.runs_per_round.items()),
        ),
        ("speedup (median of the rounds)", f"{c.speedup:.3f}x"),
        ("range over the rounds", f"{c.low:.3f}x to {c.high:.3f}x"),
        ("verdict", verdict),
        *(("note", n) for n in c.notes),
    ]
    return (
        "<h2>Confirmation: wall clock on larger inputs</h2><p>The original and the best, "
        f"built with the same flags, timed in {c.repeats} interleaved rounds.</p>"
        + _table("confirmation", rows)
    )


def _per_test_html(inputs: ReportInputs) -> str:
    base, best = inputs.baseline, inputs.best_found
    if base is None or best is None or not best.evaluation:
        return ""
    rows_o = {r["index"]: r for r in (base.figures or {}).get("tests", [])}
    rows_b = {r["index"]: r for r in (best.evaluation.get("figures") or {}).get("tests", [])}
    unit = next((u for u in ("instructions", "cycles") if any(u in r for r in rows_o.values())), "")
    head = "<tr><th>test</th><th>input bytes</th>"
    if unit:
        head += f"<th>original {unit}</th><th>best {unit}</th><th>ratio</th>"
    head += "<th>original wall s</th><th>best wall s</th><th>ratio</th></tr>"
    body = []
    for i, o in sorted(rows_o.items()):
        b = rows_b.get(i, {})
        cells = [str(i), str(o.get("input_bytes", "?"))]
        if unit:
            cells += [
                f"{o.get(unit, 0):.4g}",
                f"{b.get(unit, 0):.4g}",
                _ratio(o.get(unit), b.get(unit)),
            ]
        cells += [
            f"{o.get('wall_s', 0):.4f}",
            f"{b.get('wall_s', 0):.4f}",
            _ratio(o.get("wall_s"), b.get("wall_s")),
        ]
        body.append("<tr>" + "".join(f"<td class='num'>{c}</td>" for c in cells) + "</tr>")
    return (
        "<h2>Per test: original vs best</h2><p>Wall times here are single runs on the small "
        "tests (noisy); the confirmation above repeats them on larger inputs.</p>"
        f'<table id="per-test">{head}{"".join(body)}</table>'
    )


def _ratio(a: object, b: object) -> str:
    if isinstance(a, int | float) and isinstance(b, int | float) and b > 0:
        return f"{a / b:.2f}x"
    return "-"


def _blind_spots_html(inputs: ReportInputs) -> str:
    if inputs.timing not in ("instructions", "cachegrind"):
        return ""
    items = "".join(f"<li>{html.escape(s)}</li>" for s in COUNT_BLIND_SPOTS)
    what = "instruction counts" if inputs.timing == "instructions" else "cachegrind's estimate"
    return f'<h2>What {what} cannot see</h2><ul id="blind-spots">{items}</ul>'


def _change_html(inputs: ReportInputs) -> str:
    best = inputs.winner or inputs.best_found
    if best is None:
        return ""
    title = (
        "Winning change"
        if inputs.winner is not None
        else "Best candidate's change (not written: no meaningful gain)"
    )
    steps = (best.meta or {}).get("transformations") or []
    what = ", ".join(steps) if steps else "an LLM rewrite"
    notes = "".join(
        f"<li class='warn'>{html.escape(n)}</li>"
        for n in pragma_changes(inputs.original, best.source)
    )
    return (
        f'<h2>{title}</h2><p id="changes">{html.escape(best.candidate_id or "")}: '
        f"{html.escape(what)}</p>"
        + (f'<ul id="pragmas">{notes}</ul>' if notes else "")
        + '<div id="diff">'
        + diff_html(inputs.original, best.source, inputs.target_name)
        + "</div>"
    )


def _change_text(c: CandidateRecord, original: str) -> str:
    meta = c.meta or {}
    applied = meta.get("applied") or []
    change = ", ".join(applied) if applied else ("LLM rewrite" if c.source else "no program")
    notes = pragma_changes(original, c.source)
    out = html.escape(change) + f"<br><small>from {html.escape(c.parent_id)}</small>"
    out += "".join(f"<br><span class='warn'>{html.escape(n)}</span>" for n in notes)
    return out


def _candidates_html(candidates: list[CandidateRecord], original: str) -> str:
    rows = []
    for c in candidates:
        ev = EvalResult.from_dict(c.evaluation) if c.evaluation else None
        status = ev.status.value if ev else "not executed (reranked out)"
        cls = "ok" if ev and ev.status.correct else "fail"
        feedback = html.escape(format_feedback(ev)) if ev else ""
        critique = c.critique["text"] if c.critique else ""
        details = (
            f"<details><summary>critique</summary>{html.escape(critique)}</details>"
            if critique
            else ""
        )
        rows.append(
            f"<tr><td>{c.step + 1}</td><td>{c.proposal_index}</td>"
            f"<td>{html.escape(c.candidate_id or '-')}</td><td>{_change_text(c, original)}</td>"
            f"<td class='{cls}'>{status}</td><td>{(c.reward or 0):.3f}</td>"
            f"<td>{feedback}</td><td>{details}</td></tr>"
        )
    return (
        '<h2>Every candidate</h2><table id="candidates"><tr><th>step</th><th>#</th><th>id</th>'
        "<th>change (from parent)</th><th>verdict</th><th>speedup</th><th>feedback</th>"
        f"<th>critique</th></tr>\n{''.join(rows)}</table>"
    )


def _budget_html(end: RunEnd | None, executed: int) -> str:
    """The run's totals; an interrupted run has no run_end, so its finished candidates count."""
    usage = end.usage if end else Usage()
    rows = [
        ("evaluations", end.evaluations if end else f"{executed} (interrupted)"),
        ("LLM calls (cache hits)", f"{usage.calls} ({usage.cached_calls})"),
        ("tokens in / out", f"{usage.input_tokens} / {usage.output_tokens}"),
        ("cost", f"${usage.cost_usd:.4f}"),
        ("wall time", f"{end.wall_s:.1f} s" if end else "-"),
        ("stopped by", end.stopped_by if end else "interrupted"),
    ]
    return "<h2>Budget spent</h2>" + _table("budget", rows)
