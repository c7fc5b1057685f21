"""The `maxcode` command line: pipeline stages by hand, evaluators, and checks."""

from __future__ import annotations

import json
import sys
import traceback
from pathlib import Path
from typing import Annotated

import typer

from maxcode.errors import ConfigError, LLMError, TaskFormatError, UserError
from maxcode.optimize.confirm import DEFAULT_MIN_SPEEDUP
from maxcode.params import SCHEMA_PATH, Params, load_params, read_params_file, write_schema
from maxcode.pipeline import (
    CACHE_DIR,
    SUITE_DIR,
    PipelinePlan,
    build_suite,
    rollout_files,
    run_rollout,
)

# Mistakes a user can fix in `optimize`: one line, exit code 2 unless --debug (UserError
# covers ConfigError, TaskFormatError and RunMismatch; TargetError is a ValueError).
USER_ERRORS = (UserError, ValueError, LLMError, OSError)

app = typer.Typer(
    help="maxcode: max-reward inference-time search for code optimization (MaxCode, KernelCompare).",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)

ParamsOpt = Annotated[
    Path, typer.Option("--params", help="parameter file (Snakemake config and DVC params)")
]


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            typer.echo(f"maxcode {version('maxcode')}")
        except PackageNotFoundError:
            typer.echo("maxcode (not installed; running from a source tree)")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="print the version"),
    ] = False,
) -> None:
    """maxcode: max-reward inference-time search for code optimization (MaxCode, KernelCompare)."""


def _fail(err: Exception) -> None:
    typer.secho(f"error: {err}", fg=typer.colors.RED, err=True)
    raise typer.Exit(2)


@app.command("check-params")
def check_params(params: ParamsOpt = Path("params.yaml")) -> None:
    """Validate params.yaml (every block, strictly) and list the jobs it implies."""
    try:
        plan = PipelinePlan.from_params(load_params(params))
    except (ConfigError, TaskFormatError) as err:
        _fail(err)
    typer.echo(f"{params}: valid")
    for suite, ids in plan.tasks.items():
        typer.echo(
            f"suite {suite}: {len(ids)} tasks ({len(plan.held_out[suite])} held out for reranking)"
        )
    typer.echo(f"methods: {', '.join(plan.table_methods())}; seeds {plan.seeds}")
    typer.echo(f"rollout jobs: {len(plan.all_rollouts())}")


@app.command("schema")
def schema_cmd(
    out: Annotated[Path, typer.Option(help="where to write it")] = SCHEMA_PATH,
) -> None:
    """Write the JSON schema of params.yaml, generated from the params dataclasses."""
    write_schema(out)
    typer.echo(f"schema -> {out}")


@app.command("build-suite")
def build_suite_cmd(
    suite: Annotated[
        str, typer.Argument(metavar="SUITE", help="suite name under `suites:` in params")
    ],
    out: Annotated[
        Path | None, typer.Option(help="output folder (default: the pipeline's, data/suites/SUITE)")
    ] = None,
    params: ParamsOpt = Path("params.yaml"),
) -> None:
    """Build one suite's tasks.jsonl and PIE-layout tests."""
    try:
        suites = load_params(params).suites
        if suite not in suites:
            raise ConfigError(f"{params}: no suite {suite!r} under `suites:`")
    except ConfigError as err:
        _fail(err)
    cfg = suites[suite]
    out = out or Path(SUITE_DIR.format(suite=suite))
    tasks = build_suite(suite, cfg, out)
    typer.echo(f"{len(tasks)} tasks -> {out}")


