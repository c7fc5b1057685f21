"""A tiny causal LM and tokenizer built from a config (no download), plus a LoRA adapter.

Reusable by any test that needs a local model (hf backend, reward-to-go training).
"""

from __future__ import annotations

from pathlib import Path

CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}</s>{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
_CORPUS = [
    "int main() { std::ios::sync_with_stdio(false); return 0; }",
    "```cpp\n#include <iostream>\nint main() { int a; std::cin >> a; }\n```",
    "class ModelNew(torch.nn.Module): def forward(self, x): return x",
    "Diagnosis: memory bandwidth bound. Suggestion: fuse the kernels.",
]


def build_tiny_lm(out_dir: Path, seed: int = 0) -> Path:
    """A 2-layer Qwen2 with a byte-level BPE tokenizer trained on a few strings."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    out_dir = Path(out_dir)
    specials = ["<pad>", "</s>", "<|system|>", "<|user|>", "<|assistant|>"]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(_CORPUS, trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="</s>", pad_token="<pad>", chat_template=CHAT_TEMPLATE
    )
    torch.manual_seed(seed)
    config = Qwen2Config(
        vocab_size=len(fast),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=2048,
        eos_token_id=fast.eos_token_id,
        pad_token_id=fast.pad_token_id,
        tie_word_embeddings=True,
    )
    model = Qwen2ForCausalLM(config)
    model.save_pretrained(out_dir)
    fast.save_pretrained(out_dir)
    return out_dir


def build_lora_adapter(model_dir: Path, out_dir: Path, seed: int = 1) -> Path:
    """A LoRA adapter with non-zero B matrices, so loading it changes the outputs."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(model_dir)
    peft_model = get_peft_model(
        base, LoraConfig(r=4, lora_alpha=16, target_modules=["q_proj", "v_proj"])
    )
    torch.manual_seed(seed)
    with torch.no_grad():
        for name, param in peft_model.named_parameters():
            if "lora_B" in name:
                param.normal_(0.0, 0.5)
    peft_model.save_pretrained(out_dir)
    return Path(out_dir)
