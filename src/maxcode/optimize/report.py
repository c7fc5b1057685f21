"""A self-contained report.html for one optimize run: plot, winning diff, every candidate."""

from __future__ import annotations

import base64
import difflib
import html
import io
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
from maxcode.records import atomic_write_text
from maxcode.search.observation import format_feedback
from maxcode.search.records import CandidateRecord, Record, RunEnd, RunStart

STYLE = """
body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;color:#222}
table{border-collapse:collapse;width:100%;font-size:13px}
td,th{border:1px solid #ddd;padding:4px 6px;vertical-align:top;text-align:left}
th{background:#f4f4f4} .ok{color:#0a7d2c} .fail{color:#b00020}
.summary{background:#f6f8fa;padding:1em;border-radius:6px} pre{overflow-x:auto;font-size:12px}
"""


def speedup_plot_png(candidates: list[CandidateRecord]) -> bytes:
    """Speedup of every executed candidate per step, and the best so far."""
    fig, ax = plt.subplots(figsize=(7, 3.6), dpi=110)
    executed = [c for c in candidates if c.executed]
    steps = [c.step + 1 for c in executed]
    rewards = [c.reward or 0.0 for c in executed]
    colors = ["#0a7d2c" if (c.reward or 0) > 0 else "#b00020" for c in executed]
    ax.scatter(steps, rewards, c=colors, alpha=0.7, label="candidate (red: failed)")
    best, best_line = 0.0, []
    for s in sorted(set(steps)):
        best = max([best, *(r for st, r in zip(steps, rewards, strict=True) if st == s)])
        best_line.append((s, best))
    if best_line:
        ax.plot(*zip(*best_line, strict=True), color="#1f4e9c", marker="o", label="best so far")
    ax.axhline(1.0, color="#888", linestyle="--", linewidth=1, label="original")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("search step")
    ax.set_ylabel("speedup (0 = incorrect)")
    ax.legend(fontsize=8)
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
    if not diff:
        return "<p>No candidate beat the original: there is no diff.</p>"
    return highlight(diff, DiffLexer(), HtmlFormatter(noclasses=True, nowrap=False))


def write_report(
    path: Path,
    records: list[Record],
    original: str,
    target_name: str,
    header: dict,
    summary: str,
) -> None:
    """``records``: the run's file as :func:`maxcode.search.records.read_records` reads it."""
    start = records[0]
    assert isinstance(start, RunStart), "a rollout file starts with its run_start record"
    candidates = [r for r in records if isinstance(r, CandidateRecord)]
    end = records[-1] if isinstance(records[-1], RunEnd) else None
    best = next((c for c in candidates if end and c.candidate_id == end.best_candidate_id), None)
    png = base64.b64encode(speedup_plot_png(candidates)).decode()
    rows = []
    for c in candidates:
        ev = EvalResult.from_dict(c.evaluation) if c.evaluation else None
        status = ev.status.value if ev else "not executed (reranked out)"
        cls = "ok" if ev and ev.status.correct else "fail"
        feedback = html.escape(format_feedback(ev)) if ev else ""
        critique = c.critique["text"] if c.critique else ""
        rows.append(
            f"<tr><td>{c.step + 1}</td><td>{c.proposal_index}</td><td class='{cls}'>{status}</td>"
            f"<td>{(c.reward or 0):.3f}</td><td>{feedback}</td>"
            f"<td>{'<details><summary>critique</summary>' + html.escape(critique) + '</details>' if critique else ''}</td></tr>"
        )
    usage = end.usage if end else Usage()
    meta = "".join(
        f"<tr><th>{html.escape(k)}</th><td>{html.escape(str(v))}</td></tr>"
        for k, v in header.items()
    )
    body = f"""<!doctype html><html><head><meta charset="utf-8"><title>maxcode optimize: {html.escape(target_name)}</title>
<style>{STYLE}</style></head><body>
<h1>maxcode optimize: {html.escape(target_name)}</h1>
<p class="summary" id="summary">{html.escape(summary)}</p>
<h2>Speedup per step</h2><img id="speedup-plot" alt="speedup per step per candidate" src="data:image/png;base64,{png}">
<h2>Winning change</h2><div id="diff">{diff_html(original, best.source, target_name) if best else "<p>No correct candidate beat the original.</p>"}</div>
<h2>Every candidate</h2><table id="candidates"><tr><th>step</th><th>#</th><th>verdict</th><th>speedup</th><th>feedback</th><th>critique</th></tr>
{"".join(rows)}</table>
<h2>Budget spent</h2><table id="budget"><tr><th>evaluations</th><td>{end.evaluations if end else "?"}</td></tr>
<tr><th>LLM calls (cache hits)</th><td>{usage.calls} ({usage.cached_calls})</td></tr>
<tr><th>tokens in / out</th><td>{usage.input_tokens} / {usage.output_tokens}</td></tr>
<tr><th>cost</th><td>${usage.cost_usd:.4f}</td></tr>
<tr><th>wall time</th><td>{(end.wall_s if end else 0.0):.1f} s</td></tr>
<tr><th>stopped by</th><td>{html.escape(end.stopped_by if end else "interrupted")}</td></tr></table>
<h2>Run</h2><table id="provenance">{meta}
<tr><th>evaluator</th><td>{html.escape(start.evaluator)}</td></tr>
<tr><th>hardware</th><td>{html.escape(str(start.provenance.get("hardware", {})))}</td></tr>
<tr><th>code version</th><td>{html.escape(str(start.provenance.get("code_version", "?")))}</td></tr></table>
</body></html>
"""
    atomic_write_text(path, body)
