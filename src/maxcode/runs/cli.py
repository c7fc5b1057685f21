"""``maxcode runs ...``: build the corpus of public KernelBench runs."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from maxcode.runs.card import card_markdown

app = typer.Typer(help="Public KernelBench runs: import them as one corpus.", no_args_is_help=True)


@app.command("import")
def import_cmd(
    source: Annotated[
        list[str],
        typer.Option(
            "--source",
            metavar="LAYOUT:PATH[@COMMIT]",
            help="a public run layout and the local copy of its repository (repeat it); layouts: "
            "kernelbench-runs, kernel-coder, kernelbench-agentic, cuda-l1",
        ),
    ],
    kernelbench: Annotated[
        Path,
        typer.Option(
            "--kernelbench", metavar="DIR", help="KernelBench's KernelBench/ folder (problem names)"
        ),
    ],
    out: Annotated[Path, typer.Option(metavar="DIR", help="corpus folder")] = Path("data/corpus"),
) -> None:
    """Read public runs into OUT/corpus.jsonl with card.json and card.md; prints the card."""
    from maxcode.runs.corpus import SourceSpec, import_corpus

    specs = [SourceSpec.parse(s) for s in source]
    card = import_corpus(specs, kernelbench, out)
    typer.echo(card_markdown(card))
