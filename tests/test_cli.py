"""The `maxcode` command line as users type it."""

from __future__ import annotations

import re

import click
import typer.main

from maxcode.cli import app

FLAG = re.compile(r"^--[a-z0-9]+(-[a-z0-9]+)*$")


def _commands(command: click.Command, path: str = "maxcode"):
    yield path, command
    for name, sub in getattr(command, "commands", {}).items():
        yield from _commands(sub, f"{path} {name}")


def test_every_flag_is_lower_case_kebab():
    """typer 0.27.2 (the H100 image's) turned `kind` with metavar KIND into `--KIND`, so the
    documented `maxcode optimize --kind cuda` failed with "No such option" there; flags whose
    metavar is the parameter's name are now declared by name."""
    bad = [
        f"{path}: {opt}"
        for path, command in _commands(typer.main.get_command(app))
        for param in command.params
        if param.param_type_name == "option"  # typer 0.27 has its own Option class
        for opt in (*param.opts, *param.secondary_opts)
        if opt.startswith("--") and not FLAG.match(opt)
    ]
    assert bad == []


def test_optimize_takes_the_documented_flags():
    optimize = typer.main.get_command(app).commands["optimize"]
    flags = {opt for param in optimize.params for opt in param.opts}
    assert {"--kind", "--method", "--params", "--depth", "--k", "--out", "--resume"} <= flags
