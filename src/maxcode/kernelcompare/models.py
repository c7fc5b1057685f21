"""The model being trained: a local checkpoint, or one built from a config (tests, device runs).

No model hub is reachable here, so a config-built model comes with a byte-level BPE
tokenizer trained on the training texts themselves, with a ChatML chat template.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from maxcode.errors import ConfigError

CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{{ message['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|pad|>"]


@dataclass(frozen=True)
class ModelSpec:
    """Exactly one of ``name_or_path`` (a local checkpoint) or ``from_config`` (Qwen2 kwargs)."""

    name_or_path: str | None = field(
        default=None,
        metadata={"help": "local checkpoint directory, e.g. DeepSeek-R1-Distill-Qwen-7B"},
    )
    from_config: dict | None = field(
        default=None,
        metadata={
            "help": "Qwen2Config keyword arguments for a randomly initialised model "
            "(hidden_size, num_hidden_layers, ...); vocab_size is the tokenizer's"
        },
    )
    tokenizer_vocab_size: int = field(
        default=1024, metadata={"help": "BPE vocabulary trained for a config-built model"}
    )
    seed: int = field(default=0, metadata={"help": "weight initialisation seed"})

    def __post_init__(self) -> None:
        if (self.name_or_path is None) == (self.from_config is None):
            raise ConfigError(
                "kernelcompare.model: set exactly one of name_or_path (a checkpoint) or "
                "from_config (Qwen2Config kwargs for a model built from scratch)"
            )
        if self.name_or_path is not None and not Path(self.name_or_path).is_dir():
            raise ConfigError(
                f"kernelcompare.model.name_or_path: {self.name_or_path} is not a directory; "
                "no model hub is used, download the checkpoint first"
            )
        if self.tokenizer_vocab_size < len(SPECIAL_TOKENS) + 256:
            raise ConfigError(
                "kernelcompare.model.tokenizer_vocab_size: must be at least "
                f"{len(SPECIAL_TOKENS) + 256} (bytes plus special tokens)"
            )


def train_tokenizer(texts: Iterable[str], vocab_size: int):
    """Byte-level BPE over the corpus, with the chat template the prompts use."""
    from maxcode.bpe import train_byte_bpe

    fast = train_byte_bpe(
        texts,
        vocab_size,
        SPECIAL_TOKENS,
        eos_token="<|im_end|>",
        bos_token="<|endoftext|>",
        pad_token="<|pad|>",
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast


def load_model_and_tokenizer(spec: ModelSpec, corpus: Iterable[str], tokenizer=None):
    """(model, tokenizer) for training.

    ``corpus`` trains the tokenizer of a config-built model unless ``tokenizer`` (saved
    by an earlier stage) is given; weights are initialised from ``spec.seed``, so a later
    stage rebuilds the same base model under its saved adapter.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, Qwen2Config

    if spec.name_or_path is not None:
        tokenizer = tokenizer or AutoTokenizer.from_pretrained(spec.name_or_path)
        model = AutoModelForCausalLM.from_pretrained(spec.name_or_path, dtype="auto")
        return model, tokenizer
    if tokenizer is None:
        tokenizer = train_tokenizer(corpus, spec.tokenizer_vocab_size)
    kwargs = {**spec.from_config, "vocab_size": len(tokenizer)}
    kwargs.setdefault("pad_token_id", tokenizer.pad_token_id)
    kwargs.setdefault("eos_token_id", tokenizer.eos_token_id)
    kwargs.setdefault("bos_token_id", tokenizer.bos_token_id)
    try:
        config = Qwen2Config(**kwargs)
    except TypeError as err:
        raise ConfigError(f"kernelcompare.model.from_config: {err}") from err
    torch.manual_seed(spec.seed)
    model = AutoModelForCausalLM.from_config(config)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    return model, tokenizer
