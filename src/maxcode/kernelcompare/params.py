"""The ``kernelcompare:`` block of params.yaml, loaded strictly into one dataclass per stage."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from maxcode.errors import ConfigError
from maxcode.kernelcompare.config import ExtractConfig, SplitConfig
from maxcode.kernelcompare.harness import HarnessConfig
from maxcode.kernelcompare.models import ModelSpec
from maxcode.loader import load, reject_unknown

SECTIONS = ("sources", "extract", "harness", "split", "model", "sft", "grpo", "heldout")


@dataclass(frozen=True)
class SourcesConfig:
    """Where the pipeline's KernelCompare stages read from."""

    parboil: str | None = field(
        default=None, metadata={"help": "Parboil checkout (benchmarks/<b>/src/cuda_base, src/cuda)"}
    )
    rodinia: str | None = field(default=None, metadata={"help": "Rodinia checkout (cuda/<b>/*.cu)"})
    suite: str = field(
        default="cpp_builtin",
        metadata={
            "help": "suite (under `suites:`) whose tasks GRPO trains on and the table reports"
        },
    )

    def __post_init__(self) -> None:
        if not (self.parboil or self.rodinia):
            raise ConfigError("kernelcompare.sources: give parboil, rodinia or both")


@dataclass(frozen=True)
class HeldoutConfig:
    max_new_tokens: int = field(
        default=4096, metadata={"help": "generation limit per held-out task (the report's 4096)"}
    )

    def __post_init__(self) -> None:
        if self.max_new_tokens < 1:
            raise ConfigError("kernelcompare.heldout.max_new_tokens: must be >= 1")


@dataclass
class KernelCompareParams:
    """Raw trainer sections stay mappings until needed, so extraction never imports TRL."""

    sources: SourcesConfig | None  # only the pipeline's stages need it
    extract: ExtractConfig
    harness: HarnessConfig
    split: SplitConfig
    model: ModelSpec | None
    heldout: HeldoutConfig
    sft: dict[str, Any]
    grpo: dict[str, Any]

    def sft_config(self, **overrides: Any):
        from maxcode.kernelcompare.sft import KernelCompareSFTConfig

        return load(KernelCompareSFTConfig, {**self.sft, **overrides}, "kernelcompare.sft")

    def grpo_config(self, **overrides: Any):
        from maxcode.kernelcompare.grpo import KernelCompareGRPOConfig

        return load(KernelCompareGRPOConfig, {**self.grpo, **overrides}, "kernelcompare.grpo")

    def require_model(self) -> ModelSpec:
        if self.model is None:
            raise ConfigError(
                "kernelcompare.model: not set; give name_or_path (a local checkpoint) or "
                "from_config (Qwen2Config kwargs)"
            )
        return self.model


def load_kernelcompare_params(params: dict | None) -> KernelCompareParams:
    block = dict((params or {}).get("kernelcompare") or {})
    reject_unknown(block, list(SECTIONS), "kernelcompare", extra=[])
    model = block.get("model")
    return KernelCompareParams(
        sources=(
            load(SourcesConfig, block["sources"], "kernelcompare.sources")
            if block.get("sources")
            else None
        ),
        extract=load(ExtractConfig, block.get("extract"), "kernelcompare.extract"),
        harness=load(HarnessConfig, block.get("harness"), "kernelcompare.harness"),
        split=load(SplitConfig, block.get("split"), "kernelcompare.split"),
        model=load(ModelSpec, model, "kernelcompare.model") if model else None,
        heldout=load(HeldoutConfig, block.get("heldout"), "kernelcompare.heldout"),
        sft=dict(block.get("sft") or {}),
        grpo=dict(block.get("grpo") or {}),
    )
