"""Regenerate docs/optimize-report.png: run `maxcode optimize` on a built-in program and
screenshot its report.html in headless Chromium. With --report, screenshot a report that
already exists instead (e.g. one written on a GPU machine) into --png.

    python docs/make_report_screenshot.py
    python docs/make_report_screenshot.py --report docs/examples/h100-scale-add-clamp/report.html \
        --png docs/examples/h100-scale-add-clamp/report.png
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from playwright.sync_api import sync_playwright

from maxcode.tasks.builtin import materialize_builtin_cpp

DOCS = Path(__file__).parent


def screenshot(report: Path, png: Path) -> None:
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=shutil.which("chromium"), args=["--no-sandbox", "--disable-gpu"]
        )
        page = browser.new_page(viewport={"width": 1200, "height": 1600})
        page.goto(report.resolve().as_uri())
        page.screenshot(path=str(png), full_page=False)
        browser.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--report", type=Path, help="an existing report.html to screenshot")
    parser.add_argument("--png", type=Path, default=DOCS / "optimize-report.png")
    args = parser.parse_args()
    if args.report:
        screenshot(args.report, args.png)
        return
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        task = materialize_builtin_cpp(tmp / "suite", n_tests=5, problems=["io_prefix_sums_endl"])[
            0
        ]
        (tmp / "slow.cpp").write_text(task.reference_source)
        out = tmp / "out"
        cmd = [
            sys.executable,
            "-m",
            "maxcode",
            "optimize",
            str(tmp / "slow.cpp"),
            "--tests",
            str(task.tests_dir),
        ]
        subprocess.run([*cmd, "--out", str(out), "--depth", "3", "--k", "2"], check=True)
        screenshot(out / "report.html", args.png)


if __name__ == "__main__":
    main()
