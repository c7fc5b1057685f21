"""The papers' tables as files (Markdown, CSV, LaTeX), built from rollout records alone.

Each table states its preset, the policy and critic (labelled offline where they are
not LLMs), the evaluation budget and the hardware, so a number never travels without
what produced it: Markdown and LaTeX in a header block, CSV in constant columns at the
end of every row (so the file stays one plain table for any CSV reader). Where the
papers published a number for a row, a ``reference: <column>`` column shows it.
"""

from __future__ import annotations

import csv
import html
import io
import math
import re
from collections import defaultdict
from pathlib import Path

from maxcode.records import atomic_write_json, atomic_write_text
from maxcode.report.config import TablesParams
from maxcode.report.reference import (
    REFERENCE_PREFIX,
    ReferenceBook,
    reference_cells,
    reference_notes,
)
from maxcode.report.runs import RunRow
from maxcode.report.stats import average_ranks, bootstrap_ci, paired_difference


class Table:
    """Rows plus the header block (``notes``); ``meta`` repeats the run context in CSV."""

    def __init__(
        self,
        title: str,
        columns: list[str],
        rows: list[list],
        notes: list[str],
        meta: dict[str, str] | None = None,
    ):
        self.title, self.columns, self.rows, self.notes = title, columns, rows, notes
        self.meta = meta or {}

    def markdown(self) -> str:
        out = [f"## {self.title}", ""]
        out += [f"- {n}" for n in self.notes]
        out += ["", "| " + " | ".join(self.columns) + " |", "|" + "---|" * len(self.columns)]
        out += ["| " + " | ".join(_fmt(v) for v in row) + " |" for row in self.rows]
        return "\n".join(out) + "\n"

    def csv(self) -> str:
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow([*self.columns, *self.meta])
        writer.writerows(
            [[*(_fmt(v, csv=True) for v in row), *self.meta.values()] for row in self.rows]
        )
        return buf.getvalue()

    def latex(self) -> str:
        esc = _latex_escape
        lines = [
            "% " + self.title,
            *(f"% {n}" for n in self.notes),
            "\\begin{tabular}{" + "l" * len(self.columns) + "}",
            "\\hline",
            " & ".join(esc(c) for c in self.columns) + " \\\\",
            "\\hline",
            *(" & ".join(esc(_fmt(v)) for v in row) + " \\\\" for row in self.rows),
            "\\hline",
            "\\end{tabular}",
        ]
        return "\n".join(lines) + "\n"

    def html(self) -> str:
        """A standalone page (no scripts, no external files) for the Snakemake report."""
        esc = html.escape
        head = "".join(f"<th>{esc(c)}</th>" for c in self.columns)
        body = "".join(
            "<tr>" + "".join(f"<td>{esc(_fmt(v))}</td>" for v in row) + "</tr>" for row in self.rows
        )
        notes = "".join(f"<li>{esc(n)}</li>" for n in self.notes)
        return (
            f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
            f"<title>{esc(self.title)}</title><style>{_HTML_STYLE}</style></head>"
            f"<body><h2>{esc(self.title)}</h2><ul class=notes>{notes}</ul>"
            f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></body></html>\n"
        )

    def write(self, out_dir: Path, name: str) -> None:
        atomic_write_text(out_dir / f"{name}.md", self.markdown())
        atomic_write_text(out_dir / f"{name}.csv", self.csv())
        atomic_write_text(out_dir / f"{name}.tex", self.latex())
        atomic_write_text(out_dir / f"{name}.html", self.html())


_HTML_STYLE = (
    "body{font-family:sans-serif;font-size:13px;margin:1em}"
    "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 6px;text-align:left}"
    "th{background:#f3f3f3}.notes{color:#444}"
)


def best_speedup(run: RunRow, floor: bool) -> float:
    return max(1.0, run.best_reward) if floor else run.best_reward


def method_table(
    title: str,
    runs: list[RunRow],
    methods: list[str],
    context: dict,
    floor: bool,
    samples: int,
    confidence: float,
    table_key: str = "",
) -> Table:
    """Per method and suite: mean best speedup with CI, median, average rank, the paired
    difference from the table's first method with CI, budgets.

    ``table_key`` names the table in the reference file (main, ablation, rerank).
    """
    book: ReferenceBook | None = context.get("reference")
    benchmarks: dict[str, str | None] = context.get("benchmarks", {})
    ref_columns = book.columns(table_key) if book else []
    used = []
    by_method_suite: dict[tuple[str, str], list[RunRow]] = defaultdict(list)
    for r in runs:
        if r.method in methods:
            by_method_suite[(r.method, r.suite)].append(r)
    suites = sorted({s for _, s in by_method_suite})
    units = {
        suite: _scores_by_unit([r for r in runs if r.suite == suite and r.method in methods], floor)
        for suite in suites
    }
    ranks = {suite: average_ranks(units[suite]) for suite in suites}
    baseline = methods[0] if methods else ""
    pct = round(confidence * 100)
    columns = [
        "method",
        "suite",
        "policy",
        "runs (tasks x seeds)",
        "mean best speedup",
        f"{pct}% CI",
        "median",
        "avg rank",
        f"paired diff vs {baseline}",
        f"paired diff {pct}% CI",
        "% runs correct",
        "evals/run",
        "LLM calls/run",
        "tokens/run",
        "cost USD/run",
        *(REFERENCE_PREFIX + c for c in ref_columns),
    ]
    rows = []
    for method in methods:
        for suite in suites:
            group = by_method_suite.get((method, suite), [])
            if not group:
                continue
            values = [best_speedup(r, floor) for r in group]
            lo, hi = bootstrap_ci(values, samples, confidence)
            n_tasks = len({r.task_id for r in group})
            n_seeds = len({r.seed for r in group})
            paired_cells = ["", ""]  # the baseline's own row, or no unit both ran
            if method != baseline:
                diff, lo_d, hi_d, paired = paired_difference(
                    units[suite], method, baseline, samples, confidence
                )
                if paired:
                    paired_cells = [diff, f"[{lo_d:.3f}, {hi_d:.3f}]"]
            rows.append(
                [
                    method,
                    suite,
                    _policy_label(group),
                    f"{len(group)} ({n_tasks} x {n_seeds})",
                    _mean(values),
                    f"[{lo:.3f}, {hi:.3f}]",
                    _median(values),
                    ranks[suite].get(method, math.nan),
                    *paired_cells,
                    100.0 * sum(r.best_reward > 0 for r in group) / len(group),
                    _mean([r.evaluations for r in group]),
                    _mean([r.usage.calls for r in group]),
                    _mean([r.usage.input_tokens + r.usage.output_tokens for r in group]),
                    _mean([r.usage.cost_usd for r in group]),
                ]
            )
            if book:
                cells, entries = reference_cells(book, table_key, method, benchmarks.get(suite))
                rows[-1] += cells
                used += entries
    notes = [
        *_context_notes(context, runs, methods),
        "best speedup of a run: the best reward it reached (speedup if correct, else 0)"
        + ("; floored at 1.0 (PIE's convention)" if floor else "; not floored"),
        f"{pct}% CI: percentile bootstrap of the mean over runs ({samples} resamples)",
        "avg rank: per task x seed, methods of this table ranked by best speedup (1 = fastest)",
        f"paired diff: per task x seed, a method's best speedup minus {baseline}'s, averaged "
        f"over the units both ran, with a {pct}% percentile bootstrap interval over those "
        "units; an interval that contains 0 means this run does not tell the two apart",
    ]
    if ref_columns:
        notes += reference_notes(book, used, benchmarks)
    return Table(title, columns, rows, notes, _context_meta(context, runs))


def budget_table(runs: list[RunRow], methods: list[str], context: dict) -> Table:
    columns = [
        "method",
        "runs",
        "evals/run",
        "candidates/run",
        "correct candidates/run",
        "LLM calls/run",
        "cached calls/run",
        "tokens/run",
        "cost USD (total)",
        "wall s/run",
        "stopped by",
    ]
    rows = []
    for method in methods:
        group = [r for r in runs if r.method == method]
        if not group:
            continue
        stops = sorted({r.stopped_by for r in group})
        rows.append(
            [
                method,
                len(group),
                _mean([r.evaluations for r in group]),
                _mean([r.candidates for r in group]),
                _mean([r.correct_candidates for r in group]),
                _mean([r.usage.calls for r in group]),
                _mean([r.usage.cached_calls for r in group]),
                _mean([r.usage.input_tokens + r.usage.output_tokens for r in group]),
                sum(r.usage.cost_usd for r in group),
                _mean([r.wall_s for r in group]),
                ", ".join(stops),
            ]
        )
    return Table(
        "Budgets spent per method",
        columns,
        rows,
        _context_notes(context, runs, methods),
        _context_meta(context, runs),
    )


def rerank_table(
    runs: list[RunRow],
    methods: list[str],
    ranking: dict,
    context: dict,
    floor: bool,
    samples: int,
    confidence: float,
) -> Table:
    table = method_table(
        "Reward-to-go reranking at equal evaluation budget (held-out tasks)",
        runs,
        methods,
        context,
        floor,
        samples,
        confidence,
        "rerank",
    )
    model = ranking.get("model", {})
    table.notes.append(
        f"reward-to-go model: {model.get('kind', '?')} ({model.get('name', '?')}), trained on the "
        "training-split tasks only; rows run on held-out tasks"
    )
    for key, value in sorted(ranking.get("metrics", {}).items()):
        table.notes.append(f"held-out ranking metric {key}: {_fmt(value)}")
    return table