@app.command("rollout")
def rollout_cmd(
    suite: Annotated[str, typer.Argument(metavar="SUITE", help="suite name")],
    task: Annotated[str, typer.Argument(metavar="TASK", help="task id")],
    method: Annotated[str, typer.Argument(metavar="METHOD", help="method name under `methods:`")],
    seed: Annotated[int, typer.Option(help="search seed")] = 0,
    out: Annotated[
        Path | None, typer.Option(help="rollout JSONL (default: the pipeline's path)")
    ] = None,
    model: Annotated[
        Path | None, typer.Option(help="reward-to-go model folder (rerank: model)")
    ] = None,
    params: ParamsOpt = Path("params.yaml"),
) -> None:
    """Run (or resume) one task x method x seed search, exactly as the pipeline does."""
    try:
        raw = read_params_file(params)
        plan = PipelinePlan.from_params(Params.from_dict(raw, source=str(params)))
        if method not in plan.methods:
            raise ConfigError(f"unknown method {method!r}; defined: {sorted(plan.methods)}")
    except (ConfigError, TaskFormatError) as err:
        _fail(err)
    out, inflight = rollout_files(plan.stage_of(method), suite, method, task, seed, out)
    end = run_rollout(
        suite_dir=Path(SUITE_DIR.format(suite=suite)),
        task_id=task,
        method=plan.methods[method].to_dict(),
        seed=seed,
        llm=raw["llm"],
        evaluation=raw["evaluation"],
        inflight=inflight,
        output=out,
        cache_dir=Path(CACHE_DIR),
        model_dir=model,
        params=raw,
    )
    typer.echo(
        json.dumps(
            {k: end[k] for k in ("best_reward", "evaluations", "stopped_by", "step_rewards")}
        )
    )


@app.command("optimize")
def optimize_cmd(
    target: Annotated[
        Path,
        typer.Argument(metavar="TARGET", help="C++ source file, or a KernelBench-format .py file"),
    ],
    tests: Annotated[
        Path | None,
        typer.Option(metavar="DIR", help="C++: folder of input.<i>.txt / output.<i>.txt"),
    ] = None,
    make_tests: Annotated[
        int | None,
        typer.Option(
            metavar="N",
            help="C++: make the expected outputs of the first N inputs in --tests by running "
            "your program (named in the terminal and the report)",
        ),
    ] = None,
    out: Annotated[Path, typer.Option(metavar="DIR", help="output folder")] = Path("maxcode-out"),
    resume: Annotated[
        bool,
        typer.Option(
            help="continue the run in --out (same target, tests and settings; --depth and "
            "budgets may grow)"
        ),
    ] = False,
    kind: Annotated[
        str | None,
        typer.Option("--kind", metavar="KIND", help="cpp | cuda (default: from the suffix)"),
    ] = None,
    method: Annotated[
        str,
        typer.Option(
            "--method",
            metavar="METHOD",
            help="maxcode, or a method under `methods:` in --params (cuda-llm, effi-learner, "
            "best-of-n, ...)",
        ),
    ] = "maxcode",
    params: Annotated[
        Path | None,
        typer.Option(
            metavar="FILE",
            help="parameter file whose methods and evaluation settings are used "
            "(default: maxcode's presets/offline.yaml)",
        ),
    ] = None,
    llm: Annotated[
        str | None,
        typer.Option(
            metavar="BACKEND:MODEL", help="e.g. openai:gpt-4o (default: offline policy and critic)"
        ),
    ] = None,
    base_url: Annotated[
        str | None,
        typer.Option(
            metavar="URL",
            help="OpenAI-compatible server (vLLM, SGLang); on localhost no key is needed",
        ),
    ] = None,
    max_tokens: Annotated[
        int | None,
        typer.Option(metavar="N", help="completion tokens per LLM call (the worst case budgeted)"),
    ] = None,
    depth: Annotated[
        int | None, typer.Option(metavar="N", help="search steps (default: the method's)")
    ] = None,
    k: Annotated[
        int | None,
        typer.Option(metavar="N", help="candidates proposed per step (default: the method's)"),
    ] = None,
    budget_evals: Annotated[
        int | None, typer.Option(metavar="N", help="stop before more than N evaluations")
    ] = None,
    budget_usd: Annotated[
        float | None,
        typer.Option(
            metavar="USD",
            help="stop before LLM spending could cross USD (each call budgeted at its worst case)",
        ),
    ] = None,
    price_in: Annotated[
        float | None, typer.Option(metavar="USD", help="--llm model: USD per 1M input tokens")
    ] = None,
    price_out: Annotated[
        float | None, typer.Option(metavar="USD", help="--llm model: USD per 1M output tokens")
    ] = None,
    prices: Annotated[
        Path | None,
        typer.Option(
            metavar="FILE",
            help='JSON prices: {"BACKEND:MODEL": {"input": USD, "output": USD, "cached_input": USD}}',
        ),
    ] = None,
    timing: Annotated[
        str | None,
        typer.Option(
            metavar="MODE",
            help="C++: instructions (default: repeatable) | cachegrind | wall (noisy)",
        ),
    ] = None,
    cxxflags: Annotated[
        str | None,
        typer.Option(
            metavar="FLAGS",
            help="C++: compile flags for the original and every candidate (default: what PIE "
            "uses, '--std=c++17 -O3', or the params' evaluation.cpp.flags)",
        ),
    ] = None,
    confirm: Annotated[
        Path | None,
        typer.Option(
            metavar="DIR",
            help="C++: larger inputs on which the original and the best are timed by wall "
            "clock after the search (default: the largest test scaled up where its format "
            "allows)",
        ),
    ] = None,
    min_speedup: Annotated[
        float,
        typer.Option(
            metavar="X",
            help="C++: write best.cpp only when the confirmed speedup is above X over the "
            "whole measured range",
        ),
    ] = DEFAULT_MIN_SPEEDUP,
    r2g_model: Annotated[
        Path | None,
        typer.Option(metavar="DIR", help="reward-to-go model folder: rerank before executing"),
    ] = None,
    seed: Annotated[int, typer.Option(metavar="N", help="search seed")] = 0,
    debug: Annotated[bool, typer.Option(help="show the traceback of an error")] = False,
) -> None:
    """Optimize your own program or kernel with the same search, and write a report."""
    for stream in (sys.stdout, sys.stderr):
        stream.reconfigure(line_buffering=True)  # piped output arrives line by line
    from maxcode.optimize.run import OptimizeOptions, optimize

    opts = OptimizeOptions(
        target=target,
        out=out,
        kind=kind,
        method=method,
        params=params,
        llm=llm,
        base_url=base_url,
        max_tokens=max_tokens,
        depth=depth,
        k=k,
        budget_evals=budget_evals,
        budget_usd=budget_usd,
        price_in=price_in,
        price_out=price_out,
        prices=prices,
        tests=tests,
        make_tests=make_tests,
        r2g_model=r2g_model,
        resume=resume,
        seed=seed,
        timing=timing,
        cxxflags=cxxflags,
        confirm=confirm,
        min_speedup=min_speedup,
    )
    try:
        result = optimize(opts)
    except KeyboardInterrupt:
        if (out / "report.html").exists():
            said = (
                f"finished steps are kept in {out / 'run.jsonl'} and shown in "
                f"{out / 'report.html'} (partial); resume with --resume (and the same arguments)"
            )
        else:
            said = "before the search began, so nothing was recorded; run the command again"
        typer.secho(f"interrupted: {said}", fg=typer.colors.YELLOW, err=True)
        raise typer.Exit(130) from None
    except USER_ERRORS as err:
        if debug:
            traceback.print_exc()
        _fail(err)
    typer.echo(result["summary"])
    typer.echo(f"report: {out / 'report.html'}; records: {out / 'run.jsonl'}")


