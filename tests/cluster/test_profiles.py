"""Every execution profile names only options the installed Snakemake (with its executor
plugins) accepts, and per-rule resources only for rules the workflow has: a misspelt key
would otherwise surface only on the cluster."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from snakemake.cli import get_argument_parser

from tests.workflow_copy import REPO, make_workdir

from .conftest import small_params

PROFILES = sorted((REPO / "workflow" / "profiles").glob("*/config.yaml"))
# Template lines the user uncomments (`# key: value`), checked like the live ones.
COMMENTED_OPTION = re.compile(r"^# ((?:default-storage|kubernetes|slurm)-[a-z-]+):", re.M)


@pytest.fixture(scope="module")
def snakemake_options() -> set[str]:
    parser = get_argument_parser()
    return {opt for action in parser._actions for opt in action.option_strings}


@pytest.fixture(scope="module")
def workflow_rules(tmp_path_factory: pytest.TempPathFactory) -> set[str]:
    workdir = make_workdir(tmp_path_factory.mktemp("rules"), small_params())
    proc = subprocess.run(
        [sys.executable, "-m", "snakemake", "--list-rules"],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return set(proc.stdout.split())


def test_profiles_are_found() -> None:
    assert {p.parent.name for p in PROFILES} >= {"local", "gpu", "slurm", "kubernetes"}


@pytest.mark.parametrize("profile", PROFILES, ids=lambda p: p.parent.name)
def test_profile_names_only_accepted_options_and_real_rules(
    profile: Path, snakemake_options: set[str], workflow_rules: set[str]
) -> None:
    text = profile.read_text()
    config = yaml.safe_load(text)
    keys = set(config) | set(COMMENTED_OPTION.findall(text))
    unknown = sorted(k for k in keys if f"--{k}" not in snakemake_options)
    assert not unknown, f"{profile}: Snakemake does not accept {unknown}"
    per_rule = set(config.get("set-resources", {})) | set(config.get("set-threads", {}))
    assert per_rule <= workflow_rules, (
        f"{profile}: no such rule {sorted(per_rule - workflow_rules)}"
    )


def test_kubernetes_profile_is_loaded_by_snakemake_up_to_the_storage_it_leaves_to_the_user(
    tmp_path: Path,
) -> None:
    """Snakemake reads the whole profile (an unknown option or bad value stops it first) and
    then asks for the storage provider that the profile leaves for the user to fill in."""
    workdir = make_workdir(tmp_path / "w", small_params())
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "snakemake",
            "--profile",
            str(REPO / "workflow" / "profiles" / "kubernetes"),
            "--dry-run",
        ],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=120,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "--default-storage-provider" in out, out[-3000:]
    assert "unrecognized arguments" not in out and "invalid" not in out.lower(), out[-3000:]