def scaling_curve(
    runs: list[RunRow], methods: list[str], floor: bool, samples: int, confidence: float
) -> list[dict]:
    """Best speedup against evaluations spent (depth x executed per step), per method."""
    points = []
    for method in methods:
        group = [r for r in runs if r.method == method]
        if not group:
            continue
        depth = max(len(r.best_after_step) for r in group)
        for t in range(depth):
            values = []
            for r in group:
                # A run that stopped early keeps its best.
                best = (
                    r.best_after_step[min(t, len(r.best_after_step) - 1)]
                    if r.best_after_step
                    else 0.0
                )
                values.append(max(1.0, best) if floor else best)
            lo, hi = bootstrap_ci(values, samples, confidence)
            points.append(
                {
                    "method": method,
                    "step": t + 1,
                    "evaluations": (t + 1) * group[0].executed_per_step,
                    "mean": _mean(values),
                    "median": _median(values),
                    "ci_low": lo,
                    "ci_high": hi,
                    "runs": len(values),
                }
            )
    return points


def write_all(
    runs: list[RunRow],
    tables: TablesParams,
    ranking: dict,
    r2g_card: dict,
    context: dict,
    tables_dir: Path,
    plots_dir: Path,
    metrics_path: Path,
) -> None:
    from maxcode.report.plots import plot_scaling

    floor, samples, conf = tables.floor_speedup_at_1, tables.bootstrap_samples, tables.confidence
    main = method_table(
        "Main results: mean best speedup and average rank",
        runs,
        list(tables.main),
        context,
        floor,
        samples,
        conf,
        "main",
    )
    ablation = method_table(
        "Ablation of the observation (Critique-only, Best Perf-only, Traj Critique Best Perf)",
        runs,
        list(tables.ablation),
        context,
        floor,
        samples,
        conf,
        "ablation",
    )
    if replayed(runs):
        ablation.notes.append(
            "left out under replay: trajectory, critique and best-so-far have no effect on "
            "replayed programs"
        )
    rerank = rerank_table(runs, list(tables.rerank), ranking, context, floor, samples, conf)
    all_methods = list(dict.fromkeys([*tables.main, *tables.ablation, *tables.rerank]))
    budget = budget_table(runs, all_methods, context)
    for name, table in [
        ("main", main),
        ("ablation", ablation),
        ("rerank", rerank),
        ("budget", budget),
    ]:
        table.write(tables_dir, name)
    curve_methods = list(dict.fromkeys([*tables.main, *tables.ablation]))
    curve = scaling_curve(runs, curve_methods, floor, samples, conf)
    _write_curve_csv(curve, plots_dir / "speedup_vs_depth.csv")
    plot_scaling(
        curve, plots_dir / "speedup_vs_depth.png", title_note=_label(context, runs), confidence=conf
    )
    metrics = {
        "main": _metric_block(main),
        "ablation": _metric_block(ablation),
        "rerank": _metric_block(rerank),
        "r2g": ranking.get("metrics", {}),
        "r2g_dataset": {
            k: v for k, v in r2g_card.get("counts", {}).items() if isinstance(v, int | float)
        },
        "preset": context.get("preset"),
    }
    atomic_write_json(metrics_path, metrics)


def _metric_block(table: Table) -> dict:
    idx = {c: i for i, c in enumerate(table.columns)}
    block: dict = {}
    for row in table.rows:
        key = f"{row[idx['method']]}/{row[idx['suite']]}"
        block[key] = {
            "mean_best_speedup": _round(row[idx["mean best speedup"]]),
            "avg_rank": _round(row[idx["avg rank"]]),
            "evals_per_run": _round(row[idx["evals/run"]]),
        }
        diff = next((row[i] for c, i in idx.items() if c.startswith("paired diff vs ")), "")
        if diff != "":
            block[key]["paired_diff_vs_first"] = _round(diff)
    return block


def _scores_by_unit(runs: list[RunRow], floor: bool) -> dict:
    units: dict = defaultdict(dict)
    for r in runs:
        units[(r.task_id, r.seed)][r.method] = best_speedup(r, floor)
    return units


_REPLAY_SEED = re.compile(r"\+seed(\d+)$")


def _policy_label(group: list[RunRow]) -> str:
    """The group's policy; a replay policy's name carries its run's seed, so a group of
    several seeds names them together ("replay/1 (replayed LLM programs), seeds 0, 1, 2")."""
    r = group[0]
    if r.policy.startswith(REPLAY_POLICY):
        seeds = sorted({int(m.group(1)) for g in group if (m := _REPLAY_SEED.search(g.policy))})
        base = _REPLAY_SEED.sub("", r.policy)
        label = f"{base} (replayed LLM programs), seed{'s' if len(seeds) > 1 else ''} "
        label += ", ".join(map(str, seeds))
    else:
        label = f"{r.policy}{' (offline)' if r.policy_offline else ''}"
    if r.critic:
        label += f"; critic {r.critic}{' (offline)' if r.critic_offline else ''}"
    return label


