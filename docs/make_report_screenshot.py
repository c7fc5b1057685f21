"""Regenerate docs/optimize-report.png: run `maxcode optimize` on a built-in program and
screenshot its report.html in headless Chromium.

    python docs/make_report_screenshot.py
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from playwright.sync_api import sync_playwright

from maxcode.tasks.builtin import materialize_builtin_cpp

DOCS = Path(__file__).parent


def main() -> None:
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
        with sync_playwright() as p:
            browser = p.chromium.launch(
                executable_path=shutil.which("chromium"), args=["--no-sandbox", "--disable-gpu"]
            )
            page = browser.new_page(viewport={"width": 1200, "height": 1600})
            page.goto((out / "report.html").as_uri())
            page.screenshot(path=str(DOCS / "optimize-report.png"), full_page=False)
            browser.close()


if __name__ == "__main__":
    main()
