"""A local transformers causal LM (optionally with a peft LoRA adapter), batched
generation of all samples of a request in one ``generate`` call, on GPU when present.

This is how the LoRA-tuned reward-to-go model (the paper's Qwen2.5-7B-Instruct) or a
local generator serves a role without any server.
"""

from __future__ import annotations

import threading
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from maxcode.errors import LLMConfigError
from maxcode.llm.backend import ChatBackend, Completion, SamplingParams
from maxcode.llm.config import RoleConfig


class HFBackend(ChatBackend):
    name = "hf"
    batched = True

    def __init__(self, cfg: RoleConfig):
        super().__init__(cfg)
        if cfg.device == "cuda" and not torch.cuda.is_available():
            raise LLMConfigError(
                f"llm.{cfg.role}.device: 'cuda' requested but no GPU is visible; use auto or cpu"
            )
        self.device = torch.device(
            "cuda" if cfg.device != "cpu" and torch.cuda.is_available() else "cpu"
        )
        dtype = torch.bfloat16 if self.device.type == "cuda" else torch.float32
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(cfg.model)
            model = AutoModelForCausalLM.from_pretrained(cfg.model, dtype=dtype)
        except (OSError, ValueError) as err:
            raise LLMConfigError(
                f"llm.{cfg.role}.model: cannot load {cfg.model!r} ({str(err).splitlines()[0]}); "
                "give a local model directory (config, weights, tokenizer)"
            ) from None
        if cfg.adapter is not None:
            from peft import PeftModel

            if not (Path(cfg.adapter) / "adapter_config.json").is_file():
                raise LLMConfigError(
                    f"llm.{cfg.role}.adapter: {cfg.adapter} has no adapter_config.json; "
                    "point it at a directory written by peft's save_pretrained"
                )
            model = PeftModel.from_pretrained(model, cfg.adapter)
        self.model = model.to(self.device).eval()
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self._lock = threading.Lock()  # one generate at a time: global RNG, one model

    @property
    def endpoint(self) -> str:
        return f"hf:{self.cfg.model}+{self.cfg.adapter}:{id(self)}"

    def prompt_text(self, messages: list[dict]) -> str:
        if self.tokenizer.chat_template:
            return self.tokenizer.apply_chat_template(
                messages, add_generation_prompt=True, tokenize=False
            )
        return "".join(f"{m['role']}: {m['content']}\n" for m in messages) + "assistant: "

    def generate(
        self, messages: list[dict], params: SamplingParams, sample_indices: list[int]
    ) -> list[Completion]:
        n = len(sample_indices)
        enc = self.tokenizer([self.prompt_text(messages)] * n, return_tensors="pt").to(self.device)
        prompt_len = enc["input_ids"].shape[1]
        sample = params.temperature > 0
        kwargs: dict = {"max_new_tokens": params.max_tokens, "do_sample": sample}
        if sample:
            kwargs.update(temperature=params.temperature, top_p=params.top_p)
        with self._lock, torch.inference_mode():
            torch.manual_seed(params.seed * 1_000_003 + sample_indices[0])
            out = self.model.generate(
                **enc,
                pad_token_id=self.tokenizer.pad_token_id,
                **kwargs,
            )
        eos = self.tokenizer.eos_token_id
        completions = []
        for row in out[:, prompt_len:].tolist():
            stop = eos is not None and eos in row
            tokens = row[: row.index(eos) + 1] if stop else row
            text = self.tokenizer.decode(tokens, skip_special_tokens=True)
            completions.append(
                Completion(
                    text=text,
                    finish_reason="stop" if stop else "length",
                    input_tokens=prompt_len,
                    output_tokens=len(tokens),
                )
            )
        return completions

    def close(self) -> None:
        del self.model
        if self.device.type == "cuda":
            torch.cuda.empty_cache()
