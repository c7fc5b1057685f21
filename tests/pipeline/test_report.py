"""`snakemake --report report.html` after a real run: one self-contained file that shows
every table (with its reference column), the plot and the provenance in headless
Chromium, with no console errors and no request leaving the file."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from maxcode.pipeline import (
    KC_TABLES,
    METRICS,
    PLOT,
    PLOTS,
    PROVENANCE,
    TABLE,
    TABLE_FORMATS,
    TABLE_NAMES,
)
from tests.workflow_copy import snakemake

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-sync"]
playwright = pytest.importorskip("playwright.sync_api")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        CHROMIUM is None, reason="needs Debian's chromium (apt-get install chromium)"
    ),
]


@pytest.fixture(scope="module")
def report(finished_pipeline: Path) -> Path:
    out = finished_pipeline / "report.html"
    proc = snakemake(finished_pipeline, "--report", str(out), timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return out


def open_view(page, category: str, subcategory: str, label: str) -> None:
    """Click through the report's menu to a result and press its view (eye) button."""
    back = page.get_by_role("link", name="Results", exact=True)
    if back.count():  # inside a category: its breadcrumb leads back to the list
        back.first.click()
    page.get_by_role("link", name=category).first.click()
    page.get_by_role("link", name=subcategory, exact=True).first.click()
    page.locator("tr", has_text=label).first.locator("a[iconname=eye]").click()


def test_report_shows_tables_plot_and_provenance(report: Path):
    errors: list[str] = []
    outside: list[str] = []
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page()
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))

        def only_the_file(route):
            if route.request.url.startswith(("file:", "data:")):
                route.continue_()
            else:
                outside.append(route.request.url)
                route.abort()

        page.route("**/*", only_the_file)
        page.goto(report.as_uri())
        page.wait_for_function("typeof app !== 'undefined'", timeout=20_000)

        embedded = set(page.evaluate("Object.keys(results)"))
        for name in TABLE_NAMES:
            for ext in TABLE_FORMATS:
                assert TABLE.format(name=name, ext=ext) in embedded
        assert set(KC_TABLES) <= embedded
        assert {PLOT.format(name=p) for p in PLOTS} <= embedded
        assert {PROVENANCE, METRICS} <= embedded
        assert "Preset offline" in page.inner_text("#app")  # the workflow description

        open_view(page, "Tables", "Main results", "html")
        frame = page.frame_locator("iframe")
        headers = frame.locator("th").all_inner_texts()
        assert "mean best speedup" in headers and "reference: mean best speedup" in headers
        assert frame.locator("tbody tr").count() == 2  # cuda-llm, cuda-llm+maxcode
        assert "cuda-llm+maxcode" in frame.locator("tbody").inner_text()
        notes = frame.locator(".notes").inner_text()
        assert "preset: offline" in notes and "hardware:" in notes
        assert "not a like-for-like comparison" in notes

        open_view(page, "Plots", "Speedup vs depth", "png")
        plot = page.locator("img[src^='data:image/png']")
        plot.wait_for()
        assert plot.evaluate("img => img.complete && img.naturalWidth > 0")

        provenance = json.loads(
            page.evaluate("fetch(results['results/provenance.json'].data_uri).then(r => r.text())")
        )
        assert provenance["preset"] == "offline" and provenance["params"]["preset"] == "offline"
        assert provenance["code_version"] and provenance["rollout_hardware"]
        browser.close()
    assert errors == []
    assert outside == []
