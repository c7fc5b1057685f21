"""Generative reward-to-go model: a causal LM (LoRA or full fine-tuning) that writes the return.

The paper fine-tunes Qwen2.5-7B-Instruct with LoRA; offline, the same code trains a
Qwen2-architecture model built from a config, with a byte-level BPE trained on the
train prompts (no download). Training is completion-only: the loss covers the value
tokens, not the prompt. ``transformers.Trainer`` supplies checkpointing and resume.
"""

from __future__ import annotations

import math
import os
import re
import shutil
import statistics
import time
from pathlib import Path

import torch
from transformers import TrainerCallback

from maxcode.r2g.base import MANIFEST, Candidate, R2GReranker
from maxcode.r2g.config import GenerativeR2GConfig, config_to_dict, load_config
from maxcode.r2g.dataset import DatasetParams, R2GDataset
from maxcode.r2g.prompt import build_prompt, format_target
from maxcode.records import atomic_write_json
from maxcode.search.types import Score

_NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?")
PAD, EOS = "<|pad|>", "<|eos|>"


def parse_value(text: str) -> float | None:
    """The first number in generated text; None when there is none or it is not a valid return."""
    match = _NUMBER.search(text)
    if match is None:
        return None
    value = float(match.group())
    if not math.isfinite(value) or value < 0.0:
        return None
    return value


def build_tokenizer(texts: list[str], vocab_size: int):
    """Byte-level BPE trained on ``texts``: any byte sequence encodes, decoding is exact."""
    from maxcode.bpe import train_byte_bpe

    return train_byte_bpe(texts, vocab_size, [PAD, EOS], pad_token=PAD, eos_token=EOS)


def build_tiny_model(config: GenerativeR2GConfig, vocab_size: int, max_positions: int):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    spec = config.tiny
    torch.manual_seed(config.seed)
    model_config = Qwen2Config(
        vocab_size=max(vocab_size, spec.vocab_size),
        hidden_size=spec.hidden_size,
        intermediate_size=spec.intermediate_size,
        num_hidden_layers=spec.num_layers,
        num_attention_heads=spec.num_heads,
        num_key_value_heads=spec.num_kv_heads,
        max_position_embeddings=max_positions,
        tie_word_embeddings=True,
    )
    return Qwen2ForCausalLM(model_config)


