"""``maxcode kernelcompare ...``: extract pairs, split tasks, SFT, GRPO, held-out table."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Annotated

import typer
import yaml

from maxcode.errors import ConfigError
from maxcode.kernelcompare.params import KernelCompareParams, load_kernelcompare_params
from maxcode.loader import load
from maxcode.params import EvaluationParams
from maxcode.records import atomic_write_json
from maxcode.roles import build_evaluator

app = typer.Typer(help="KernelCompare: slow/fast CUDA pairs, SFT and single-turn GRPO.")

ParamsOption = Annotated[Path, typer.Option("--params", help="parameter file")]
DEFAULT_PARAMS = Path("params.yaml")
DEFAULT_CACHE = Path(".cache/kernelcompare")


def _params(path: Path) -> tuple[dict, KernelCompareParams]:
    if not path.is_file():
        raise ConfigError(f"--params {path}: parameter file not found; pass the params.yaml to use")
    try:
        raw = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as err:
        raise ConfigError(f"--params {path}: not valid YAML: {err}") from err
    if not isinstance(raw, dict):
        raise ConfigError(f"--params {path}: expected a mapping of params blocks")
    return raw, load_kernelcompare_params(raw)


def _tasks(tasks_path: Path, split_path: Path | None, part: str):
    from maxcode.kernelcompare.split import Split
    from maxcode.tasks.model import read_tasks_jsonl

    tasks = read_tasks_jsonl(tasks_path)
    if split_path is None:
        return tasks
    split = Split.from_dict(json.loads(split_path.read_text()), str(split_path))
    wanted = getattr(split, part)
    by_id = {t.task_id: t for t in tasks}
    missing = [t for t in wanted if t not in by_id]
    if missing:
        raise typer.BadParameter(f"{split_path}: {part} ids not in {tasks_path}: {missing[:5]}")
    return [by_id[t] for t in wanted]


def _evaluator(tasks, raw: dict, cache_dir: Path):
    languages = {t.language for t in tasks}
    if len(languages) != 1:
        raise typer.BadParameter(f"tasks mix languages {sorted(languages)}; use one suite")
    evaluation = load(EvaluationParams, raw.get("evaluation"), "evaluation")
    return build_evaluator(languages.pop(), evaluation, cache_dir)


def _naive_generator(kc: KernelCompareParams, raw: dict, cache_dir: Path):
    from maxcode.kernelcompare.naive import LLMNaiveGenerator, SourceTransformGenerator

    if kc.extract.naive_generator == "offline":
        return SourceTransformGenerator(kc.extract.naive_transforms)
    from maxcode.llm.factory import build_client

    role = (raw.get("llm") or {}).get("generator")
    return LLMNaiveGenerator(build_client(role, "generator", cache_dir=cache_dir))


@app.command()
def extract(
    out: Annotated[
        Path, typer.Option(help="pairs file (chat JSONL); .stats.json and .card.md beside it")
    ],
    parboil: Annotated[
        Path | None, typer.Option(help="Parboil checkout (benchmarks/<b>/src/...)")
    ] = None,
    rodinia: Annotated[Path | None, typer.Option(help="Rodinia checkout (cuda/<b>/*.cu)")] = None,
    compile_cache: Annotated[
        Path | None, typer.Option(help="JSON cache of nvcc compile checks")
    ] = None,
    llm_cache: Annotated[
        Path, typer.Option(help="response cache of the llm naive generator")
    ] = DEFAULT_CACHE,
    params: ParamsOption = DEFAULT_PARAMS,
) -> None:
    """Extract, clean, generate and deduplicate pairs; print the per-suite counts."""
    from maxcode.kernelcompare.extract import CompileChecker, extract_parboil, extract_rodinia
    from maxcode.kernelcompare.records import write_dataset

    logging.basicConfig(level=logging.INFO, format="%(message)s")
    raw, kc = _params(params)
    if parboil is None and rodinia is None:
        raise typer.BadParameter("give --parboil and/or --rodinia")
    extractions = []
    if parboil is not None:
        extractions.append(extract_parboil(parboil, kc.extract))
    if rodinia is not None:
        checker = CompileChecker(kc.extract, compile_cache) if kc.extract.compile_check else None
        generator = _naive_generator(kc, raw, llm_cache)
        extractions.append(extract_rodinia(rodinia, generator, kc.extract, checker, kc.harness))
    stats = write_dataset(extractions, out, kc.extract.system_prompt)
    for suite, row in stats["suites"].items():
        typer.echo(f"{suite}: raw {row['raw']}, kept {row['kept']}, dropped {row['dropped']}")


@app.command()
def split(
    tasks: Annotated[Path, typer.Option(help="tasks.jsonl of the KernelBench level-1 suite")],
    out: Annotated[Path, typer.Option(help="split JSON (train/test ids, seed, fingerprint)")],
    params: ParamsOption = DEFAULT_PARAMS,
) -> None:
    """Deterministic train/test split (the report's 80/20 with seed 42)."""
    from maxcode.kernelcompare.split import split_tasks
    from maxcode.tasks.model import read_tasks_jsonl

    _, kc = _params(params)
    result = split_tasks(read_tasks_jsonl(tasks), kc.split)
    atomic_write_json(out, result.to_dict())
    typer.echo(
        f"train {len(result.train)}, test {len(result.test)}, fingerprint {result.fingerprint}"
    )


@app.command()
def sft(
    pairs: Annotated[Path, typer.Option(help="pairs file from `extract`")],
    out: Annotated[Path, typer.Option(help="adapter directory (with metrics.json)")],
    params: ParamsOption = DEFAULT_PARAMS,
) -> None:
    """Stage 1: LoRA supervised fine-tuning on the pairs."""
    from maxcode.kernelcompare.sft import run_sft

    _, kc = _params(params)
    metrics = run_sft(pairs, kc.require_model(), kc.sft_config(), out)
    typer.echo(
        f"sft: {metrics['steps']} steps, loss {metrics['first_loss']} -> {metrics['last_loss']}"
    )


@app.command()
def grpo(
    tasks: Annotated[Path, typer.Option(help="tasks.jsonl")],
    split_file: Annotated[Path, typer.Option("--split", help="split JSON from `split`")],
    out: Annotated[
        Path, typer.Option(help="adapter directory (with metrics.json, evaluations.jsonl)")
    ],
    init_adapter: Annotated[Path | None, typer.Option(help="SFT adapter to start from")] = None,
    cache_dir: Annotated[Path, typer.Option(help="evaluation cache")] = DEFAULT_CACHE,
    params: ParamsOption = DEFAULT_PARAMS,
) -> None:
    """Stage 2: single-turn GRPO on the split's training tasks."""
    from maxcode.kernelcompare.grpo import run_grpo

    raw, kc = _params(params)
    train = _tasks(tasks, split_file, "train")
    metrics = run_grpo(
        train,
        _evaluator(train, raw, cache_dir),
        kc.require_model(),
        kc.grpo_config(),
        out,
        init_adapter,
    )
    typer.echo(f"grpo: {metrics['steps']} steps, rewards {metrics['rewards']}")


@app.command()
def heldout(
    stage: Annotated[str, typer.Option(help="row name, e.g. base, +SFT, +GRPO")],
    tasks: Annotated[Path, typer.Option(help="tasks.jsonl")],
    split_file: Annotated[Path, typer.Option("--split", help="split JSON from `split`")],
    out: Annotated[Path, typer.Option(help="results JSONL (resumable)")],
    adapter: Annotated[
        Path | None, typer.Option(help="adapter of this stage; none for base")
    ] = None,
    cache_dir: Annotated[Path, typer.Option(help="evaluation cache")] = DEFAULT_CACHE,
    params: ParamsOption = DEFAULT_PARAMS,
) -> None:
    """Evaluate one stage on the held-out tasks (one greedy completion each)."""
    from maxcode.kernelcompare.heldout import evaluate_stage
    from maxcode.kernelcompare.models import load_model_and_tokenizer

    raw, kc = _params(params)
    test = _tasks(tasks, split_file, "test")
    spec = kc.require_model()
    if adapter is not None:
        from peft import PeftModel
        from transformers import AutoTokenizer

        saved = AutoTokenizer.from_pretrained(str(adapter))
        model, tokenizer = load_model_and_tokenizer(spec, [], tokenizer=saved)
        model = PeftModel.from_pretrained(model, str(adapter))
    else:
        from maxcode.kernelcompare.grpo import single_turn_prompt

        corpus = [m["content"] for t in test for m in single_turn_prompt(t)]
        model, tokenizer = load_model_and_tokenizer(spec, corpus)
    label = spec.name_or_path or "config-built"
    records = evaluate_stage(
        stage,
        label,
        model,
        tokenizer,
        test,
        _evaluator(test, raw, cache_dir),
        out,
        kc.heldout.max_new_tokens,
    )
    typer.echo(f"{stage}: {len(records)} held-out tasks evaluated")


@app.command()
def table(
    stage: Annotated[list[str], typer.Option(help="STAGE=results.jsonl, in row order")],
    out: Annotated[Path, typer.Option(help="output prefix; writes .md, .csv and .tex")],
    params: Annotated[
        Path | None,
        typer.Option(help="parameter file: adds the header block and the report's numbers"),
    ] = None,
) -> None:
    """The report's table (correctness, speedups) from measured held-out results."""
    from maxcode.kernelcompare.table import load_rows, to_markdown, write_tables
    from maxcode.report.reference import kernelcompare_context

    files = {}
    for item in stage:
        name, sep, path = item.partition("=")
        if not sep:
            raise typer.BadParameter(f"--stage {item!r}: write it as NAME=path/to/results.jsonl")
        files[name] = Path(path)
    rows = load_rows(files)
    notes, extra, csv_extra = (
        kernelcompare_context(_params(params)[0], list(files)) if params else ([], {}, {})
    )
    write_tables(rows, out, notes, extra, csv_extra)
    typer.echo(to_markdown(rows, notes, extra))
