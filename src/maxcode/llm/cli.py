"""``maxcode llm ...``: the fake API server and a look into the response cache."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Annotated

import typer

from maxcode.llm.fake_servers import main as fake_server_main

app = typer.Typer(help="LLM backends: fake API server, response cache.", no_args_is_help=True)
app.command("fake-server")(fake_server_main)


@app.command("cache-info")
def cache_info(
    path: Annotated[
        Path, typer.Argument(metavar="CACHE", help="response cache (llm_responses.sqlite)")
    ],
) -> None:
    """Completions stored per backend:model, so you can see what a replay will serve."""
    if not path.is_file():
        raise typer.BadParameter(f"{path}: no such cache file")
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        rows = db.execute(
            "SELECT identity, COUNT(*) FROM completions GROUP BY identity ORDER BY identity"
        ).fetchall()
    for identity, count in rows:
        typer.echo(f"{count:8d}  {identity}")
    typer.echo(f"{sum(c for _, c in rows):8d}  total")
