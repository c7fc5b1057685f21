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


def eval_runs(
    corpus: Annotated[
        Path, typer.Argument(metavar="CORPUS", help="output of `maxcode runs import`")
    ],
    kernelbench: Annotated[
        Path | None,
        typer.Option(
            "--kernelbench",
            metavar="DIR",
            help="KernelBench's KernelBench/ folder: each result says whether the reference "
            "the program was measured against is this checkout's",
        ),
    ] = None,
    limit: Annotated[
        int | None,
        typer.Option(metavar="N", help="a stratified sample of N programs (levels 1 and 2)"),
    ] = None,
    per_problem: Annotated[
        int | None,
        typer.Option(
            metavar="K",
            min=1,
            help="sample whole problems, up to K programs each (with --limit: until N "
            "programs), so that every sampled problem has candidates to rank",
        ),
    ] = None,
    problems: Annotated[
        Path | None,
        typer.Option(
            metavar="FILE",
            help="sample only these problems, one per line as `maxcode r2g held-out` prints "
            "them (L2/12_Gemm.py)",
        ),
    ] = None,
    sample_seed: Annotated[int, typer.Option(metavar="S", help="the sample's seed")] = 0,
    out: Annotated[Path, typer.Option(metavar="DIR", help="results folder (resumes there)")] = Path(
        "results/corpus-eval"
    ),
    batch: Annotated[
        int, typer.Option(metavar="N", min=1, help="candidates per evaluator call")
    ] = 32,
    cache_dir: Annotated[
        Path | None, typer.Option("--cache-dir", help="build cache (default $MAXCODE_CACHE/cuda)")
    ] = None,
    max_minutes: Annotated[
        float | None,
        typer.Option(metavar="MIN", help="start no batch after MIN minutes; a rerun continues"),
    ] = None,
) -> None:
    """Measure corpus programs on this GPU, resumably; write verdicts, KernelBench-format
    eval_results.json per run, the agreement with the published labels and the export."""
    import json

    from maxcode.evaluate.cuda import CudaEvalConfig, CudaEvaluator
    from maxcode.records import hardware_fingerprint
    from maxcode.runs.corpus import Checkout
    from maxcode.runs.evaluate import evaluate_corpus

    wanted = None
    if problems is not None:
        if not problems.is_file():
            raise typer.BadParameter(f"{problems}: no such file", param_hint="--problems")
        wanted = {line.strip() for line in problems.read_text().splitlines() if line.strip()}
    gpus = hardware_fingerprint().get("gpus") or ()
    if not gpus:
        raise typer.BadParameter("no NVIDIA GPU here (nvidia-smi lists none)", param_hint="CORPUS")
    checkout = Checkout(kernelbench) if kernelbench else None
    with CudaEvaluator(CudaEvalConfig(), cache_dir) as evaluator:
        summary = evaluate_corpus(
            corpus,
            out,
            lambda items, on_result: evaluator.evaluate_items(items, on_result=on_result),
            evaluator.name,
            gpus[0],
            limit=limit,
            seed=sample_seed,
            batch=batch,
            checkout=checkout,
            max_seconds=60 * max_minutes if max_minutes is not None else None,
            per_problem=per_problem,
            problems=wanted,
        )
    typer.echo(json.dumps(summary, indent=2))
    typer.echo((out / "agreement.md").read_text())
