"""Load and validate params.yaml: one source for Snakemake, DVC and the CLI.

A wrong key or value stops the run before any work, with a message that names the
key path and the allowed values.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import jsonschema
import yaml

from maxcode.errors import ConfigError
from maxcode.search.config import MethodConfig, method_from_params

SCHEMA_PATH = Path(__file__).resolve().parents[2] / "workflow" / "schemas" / "params.schema.yaml"


@cache
def _schema() -> dict:
    if not SCHEMA_PATH.is_file():
        raise ConfigError(
            f"{SCHEMA_PATH}: schema not found; install maxcode from a checkout with `pip install -e .`"
        )
    return yaml.safe_load(SCHEMA_PATH.read_text())


def load_params(path: Path | str = "params.yaml") -> dict:
    path = Path(path)
    if not path.is_file():
        raise ConfigError(
            f"{path}: parameter file not found (run from the project root or pass --params)"
        )
    try:
        params = yaml.safe_load(path.read_text())
    except yaml.YAMLError as err:
        raise ConfigError(f"{path}: not valid YAML: {err}") from err
    validate_params(params, source=str(path))
    return params


def validate_params(params: object, source: str = "params.yaml") -> None:
    """Schema check plus cross-field rules; raises ConfigError naming the key."""
    validator = jsonschema.Draft202012Validator(_schema())
    errors = sorted(
        validator.iter_errors(params),
        key=lambda e: (len(e.absolute_path), list(map(str, e.absolute_path))),
    )
    if errors:
        raise ConfigError(f"{source}: " + "; ".join(_describe(e) for e in errors[:5]))
    assert isinstance(params, dict)
    from maxcode.errors import LLMConfigError
    from maxcode.llm.config import llm_config_from_dict

    try:
        llm_config_from_dict(params["llm"])
    except LLMConfigError as err:
        raise ConfigError(f"{source}: {err}") from err
    from maxcode.r2g.config import ConfigError as R2GConfigError

    try:
        r2g_configs(params["r2g"])
    except R2GConfigError as err:
        raise ConfigError(f"{source}: {err}") from err
    if "kernelcompare" in params:
        from maxcode.kernelcompare.params import load_kernelcompare_params

        kc = load_kernelcompare_params(params)
        if kc.sources.suite not in params["suites"]:
            raise ConfigError(
                f"{source}: kernelcompare.sources.suite: {kc.sources.suite!r} is not under `suites:`"
            )
    if "cuda" in params["evaluation"]:
        from maxcode.evaluate.cuda.config import CudaEvalConfig

        try:
            CudaEvalConfig.from_dict(params["evaluation"]["cuda"], "evaluation.cuda")
        except (TypeError, ValueError) as err:
            raise ConfigError(f"{source}: {err}") from err
    if params["tables"].get("reference"):
        from maxcode.report.reference import check_suite_benchmarks, load_reference

        try:
            check_suite_benchmarks(load_reference(params["tables"]["reference"]), params["suites"])
        except ConfigError as err:
            raise ConfigError(f"{source}: {err}") from err
    methods = resolve_methods(params)
    for group in ("main", "ablation", "rerank"):
        for name in params["tables"].get(group, []):
            if name not in methods:
                raise ConfigError(
                    f"{source}: tables.{group}: method {name!r} is not defined under methods "
                    f"(defined: {sorted(methods)})"
                )
    for name in params["r2g"]["train_methods"]:
        if name not in methods:
            raise ConfigError(f"{source}: r2g.train_methods: {name!r} is not defined under methods")
        if methods[name].rerank == "model":
            raise ConfigError(
                f"{source}: r2g.train_methods: {name!r} itself needs the reward-to-go model; "
                "train on methods with rerank none or random"
            )


def resolve_methods(params: dict) -> dict[str, MethodConfig]:
    return {
        name: method_from_params(name, params["search"], override or {})
        for name, override in params["methods"].items()
    }


def _describe(error: jsonschema.ValidationError) -> str:
    key = ".".join(str(p) for p in error.absolute_path) or "(top level)"
    if error.validator == "enum":
        return f"{key}: {error.instance!r} is not allowed; choose one of {error.validator_value}"
    if error.validator == "additionalProperties":
        allowed = sorted(error.schema.get("properties", {}))
        return f"{key}: {error.message}; allowed keys: {allowed}"
    if error.validator == "required":
        return f"{key}: {error.message}"
    return f"{key}: {error.message}"


def r2g_configs(r2g: dict) -> tuple:
    """(dataset config, model config) from the ``r2g:`` block, loaded strictly."""
    from maxcode.r2g.config import (
        EncoderR2GConfig,
        GenerativeR2GConfig,
        R2GDatasetConfig,
        load_config,
    )

    kind_cls = {"encoder": EncoderR2GConfig, "generative": GenerativeR2GConfig}[r2g["kind"]]
    return (
        load_config(R2GDatasetConfig, r2g.get("dataset"), "r2g.dataset"),
        load_config(kind_cls, r2g.get(r2g["kind"]), f"r2g.{r2g['kind']}"),
    )
