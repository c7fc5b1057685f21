"""Stage 1: supervised fine-tuning on KernelCompare pairs (LoRA, TRL's SFTTrainer).

Each pair is a conversational prompt (system + user with the slow kernel) and
completion (assistant with the fast kernel); the loss covers the completion only.
"""

from __future__ import annotations

import json
import resource
import time
from dataclasses import dataclass, field
from pathlib import Path

from trl import SFTConfig

from maxcode.errors import ConfigError
from maxcode.kernelcompare.models import ModelSpec, load_model_and_tokenizer
from maxcode.kernelcompare.records import read_dataset
from maxcode.records import atomic_write_json, code_version, hardware_fingerprint

LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


@dataclass
class LoraFields:
    """LoRA adapter settings shared by both stages (the report's values)."""

    lora_r: int = field(default=32, metadata={"help": "LoRA rank"})
    lora_alpha: int = field(default=64, metadata={"help": "LoRA scaling alpha"})
    lora_dropout: float = field(default=0.1, metadata={"help": "dropout on the LoRA path"})
    lora_target_modules: list[str] = field(
        default_factory=lambda: list(LORA_TARGETS),
        metadata={"help": "projections that get adapters: attention q,k,v,o and MLP gate,up,down"},
    )

    def check_lora(self, where: str) -> None:
        if self.lora_r < 1 or self.lora_alpha < 1 or not 0.0 <= self.lora_dropout < 1.0:
            raise ConfigError(
                f"{where}: lora_r and lora_alpha must be >= 1 and lora_dropout in [0, 1); got "
                f"r={self.lora_r}, alpha={self.lora_alpha}, dropout={self.lora_dropout}"
            )
        if not self.lora_target_modules:
            raise ConfigError(f"{where}.lora_target_modules: name at least one projection")

    def lora_config(self):
        from peft import LoraConfig

        return LoraConfig(
            r=self.lora_r,
            lora_alpha=self.lora_alpha,
            lora_dropout=self.lora_dropout,
            target_modules=list(self.lora_target_modules),
            task_type="CAUSAL_LM",
        )


@dataclass
class KernelCompareSFTConfig(LoraFields, SFTConfig):
    """TRL's SFTConfig with the report's recipe as defaults (only changed fields listed)."""

    learning_rate: float = field(default=2e-4, metadata={"help": "AdamW learning rate"})
    per_device_train_batch_size: int = field(default=4, metadata={"help": "pairs per step"})
    max_length: int | None = field(default=4096, metadata={"help": "tokens per sequence"})
    num_train_epochs: float = field(default=8.0, metadata={"help": "passes over the pairs"})
    warmup_steps: float = field(default=100, metadata={"help": "linear warm-up steps"})
    optim: str = field(default="adamw_torch", metadata={"help": "optimizer (AdamW)"})
    completion_only_loss: bool | None = field(
        default=True, metadata={"help": "loss on the fast kernel only, not on the prompt"}
    )
    logging_steps: float = field(default=1, metadata={"help": "log the loss every n steps"})
    save_strategy: str = field(
        default="no", metadata={"help": "the stage saves the adapter itself"}
    )
    activation_checkpointing: bool | None = field(
        default=False, metadata={"help": "trade compute for memory on long sequences"}
    )
    gradient_checkpointing: bool | None = field(
        default=None, metadata={"help": "deprecated alias of activation_checkpointing"}
    )

    def __post_init__(self) -> None:
        self.check_lora("kernelcompare.sft")
        super().__post_init__()


def pairs_to_dataset(records: list[dict]):
    """Chat records -> conversational prompt/completion rows for SFTTrainer."""
    from datasets import Dataset

    rows = [{"prompt": r["messages"][:2], "completion": r["messages"][2:]} for r in records]
    if not rows:
        raise ValueError("no KernelCompare pairs to train on; check the extract stage's card")
    return Dataset.from_list(rows)


def corpus_of(records: list[dict]) -> list[str]:
    return [m["content"] for r in records for m in r["messages"]]


def run_sft(
    pairs_path: Path, model_spec: ModelSpec, config: KernelCompareSFTConfig, out_dir: Path
) -> dict:
    """Train the LoRA adapter; write it and ``metrics.json`` (measured throughput, memory)."""
    import torch
    from trl import SFTTrainer

    records = read_dataset(pairs_path)
    model, tokenizer = load_model_and_tokenizer(model_spec, corpus_of(records))
    dataset = pairs_to_dataset(records)
    config.output_dir = str(out_dir)
    trainer = SFTTrainer(
        model=model,
        args=config,
        train_dataset=dataset,
        processing_class=tokenizer,
        peft_config=config.lora_config(),
    )
    if len(trainer.train_dataset) == 0:
        raise ValueError(
            f"{pairs_path}: every pair lost its whole completion to max_length={config.max_length} "
            "truncation; raise kernelcompare.sft.max_length"
        )
    tokens = sum(len(x) for x in trainer.train_dataset["input_ids"]) * config.num_train_epochs
    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    trainer.train()
    seconds = time.perf_counter() - start
    losses = [e["loss"] for e in trainer.state.log_history if "loss" in e]
    trainer.save_model(str(out_dir))
    tokenizer.save_pretrained(str(out_dir))
    trainable, total = trainer.model.get_nb_trainable_parameters()
    metrics = {
        "stage": "sft",
        "pairs": len(records),
        "steps": trainer.state.global_step,
        "train_seconds": seconds,
        "tokens_per_second": tokens / seconds if seconds > 0 else None,
        "first_loss": losses[0] if losses else None,
        "last_loss": losses[-1] if losses else None,
        "losses": losses,
        "trainable_parameters": trainable,
        "total_parameters": total,
        "peak_memory_bytes": torch.cuda.max_memory_allocated()
        if torch.cuda.is_available()
        else None,
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "device": "cuda" if torch.cuda.is_available() else "cpu",
        "hardware": hardware_fingerprint(),
        "code_version": code_version(),
        "config": json.loads(config.to_json_string()),
    }
    atomic_write_json(Path(out_dir) / "metrics.json", metrics)
    return metrics
