"""Byte-level BPE tokenizers for the config-built models that tests and the offline runs train.

No model hub is reachable where the project is built, so the tiny models of the reward-to-go
and KernelCompare stages get a tokenizer trained on their own corpus: byte-level, so any
source text encodes and decodes exactly.
"""

from __future__ import annotations

from collections.abc import Iterable


def train_byte_bpe(texts: Iterable[str], vocab_size: int, special_tokens: list[str], **roles: str):
    """A transformers fast tokenizer; ``roles`` name special tokens (pad_token="<|pad|>", ...)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=special_tokens,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(list(texts), trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, **roles)