def encode_example(tokenizer, prompt: str, target: str, max_length: int) -> dict:
    """Prompt tokens (cut from the left to fit) + value tokens + EOS; loss on the value only."""
    p = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    t = tokenizer(target, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    p = p[-(max_length - len(t)) :]
    return {"input_ids": p + t, "labels": [-100] * len(p) + t}


def collate(batch: list[dict], pad_id: int) -> dict[str, torch.Tensor]:
    width = max(len(b["input_ids"]) for b in batch)
    ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
    labels = torch.full((len(batch), width), -100, dtype=torch.long)
    mask = torch.zeros((len(batch), width), dtype=torch.long)
    for i, b in enumerate(batch):
        n = len(b["input_ids"])
        ids[i, :n] = torch.tensor(b["input_ids"])
        labels[i, :n] = torch.tensor(b["labels"])
        mask[i, :n] = 1
    return {"input_ids": ids, "labels": labels, "attention_mask": mask}


@torch.no_grad()
def mean_loss(model, encoded: list[dict], pad_id: int, batch_size: int) -> float:
    """Token-averaged completion loss over ``encoded`` (eval mode, no dropout)."""
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    total, count = 0.0, 0
    for i in range(0, len(encoded), batch_size):
        batch = {k: v.to(device) for k, v in collate(encoded[i : i + batch_size], pad_id).items()}
        n = int((batch["labels"][:, 1:] != -100).sum())
        total += float(model(**batch).loss) * n
        count += n
    model.train(was_training)
    return total / max(count, 1)


def prepare_model(config: GenerativeR2GConfig, dataset: R2GDataset, out_dir: Path):
    """Tokenizer and trainable model; a tiny base is saved first so a resume reuses it."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok_dir, base_dir = out_dir / "tokenizer", out_dir / "base"
    if tok_dir.is_dir():
        tokenizer = AutoTokenizer.from_pretrained(tok_dir)
    elif config.base_model == "tiny":
        texts = [e.prompt + e.target for e in dataset.train]
        tokenizer = build_tokenizer(texts, config.tiny.vocab_size)
        _save_atomically(tokenizer, tok_dir)
    else:
        tokenizer = AutoTokenizer.from_pretrained(config.base_model)
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
        _save_atomically(tokenizer, tok_dir)

    dtype = torch.bfloat16 if config.precision == "bf16" else torch.float32
    if config.base_model == "tiny":
        if base_dir.is_dir():
            model = AutoModelForCausalLM.from_pretrained(base_dir, dtype=torch.float32)
        else:
            model = build_tiny_model(config, len(tokenizer), config.max_length)
            _save_atomically(model, base_dir)
    else:
        model = AutoModelForCausalLM.from_pretrained(config.base_model, dtype=dtype)
    if config.finetune == "lora":
        from peft import LoraConfig, get_peft_model

        lora = LoraConfig(
            task_type="CAUSAL_LM",
            r=config.lora.r,
            lora_alpha=config.lora.alpha,
            lora_dropout=config.lora.dropout,
            target_modules=list(config.lora.target_modules),
        )
        model = get_peft_model(model, lora)
    if config.gradient_checkpointing:
        model.gradient_checkpointing_enable()
        if config.finetune == "lora":
            model.enable_input_require_grads()
    return tokenizer, model


def train_generative(dataset: R2GDataset, config: GenerativeR2GConfig, out_dir: Path) -> dict:
    from transformers import Trainer, TrainingArguments
    from transformers.trainer_utils import get_last_checkpoint

    from maxcode.r2g.evaluate import evaluate_reranker

    use_bf16 = config.precision == "bf16"
    if use_bf16 and not (torch.cuda.is_available() and torch.cuda.is_bf16_supported()):
        raise RuntimeError("r2g.generative.precision=bf16 needs a GPU with bf16; use fp32 on CPU")
    out_dir.mkdir(parents=True, exist_ok=True)
    tokenizer, model = prepare_model(config, dataset, out_dir)
    encode = lambda rows: [  # noqa: E731
        encode_example(tokenizer, e.prompt, e.target, config.max_length) for e in rows
    ]
    train_rows, test_rows = encode(dataset.train), encode(dataset.test)
    ckpt_dir = out_dir / "checkpoints"
    args = TrainingArguments(
        output_dir=str(ckpt_dir),
        per_device_train_batch_size=config.batch_size,
        gradient_accumulation_steps=config.grad_accum,
        num_train_epochs=config.epochs,
        learning_rate=config.learning_rate,
        warmup_steps=config.warmup_ratio,  # a float in [0, 1) is a share of all steps
        weight_decay=config.weight_decay,
        lr_scheduler_type="cosine",
        bf16=use_bf16,
        logging_steps=10,
        save_strategy="steps",
        save_steps=config.save_steps,
        save_total_limit=2,
        seed=config.seed,
        data_seed=config.seed,
        report_to=[],
        remove_unused_columns=False,
        disable_tqdm=True,
        dataloader_num_workers=0,
        dataloader_pin_memory=torch.cuda.is_available(),
    )
    timer = _StepTimer()
    trainer = Trainer(
        model=model,
        args=args,
        train_dataset=train_rows,
        data_collator=lambda b: collate(b, tokenizer.pad_token_id),
        callbacks=[timer],
    )
    last = get_last_checkpoint(str(ckpt_dir)) if config.resume and ckpt_dir.is_dir() else None
    t0 = time.perf_counter()
    result = trainer.train(resume_from_checkpoint=last)
    train_wall = time.perf_counter() - t0

    if config.finetune == "lora":
        _save_atomically(model, out_dir / "adapter")
    else:
        _save_atomically(model, out_dir / "model")
    fallback = sum(e.value for e in dataset.train) / len(dataset.train)
    metrics = {
        "kind": "generative",
        "train_examples": len(train_rows),
        "test_examples": len(test_rows),
        "train_loss_running": result.training_loss if result.global_step > 0 else None,
        "train_loss_end": mean_loss(
            model, train_rows[:256], tokenizer.pad_token_id, config.batch_size
        ),
        "optimizer_steps": result.global_step,
        "train_wall_s": round(train_wall, 3),
        "train_samples_per_s": round(result.metrics.get("train_samples_per_second", 0.0), 3),
        # Median optimizer step: free of the first steps' warm-up (allocator, kernel choice).
        "step_time_s_median": timer.median(),
        "train_samples_per_s_steady": (
            round(config.batch_size * config.grad_accum / timer.median(), 3)
            if timer.median()
            else None
        ),
        "resumed_from": last,
        "params_total": sum(p.numel() for p in model.parameters()),
        "params_trainable": sum(p.numel() for p in model.parameters() if p.requires_grad),
        "test_loss": mean_loss(model, test_rows, tokenizer.pad_token_id, config.batch_size)
        if test_rows
        else None,
    }
    manifest = {
        "kind": "generative",
        "name": f"r2g-generative:{config.base_model}/{out_dir.name}",
        "dataset_params": dataset.params.__dict__,
        "fallback_value": fallback,
        "value_grid": value_grid([e.value for e in dataset.train], config.value_grid_size),
        "config": config_to_dict(config),
    }
    atomic_write_json(out_dir / "config.json", config_to_dict(config))
    atomic_write_json(out_dir / MANIFEST, manifest)
    reranker = GenerativeReranker(model.eval(), tokenizer, config, manifest)
    metrics["test_ranking"] = evaluate_reranker(reranker, dataset.test)
    atomic_write_json(out_dir / "metrics.json", metrics)
    return metrics


class GenerativeReranker(R2GReranker):
    """Scores a batch of prompts (left-padded) in one of two ways.

    ``expected``: the probability of each value on a grid of train-set quantiles,
    written out in full (" 1.84" + EOS), from one prompt pass and one pass over the
    grid that reuses the prompt's KV cache; the score is the grid's expected value.
    It ranks even when greedy decoding would print the same number for every candidate.
    Fallback when the grid holds less than ``min_grid_mass`` of the probability.
    ``greedy``: decode ``max_new_tokens`` and read the first number; fallback when none.
    """

    def __init__(self, model, tokenizer, config: GenerativeR2GConfig, manifest: dict):
        self.model = model
        self.tokenizer = tokenizer
        self.config = config
        self.name = manifest["name"]
        self.params = DatasetParams(**manifest["dataset_params"])
        self.fallback_value = float(manifest["fallback_value"])
        self.grid = torch.tensor(manifest["value_grid"], dtype=torch.float64)
        self.tokenizer.padding_side = "left"
        self.device = next(model.parameters()).device
        grid_ids = [
            tokenizer(format_target(v), add_special_tokens=False)["input_ids"]
            + [tokenizer.eos_token_id]
            for v in manifest["value_grid"]
        ]
        width = max(len(x) for x in grid_ids)
        pad = tokenizer.pad_token_id
        self.grid_ids = torch.tensor(
            [x + [pad] * (width - len(x)) for x in grid_ids], device=self.device
        )
        self.grid_mask = torch.tensor(
            [[1] * len(x) + [0] * (width - len(x)) for x in grid_ids], device=self.device
        )

    @classmethod
    def load(cls, model_dir: Path, manifest: dict) -> GenerativeReranker:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        config = load_config(
            GenerativeR2GConfig, manifest["config"], f"{model_dir}/{MANIFEST}:config"
        )
        device = "cuda" if torch.cuda.is_available() else "cpu"
        dtype = torch.bfloat16 if config.precision == "bf16" and device == "cuda" else torch.float32
        tokenizer = AutoTokenizer.from_pretrained(model_dir / "tokenizer")
        if config.finetune == "full":
            model = AutoModelForCausalLM.from_pretrained(model_dir / "model", dtype=dtype)
        else:
            from peft import PeftModel

            base = model_dir / "base" if config.base_model == "tiny" else config.base_model
            model = AutoModelForCausalLM.from_pretrained(base, dtype=dtype)
            model = PeftModel.from_pretrained(model, model_dir / "adapter").merge_and_unload()
        return cls(model.to(device).eval(), tokenizer, config, manifest)

    @torch.no_grad()
    def score_candidates(self, candidates: list[Candidate]) -> list[Score]:
        scores: list[Score] = []
        for i in range(0, len(candidates), self.config.score_batch_size):
            chunk = candidates[i : i + self.config.score_batch_size]
            if self.config.score_mode == "greedy":
                scores.extend(self.scores_from_text(self.generate_text(chunk)))
            else:
                scores.extend(self._expected(chunk))
        return scores

    def scores_from_text(self, texts: list[str]) -> list[Score]:
        """The first number of each text; the fallback, flagged, where there is none."""
        out = []
        for text in texts:
            value = parse_value(text)
            out.append(Score(self.fallback_value, fallback=True) if value is None else Score(value))
        return out

    def generate_text(self, chunk: list[Candidate]) -> list[str]:
        """The model's greedy continuation for each candidate (what ``parse_value`` reads)."""
        ids, mask = self._prompt_batch(chunk)
        out = self.model.generate(
            input_ids=ids,
            attention_mask=mask,
            max_new_tokens=self.config.max_new_tokens,
            do_sample=False,
            pad_token_id=self.tokenizer.pad_token_id,
            eos_token_id=self.tokenizer.eos_token_id,
        )
        return self.tokenizer.batch_decode(out[:, ids.shape[1] :], skip_special_tokens=True)

    def grid_log_probs(self, chunk: list[Candidate]) -> torch.Tensor:
        """log p(value string + EOS | prompt) for every candidate x grid value, shape (B, J)."""
        ids, mask = self._prompt_batch(chunk)
        b, j = ids.shape[0], self.grid_ids.shape[0]
        out = self.model(
            input_ids=ids, attention_mask=mask, position_ids=_positions(mask), use_cache=True
        )
        first = torch.log_softmax(out.logits[:, -1].float(), dim=-1)  # predicts value token 0
        cache = out.past_key_values
        cache.batch_repeat_interleave(j)
        cont = self.grid_ids.repeat(b, 1)
        cont_mask = self.grid_mask.repeat(b, 1)
        full_mask = torch.cat([mask.repeat_interleave(j, dim=0), cont_mask], dim=1)
        out2 = self.model(
            input_ids=cont,
            attention_mask=full_mask,
            position_ids=_positions(full_mask)[:, ids.shape[1] :],
            past_key_values=cache,
        )
        lp_first = first.repeat_interleave(j, dim=0).gather(1, cont[:, :1])
        logits = out2.logits[:, :-1].float()
        lp_rest = logits.gather(2, cont[:, 1:, None]).squeeze(-1) - torch.logsumexp(logits, dim=-1)
        token_lp = torch.cat([lp_first, lp_rest], dim=1) * cont_mask
        return token_lp.sum(dim=1).view(b, j)

    def _expected(self, chunk: list[Candidate]) -> list[Score]:
        log_p = self.grid_log_probs(chunk).double().cpu()
        mass = torch.logsumexp(log_p, dim=1).exp()
        weights = torch.softmax(log_p, dim=1)
        values = (weights * self.grid).sum(dim=1)
        return [
            Score(float(v))
            if m >= self.config.min_grid_mass
            else Score(self.fallback_value, fallback=True)
            for v, m in zip(values, mass, strict=True)
        ]

    def _prompt_batch(self, chunk: list[Candidate]) -> tuple[torch.Tensor, torch.Tensor]:
        prompts = [
            build_prompt(c.observation_text, c.source, self.params.max_prompt_chars, c.description)
            for c in chunk
        ]
        # The training cut: keep the prompt's last tokens, leaving room for the value.
        room = self.config.max_length - self.grid_ids.shape[1]
        ids = [self.tokenizer(p, add_special_tokens=False)["input_ids"][-room:] for p in prompts]
        width = max(len(x) for x in ids)
        pad = self.tokenizer.pad_token_id
        input_ids = torch.tensor([[pad] * (width - len(x)) + x for x in ids], device=self.device)
        mask = torch.tensor(
            [[0] * (width - len(x)) + [1] * len(x) for x in ids], device=self.device
        )
        return input_ids, mask


def value_grid(values: list[float], size: int) -> list[float]:
    """Quantiles of the train returns at two decimals, deduplicated: the values scored."""
    qs = torch.quantile(
        torch.tensor(values, dtype=torch.float64), torch.linspace(0, 1, size, dtype=torch.float64)
    )
    return sorted({round(float(q), 2) for q in qs})


def _positions(mask: torch.Tensor) -> torch.Tensor:
    """Position ids that skip left padding, as in training where sequences start at 0."""
    return (mask.cumsum(dim=-1) - 1).clamp(min=0)


class _StepTimer(TrainerCallback):
    """Wall time of each optimizer step (synchronised on a GPU so the time is the step's)."""

    def __init__(self) -> None:
        self.times: list[float] = []
        self._t0 = 0.0

    def on_step_begin(self, args, state, control, **kwargs) -> None:
        self._t0 = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs) -> None:
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        self.times.append(time.perf_counter() - self._t0)

    def median(self) -> float | None:
        return round(statistics.median(self.times), 5) if self.times else None


def _save_atomically(obj, target: Path) -> None:
    """save_pretrained into a sibling temp dir, then rename: a kill leaves old or new, never half."""
    tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    obj.save_pretrained(tmp)
    if target.exists():
        shutil.rmtree(target)
    tmp.rename(target)
