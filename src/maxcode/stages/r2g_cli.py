"""``maxcode r2g ...``: the reward-to-go stages by hand, over the functions the rules call.

Every command reads ``--params`` through the one loader (``maxcode.params.load_params``);
without arguments it does what its Snakemake rule does, on the plan's paths.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from maxcode.errors import ConfigError
from maxcode.params import load_params
from maxcode.pipeline import R2G_DATA, R2G_MODEL, R2G_RANKING, PipelinePlan
from maxcode.r2g.dataset import card_markdown
from maxcode.stages.r2g import corpus_ranking_stage, dataset_stage, ranking_stage, train_stage

app = typer.Typer(
    help="Reward-to-go model: dataset, training, ranking evaluation.", no_args_is_help=True
)

ParamsOption = Annotated[
    Path, typer.Option("--params", help="parameter file (its r2g and search.gamma are used)")
]
DEFAULT_PARAMS = Path("params.yaml")


@app.command()
def dataset(
    rollouts: Annotated[
        list[Path] | None,
        typer.Argument(
            metavar="[ROLLOUTS]...",
            help="rollout .jsonl files or folders (default: the rollouts of r2g.train_methods)",
        ),
    ] = None,
    out: Annotated[Path, typer.Option(help="folder for train/test jsonl and the card")] = Path(
        R2G_DATA
    ),
    suites: Annotated[
        list[Path] | None,
        typer.Option(
            "--suite",
            help="a suite folder (its tasks.jsonl: descriptions and the task list the split "
            "uses); repeat it; default: every suite of the params",
        ),
    ] = None,
    params: ParamsOption = DEFAULT_PARAMS,
) -> None:
    """Examples from executed candidates, split by task; prints the card."""
    cfg = load_params(params)
    plan = PipelinePlan.from_params(cfg)
    files = _rollout_files(rollouts) if rollouts else [Path(p) for p in _existing(plan)]
    suite_dirs = suites or [Path(d) for d in plan.suite_dirs()]
    for folder in suite_dirs:
        if not (folder / "tasks.jsonl").is_file():
            raise ConfigError(f"--suite {folder}: no tasks.jsonl there; build the suite first")
    card = dataset_stage(files, cfg.r2g, cfg.search.gamma, suite_dirs, out)
    typer.echo(card_markdown(card))


@app.command()
def train(
    dataset_dir: Annotated[
        Path, typer.Argument(metavar="[DATASET_DIR]", help="output of `maxcode r2g dataset`")
    ] = Path(R2G_DATA),
    out: Annotated[Path, typer.Option(help="model folder (resumes from its checkpoints)")] = Path(
        R2G_MODEL
    ),
    params: ParamsOption = DEFAULT_PARAMS,
) -> None:
    """Train the model of kind r2g.kind; writes the model, config.json and metrics.json."""
    cfg = load_params(params)
    metrics = train_stage(dataset_dir, cfg.r2g, out)
    typer.echo(json.dumps(metrics["test_ranking"]["all"], indent=2))


@app.command()
def evaluate(
    model_dir: Annotated[
        Path, typer.Argument(metavar="[MODEL_DIR]", help="a trained reward-to-go model")
    ] = Path(R2G_MODEL),
    dataset_dir: Annotated[
        Path, typer.Argument(metavar="[DATASET_DIR]", help="output of `maxcode r2g dataset`")
    ] = Path(R2G_DATA),
    split: Annotated[str, typer.Option(help="train | test")] = "test",
    out: Annotated[Path, typer.Option(help="where the ranking JSON goes")] = Path(R2G_RANKING),
    params: ParamsOption = DEFAULT_PARAMS,
) -> None:
    """Ranking metrics (average rank, Spearman, equal-budget kept share) on a split."""
    if split not in ("train", "test"):
        raise ConfigError(f"--split {split!r}: choose train or test")
    report = ranking_stage(model_dir, dataset_dir, load_params(params).r2g, out, split)
    typer.echo(json.dumps(report["detail"]["all"], indent=2))


def _existing(plan: PipelinePlan) -> list[str]:
    paths = plan.r2g_training_rollouts()
    missing = [p for p in paths if not Path(p).is_file()]
    if missing:
        raise ConfigError(
            f"{len(missing)} of {len(paths)} rollouts of r2g.train_methods are not there yet "
            f"(first: {missing[0]}); run `snakemake rollouts` or name ROLLOUTS"
        )
    return paths


def _rollout_files(paths: list[Path]) -> list[Path]:
    files: list[Path] = []
    for p in paths:
        if p.is_dir():
            files.extend(sorted(p.rglob("*.jsonl")))
        elif p.is_file():
            files.append(p)
        else:
            raise ConfigError(f"{p}: no such rollout file or folder")
    if not files:
        raise ConfigError(f"no .jsonl rollout files under {[str(p) for p in paths]}")
    return files


@app.command("held-out")
def held_out(
    corpus_dir: Annotated[
        Path, typer.Argument(metavar="CORPUS", help="output of `maxcode runs import`")
    ],
    measurements: Annotated[
        Path | None,
        typer.Option(help="the measurements `maxcode r2g corpus` will be given, if any"),
    ] = None,
    params: ParamsOption = DEFAULT_PARAMS,
) -> None:
    """The problems `maxcode r2g corpus` holds out, one per line: give them to `maxcode eval
    runs --problems` to measure exactly the candidates the ranking is judged on."""
    from maxcode.r2g.corpus import held_out_problems
    from maxcode.runs.evaluate import read_measurements
    from maxcode.runs.pools import build_pools
    from maxcode.runs.record import read_corpus

    split = load_params(params).r2g.dataset
    measured = read_measurements(measurements) if measurements else None
    pools = build_pools(read_corpus(corpus_dir), measured)
    for problem in sorted(held_out_problems(pools, split.test_fraction, split.seed)):
        typer.echo(problem)


@app.command()
def corpus(
    corpus_dir: Annotated[
        Path, typer.Argument(metavar="CORPUS", help="output of `maxcode runs import`")
    ],
    measurements: Annotated[
        Path | None,
        typer.Option(
            help="our GPU measurements (`maxcode eval runs` export); they win per problem"
        ),
    ] = None,
    out: Annotated[Path, typer.Option(help="dataset, models and ranking.json")] = Path(
        "models/r2g-corpus"
    ),
    tables: Annotated[Path, typer.Option(help="folder of the r2g_corpus table")] = Path(
        "results/tables"
    ),
    kind: Annotated[
        list[str] | None, typer.Option(help="model kind(s) to run (default: both)")
    ] = None,
    reuse_models: Annotated[
        bool,
        typer.Option(
            help="score a kind's model already trained in OUT/<kind> instead of retraining"
        ),
    ] = False,
    params: ParamsOption = DEFAULT_PARAMS,
) -> None:
    """Train on the corpus's training problems; rank held-out problems' real candidates."""
    cfg = load_params(params)
    kinds = tuple(kind or ("encoder", "generative"))
    bad = [k for k in kinds if k not in ("encoder", "generative")]
    if bad:
        raise ConfigError(f"--kind {bad[0]!r}: choose encoder or generative")
    report = corpus_ranking_stage(
        corpus_dir,
        cfg.r2g,
        cfg.search.gamma,
        out,
        tables,
        cfg.tables.bootstrap_samples,
        cfg.tables.confidence,
        Path(cfg.tables.reference) if cfg.tables.reference else None,
        measurements,
        kinds,
        reuse_models,
    )
    typer.echo((tables / "r2g_corpus.md").read_text())
    typer.echo(json.dumps(report["pools"], indent=2))
