"""``maxcode kernelcompare ...``: extract pairs, split tasks, SFT, GRPO, held-out table (over the stage functions, above the kernelcompare area).

A path left out is the one the pipeline's rule uses (the plan's, in ``maxcode.pipeline``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from maxcode.kernelcompare.params import KernelCompareParams, load_kernelcompare_params
from maxcode.llm.config import RoleConfig, role_config_from_dict
from maxcode.loader import load
from maxcode.params import EvaluationParams, read_params_file
from maxcode.pipeline import (
    CACHE_DIR,
    KC_ADAPTER,
    KC_LLM_CACHE,
    KC_PAIRS,
    KC_SPLIT,
    KC_TABLES,
    kernelcompare_suite_dir,
)
from maxcode.stages.kernelcompare import (
    extract_pairs,
    grpo_stage,
    heldout_stage,
    sft_stage,
    split_stage,
    table_stage,
)

app = typer.Typer(help="KernelCompare: slow/fast CUDA pairs, SFT and single-turn GRPO.")

ParamsOption = Annotated[Path, typer.Option("--params", help="parameter file")]
DEFAULT_PARAMS = Path("params.yaml")
SFT_ADAPTER = Path(KC_ADAPTER.format(kcstage="sft"))
GRPO_ADAPTER = Path(KC_ADAPTER.format(kcstage="grpo"))
TABLE_PREFIX = Path(KC_TABLES[0]).with_suffix("")  # results/tables/kernelcompare
TasksOption = Annotated[
    Path | None,
    typer.Option(help="tasks.jsonl (default: that of the suite kernelcompare.sources.suite)"),
]


def _params(path: Path) -> tuple[dict, KernelCompareParams]:
    raw = read_params_file(path)
    return raw, load_kernelcompare_params(raw)


def _tasks(tasks: Path | None, kc: KernelCompareParams) -> Path:
    return tasks or Path(kernelcompare_suite_dir(kc)) / "tasks.jsonl"


def _evaluation(raw: dict) -> EvaluationParams:
    return load(EvaluationParams, raw.get("evaluation"), "evaluation")


def _generator(raw: dict) -> RoleConfig:
    return role_config_from_dict("generator", (raw.get("llm") or {}).get("generator"))


@app.command()
def extract(
    out: Annotated[
        Path, typer.Option(help="pairs file (chat JSONL); .stats.json and .card.md beside it")
    ] = Path(KC_PAIRS),
    parboil: Annotated[
        Path | None, typer.Option(help="Parboil checkout (benchmarks/<b>/src/...)")
    ] = None,
    rodinia: Annotated[Path | None, typer.Option(help="Rodinia checkout (cuda/<b>/*.cu)")] = None,
    compile_cache: Annotated[
        Path | None, typer.Option(help="JSON cache of nvcc compile checks")
    ] = None,
    llm_cache: Annotated[
        Path, typer.Option(help="response cache of the llm naive generator")
    ] = Path(KC_LLM_CACHE),
    params: ParamsOption = DEFAULT_PARAMS,
) -> None:
    """Extract, clean, generate and deduplicate pairs; print the per-suite counts."""
    raw, kc = _params(params)
    if parboil is None and rodinia is None:
        raise typer.BadParameter("give --parboil and/or --rodinia")
    stats = extract_pairs(kc, _generator(raw), out, parboil, rodinia, compile_cache, llm_cache)
    for suite, row in stats["suites"].items():
        typer.echo(f"{suite}: raw {row['raw']}, kept {row['kept']}, dropped {row['dropped']}")


@app.command()
def split(
    tasks: TasksOption = None,
    out: Annotated[
        Path, typer.Option(help="split JSON (train/test ids, seed, fingerprint)")
    ] = Path(KC_SPLIT),
    params: ParamsOption = DEFAULT_PARAMS,
) -> None:
    """Deterministic train/test split (the report's 80/20 with seed 42)."""
    _, kc = _params(params)
    result = split_stage(kc, _tasks(tasks, kc), out)
    typer.echo(
        f"train {len(result.train)}, test {len(result.test)}, fingerprint {result.fingerprint}"
    )


@app.command()
def sft(
    pairs: Annotated[Path, typer.Option(help="pairs file from `extract`")] = Path(KC_PAIRS),
    out: Annotated[Path, typer.Option(help="adapter directory (with metrics.json)")] = SFT_ADAPTER,
    params: ParamsOption = DEFAULT_PARAMS,
) -> None:
    """Stage 1: LoRA supervised fine-tuning on the pairs."""
    _, kc = _params(params)
    metrics = sft_stage(kc, pairs, out)
    typer.echo(
        f"sft: {metrics['steps']} steps, loss {metrics['first_loss']} -> {metrics['last_loss']}"
    )


@app.command()
def grpo(
    tasks: TasksOption = None,
    split_file: Annotated[Path, typer.Option("--split", help="split JSON from `split`")] = Path(
        KC_SPLIT
    ),
    out: Annotated[
        Path, typer.Option(help="adapter directory (with metrics.json, evaluations.jsonl)")
    ] = GRPO_ADAPTER,
    init_adapter: Annotated[Path | None, typer.Option(help="SFT adapter to start from")] = None,
    cache_dir: Annotated[Path, typer.Option(help="evaluation cache")] = Path(CACHE_DIR),
    params: ParamsOption = DEFAULT_PARAMS,
) -> None:
    """Stage 2: single-turn GRPO on the split's training tasks."""
    raw, kc = _params(params)
    tasks = _tasks(tasks, kc)
    metrics = grpo_stage(kc, _evaluation(raw), tasks, split_file, out, init_adapter, cache_dir)
    typer.echo(f"grpo: {metrics['steps']} steps, rewards {metrics['rewards']}")


@app.command()
def heldout(
    stage: Annotated[str, typer.Option(help="row name, e.g. base, +SFT, +GRPO")],
    out: Annotated[Path, typer.Option(help="results JSONL (resumable)")],
    tasks: TasksOption = None,
    split_file: Annotated[Path, typer.Option("--split", help="split JSON from `split`")] = Path(
        KC_SPLIT
    ),
    adapter: Annotated[
        Path | None, typer.Option(help="adapter of this stage; none for base")
    ] = None,
    cache_dir: Annotated[Path, typer.Option(help="evaluation cache")] = Path(CACHE_DIR),
    params: ParamsOption = DEFAULT_PARAMS,
) -> None:
    """Evaluate one stage on the held-out tasks (one greedy completion each)."""
    raw, kc = _params(params)
    tasks = _tasks(tasks, kc)
    records = heldout_stage(kc, _evaluation(raw), stage, tasks, split_file, out, adapter, cache_dir)
    typer.echo(f"{stage}: {len(records)} held-out tasks evaluated")


@app.command()
def table(
    stage: Annotated[list[str], typer.Option(help="STAGE=results.jsonl, in row order")],
    out: Annotated[
        Path, typer.Option(help="output prefix; writes .md, .csv, .tex and .html")
    ] = TABLE_PREFIX,
    params: Annotated[
        Path | None,
        typer.Option(help="parameter file: adds the header block and the report's numbers"),
    ] = None,
) -> None:
    """The report's table (correctness, speedups) from measured held-out results."""
    files = {}
    for item in stage:
        name, sep, path = item.partition("=")
        if not sep:
            raise typer.BadParameter(f"--stage {item!r}: write it as NAME=path/to/results.jsonl")
        files[name] = Path(path)
    table = table_stage(files, read_params_file(params) if params else None, out)
    typer.echo(table.markdown())