def _context_notes(context: dict, runs: list[RunRow], methods: list[str]) -> list[str]:
    """The header block: preset, models, evaluator, budgets, hardware, seeds."""
    meta = _context_meta(context, runs)
    offline = all(r.policy_offline and (r.critic_offline in (None, True)) for r in runs)
    offline = offline and not replayed(runs)
    notes = [
        f"preset: {meta['preset']}"
        + (" (offline: non-LLM policy and critic, labelled offline)" if offline else ""),
        f"models: generator {meta['generator']}, critic {meta['critic']}",
        f"evaluator: {meta['evaluator']}",
        *replay_notes(runs),
    ]
    budgets = context.get("budgets", {})
    shown = [f"{m}: {budgets[m]}" for m in methods if m in budgets]
    if shown:
        notes.append("budget per run (params): " + "; ".join(shown))
    notes += [f"hardware: {meta['hardware']}", f"seeds: {meta['seeds']}"]
    return notes


REPLAY_POLICY = "replay/"  # how maxcode.runs.replay.ReplayPolicy's names start


def replayed(runs: list[RunRow]) -> bool:
    return any(r.policy.startswith(REPLAY_POLICY) for r in runs)


def replay_notes(runs: list[RunRow]) -> list[str]:
    """What a replayed table measures, and the unit of a reward from a runtime-only label."""
    if not replayed(runs):
        return []
    notes = [
        "generator: replay (policy replay/1 with each run's seed): programs written by public LLM "
        "runs, drawn without replacement from each problem's corpus pool in an order fixed by "
        "the run's seed; the search selects among real candidates and answers no prompt, so "
        "trajectory, critique and best-so-far have no effect under replay (the observation "
        "ablations are left out)"
    ]
    if any("published label" in r.evaluator for r in runs):
        notes.append(
            "label source per problem: our GPU measurements where the problem has any, else "
            "the usable published labels of one GPU (a pool never mixes sources)"
        )
    if any("1000/runtime_ms" in r.evaluator for r in runs):
        notes.append(
            "where a published label gives only the program's runtime, its reward is "
            "1000/runtime_ms: ranks within a problem are exact, absolute values are not speedups"
        )
    return notes


def _context_meta(context: dict, runs: list[RunRow]) -> dict[str, str]:
    """The run context as constant CSV columns (same wording as the header block)."""
    hw = runs[0].hardware if runs else {}
    return {
        "preset": str(context.get("preset", "?")),
        "generator": str(context.get("generator", "?")),
        "critic": str(context.get("critic", "?")),
        "evaluator": ", ".join(sorted({r.evaluator for r in runs})),
        "hardware": f"{hw.get('cpu', '?')} ({hw.get('cores', '?')} cores)"
        + (f"; GPU {', '.join(hw['gpus'])}" if hw.get("gpus") else ""),
        "seeds": str(sorted({r.seed for r in runs})),
    }


def _label(context: dict, runs: list[RunRow]) -> str:
    offline = all(r.policy_offline for r in runs)
    return f"preset {context.get('preset', '?')}" + (
        ", offline policy and critic" if offline else ""
    )


def _write_curve_csv(curve: list[dict], path: Path) -> None:
    buf = io.StringIO()
    cols = ["method", "step", "evaluations", "mean", "median", "ci_low", "ci_high", "runs"]
    writer = csv.DictWriter(buf, fieldnames=cols, lineterminator="\n")
    writer.writeheader()
    writer.writerows(curve)
    atomic_write_text(path, buf.getvalue())


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else math.nan


def _median(values: list[float]) -> float:
    s = sorted(values)
    n = len(s)
    if not n:
        return math.nan
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def _round(v: object) -> object:
    return (
        round(v, 4)
        if isinstance(v, float) and not math.isnan(v)
        else (None if isinstance(v, float) else v)
    )


def _fmt(v: object, csv: bool = False) -> str:
    if isinstance(v, float):
        if math.isnan(v):
            return "" if csv else "n/a"
        return repr(round(v, 6)) if csv else f"{v:.3f}"
    return str(v)


def _latex_escape(text: str) -> str:
    for a, b in [
        ("\\", "\\textbackslash{}"),
        ("&", "\\&"),
        ("%", "\\%"),
        ("_", "\\_"),
        ("#", "\\#"),
        ("$", "\\$"),
    ]:
        text = text.replace(a, b)
    return text
