"""A Snakemake job is a fresh Python process: the rollout job imports ``maxcode.pipeline``
once per (task, method, seed), often thousands of times a run, so that import stays free of
the libraries only the table and ranking stages use (scipy, matplotlib, torch)."""

from __future__ import annotations

import subprocess
import sys


def test_the_rollout_jobs_import_leaves_out_scipy_matplotlib_and_torch():
    heavy = ("scipy", "matplotlib", "torch")
    probe = (
        "import sys; from maxcode.pipeline import run_rollout; "
        f"print(sorted({{m.split('.')[0] for m in sys.modules}} & {set(heavy)!r}))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout
