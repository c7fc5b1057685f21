"""``maxcode eval cuda CANDIDATE.py --task TASK.py``: one JSON object, exit 0 whatever the verdict."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from maxcode.errors import ConfigError
from maxcode.evaluate.cuda import CudaEvalConfig, CudaEvaluator
from maxcode.evaluate.cuda.config import TF32_SETTINGS
from maxcode.tasks.kernelbench import task_from_file

app = typer.Typer(help="Evaluate CUDA candidates (ModelNew) against KernelBench-format tasks.")


@app.command("cuda")
def cuda(
    candidate: Annotated[
        Path,
        typer.Argument(
            exists=True, dir_okay=False, metavar="CANDIDATE", help="candidate .py defining ModelNew"
        ),
    ],
    task: Annotated[
        Path,
        typer.Option(
            "--task",
            exists=True,
            dir_okay=False,
            help="problem .py defining Model, get_inputs, get_init_inputs",
        ),
    ],
    trials: Annotated[
        int, typer.Option("--trials", min=1, help="correctness trials on fresh random inputs")
    ] = 5,
    timing_trials: Annotated[
        int, typer.Option("--timing-trials", min=1, help="timed calls per variant")
    ] = 100,
    cache_dir: Annotated[
        Path | None, typer.Option("--cache-dir", help="build cache (default $MAXCODE_CACHE/cuda)")
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="print the full result as one JSON object")
    ] = False,
    profile: Annotated[
        bool,
        typer.Option("--profile", help="add per-kernel GPU times of candidate and reference"),
    ] = False,
    tf32: Annotated[
        str,
        typer.Option(
            "--tf32",
            help="torch-default (as KernelBench: cuDNN may run FP32 convolutions on TF32 tensor cores) or off (strict FP32 for the reference and the candidate)",
        ),
    ] = "torch-default",
) -> None:
    """Compile, check and time a ModelNew candidate against --task on the local GPU.

    Exit status is non-zero only when the evaluator itself cannot run (bad task file, no GPU).
    """
    if tf32 not in TF32_SETTINGS:
        raise ConfigError(f"--tf32 {tf32!r}: choose one of {', '.join(TF32_SETTINGS)}")
    config = CudaEvalConfig(
        correctness_trials=trials, timing_trials=timing_trials, profile=profile, tf32=tf32
    )
    with CudaEvaluator(config, cache_dir) as evaluator:
        result = evaluator.evaluate(task_from_file(task), candidate.read_text())
    record = summary_record(result.to_dict())
    if as_json:
        typer.echo(json.dumps(record, sort_keys=True))
        return
    line = f"{record['status']}"
    if record["speedup_vs_eager"] is not None:
        line += f"  speedup {record['speedup_vs_eager']:.3f}x eager"
        if record["speedup_vs_compiled"] is not None:
            line += f", {record['speedup_vs_compiled']:.3f}x torch.compile"
    if record["reason"]:
        line += f"  {record['reason']}"
    typer.echo(line)


def summary_record(result: dict) -> dict:
    """EvalResult.to_dict() plus the fields scripts look for first."""
    figures = result.get("figures", {})
    return {
        **result,
        "correct": result["status"] == "ok",
        "correctness_trials": [
            {"index": t["index"], "status": t["status"], "detail": t["reason"]}
            for t in result["tests"]
        ],
        "runtime_ms": figures.get("runtime_ms"),
        "speedup_vs_eager": result.get("speedup"),
        "speedup_vs_compiled": figures.get("speedup_vs_compiled"),
        "failed_check": figures.get("failed_check"),
    }
