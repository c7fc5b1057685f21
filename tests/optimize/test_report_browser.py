"""report.html in headless Chromium: it loads with no console errors and shows the plot and the diff."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from maxcode.optimize.report import ReportInputs, write_report
from maxcode.search.config import MethodConfig
from maxcode.search.loop import RunContext, run_search
from maxcode.search.records import CandidateRecord, read_records
from maxcode.tasks.model import Task

from ..search.conftest import EchoCritic, ScriptedEvaluator, ScriptedPolicy

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
playwright = pytest.importorskip("playwright.sync_api")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="needs Debian's chromium (apt-get install chromium)"
)


def make_report(tmp_path: Path) -> Path:
    original = "#include <iostream>\nint main(){ std::cout << 1 << std::endl; }\n"
    task = Task(task_id="prog", suite="user", language="cpp", reference_source=original)
    script = [["ok:1.5 fast <io>", "compile_error <x>"], ["ok:2.5 faster & better", "wrong"]]
    ctx = RunContext(
        task,
        MethodConfig(name="maxcode", depth=2, k=2, critique=True, best=True),
        0,
        ScriptedPolicy(script),
        ScriptedEvaluator(),
        EchoCritic(),
    )
    run_search(ctx, tmp_path / "run.jsonl")
    out = tmp_path / "report.html"
    records = read_records(tmp_path / "run.jsonl")
    best = max((r for r in records if isinstance(r, CandidateRecord)), key=lambda r: r.reward or 0)
    inputs = ReportInputs(original, "prog.cpp", {"target": "prog.cpp"}, "summary <b>", best, best)
    write_report(out, records, inputs)
    return out


def test_report_renders_plot_and_diff_without_console_errors(tmp_path):
    report = make_report(tmp_path)
    errors: list[str] = []
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page()
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("requestfailed", lambda r: errors.append(f"request failed: {r.url}"))
        page.goto(report.as_uri())
        assert page.eval_on_selector("#speedup-plot", "img => img.complete && img.naturalWidth > 0")
        diff = page.inner_text("#diff")
        assert "faster & better" in diff and "std::endl" in diff  # added and removed lines
        assert page.locator("#candidates tr").count() == 1 + 4  # header + every candidate
        assert page.inner_text("#summary") == "summary <b>"  # escaped, not markup
        browser.close()
    assert errors == []