def _mount_subcommands() -> None:
    """Each area keeps its own commands; `maxcode eval` holds both evaluators and `eval runs`."""
    from maxcode.evaluate import cli as eval_cli
    from maxcode.evaluate.cuda_cli import cuda as eval_cuda
    from maxcode.llm.cli import app as llm_app
    from maxcode.runs.cli import app as runs_app
    from maxcode.runs.cli import eval_runs
    from maxcode.stages.kernelcompare_cli import app as kernelcompare_app
    from maxcode.stages.r2g_cli import app as r2g_app

    eval_cli.app.command("cuda")(eval_cuda)
    eval_cli.app.command("runs")(eval_runs)
    app.add_typer(
        eval_cli.app, name="eval", help="Evaluate one candidate (C++ or CUDA) and print JSON."
    )
    app.add_typer(
        kernelcompare_app, name="kernelcompare", help="KernelCompare: extract pairs, SFT, GRPO."
    )
    app.add_typer(llm_app, name="llm", help="LLM backends: fake servers, cache inspection.")
    app.add_typer(r2g_app, name="r2g", help="Reward-to-go model: dataset, training, ranking.")
    app.add_typer(runs_app, name="runs", help="Public KernelBench runs: import them as a corpus.")


_mount_subcommands()


def main() -> None:
    """The console entry point: bad input (a file, flag or key) is one line and exit code 2."""
    try:
        app(prog_name="maxcode")  # also the name under `python -m maxcode`
    except UserError as err:
        typer.secho(f"error: {err}", fg=typer.colors.RED, err=True)
        raise SystemExit(2) from None
