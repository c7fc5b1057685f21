"""KernelCompare's stages as functions of typed params: the one front door.

The pipeline's ``script:`` rules and ``maxcode kernelcompare ...`` both call these, so
a stage runs the same way by hand and under Snakemake; the rules pass each stage the
params sections it reads, so Snakemake reruns exactly the stages whose values change.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from maxcode.errors import ConfigError
from maxcode.kernelcompare.extract import CompileChecker, extract_parboil, extract_rodinia
from maxcode.kernelcompare.naive import LLMNaiveGenerator, SourceTransformGenerator
from maxcode.kernelcompare.params import KernelCompareParams
from maxcode.kernelcompare.split import Split, split_tasks
from maxcode.llm.config import RoleConfig
from maxcode.llm.factory import build_client
from maxcode.params import EvaluationParams
from maxcode.records import atomic_write_json
from maxcode.roles import build_evaluator
from maxcode.tasks.model import Task, read_tasks_jsonl


def extract_pairs(
    kc: KernelCompareParams,
    generator: RoleConfig,
    out: Path,
    parboil: Path | None,
    rodinia: Path | None,
    compile_cache: Path | None,
    llm_cache: Path,
) -> dict:
    """Extract, clean, generate and deduplicate pairs; returns the per-suite stats."""
    from maxcode.kernelcompare.records import write_dataset

    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if parboil is None and rodinia is None:
        raise ConfigError("kernelcompare.sources: give parboil, rodinia or both")
    extractions = []
    if parboil is not None:
        extractions.append(extract_parboil(parboil, kc.extract))
    if rodinia is not None:
        checker = CompileChecker(kc.extract, compile_cache) if kc.extract.compile_check else None
        naive = (
            SourceTransformGenerator(kc.extract.naive_transforms)
            if kc.extract.naive_generator == "offline"
            else LLMNaiveGenerator(build_client(generator, "generator", cache_dir=llm_cache))
        )
        extractions.append(extract_rodinia(rodinia, naive, kc.extract, checker, kc.harness))
    return write_dataset(extractions, out, kc.extract.system_prompt)


def split_stage(kc: KernelCompareParams, tasks: Path, out: Path) -> Split:
    """Deterministic train/test split (the report's 80/20 with seed 42)."""
    result = split_tasks(read_tasks_jsonl(tasks), kc.split)
    atomic_write_json(out, result.to_dict())
    return result


def sft_stage(kc: KernelCompareParams, pairs: Path, out: Path) -> dict:
    """Stage 1: LoRA supervised fine-tuning on the pairs."""
    from maxcode.kernelcompare.sft import run_sft  # TRL: imported only by the training stages

    return run_sft(pairs, kc.require_model(), kc.sft_config(), out)


def grpo_stage(
    kc: KernelCompareParams,
    evaluation: EvaluationParams,
    tasks: Path,
    split: Path,
    out: Path,
    init_adapter: Path | None,
    cache_dir: Path,
) -> dict:
    """Stage 2: single-turn GRPO on the split's training tasks."""
    from maxcode.kernelcompare.grpo import run_grpo  # TRL: imported only by the training stages

    train = split_part(tasks, split, "train")
    evaluator = _evaluator(train, evaluation, cache_dir)
    return run_grpo(train, evaluator, kc.require_model(), kc.grpo_config(), out, init_adapter)


def heldout_stage(
    kc: KernelCompareParams,
    evaluation: EvaluationParams,
    stage: str,
    tasks: Path,
    split: Path,
    out: Path,
    adapter: Path | None,
    cache_dir: Path,
) -> list:
    """Evaluate one model stage on the held-out tasks (one greedy completion each)."""
    from maxcode.kernelcompare.grpo import single_turn_prompt
    from maxcode.kernelcompare.heldout import evaluate_stage
    from maxcode.kernelcompare.models import load_model_and_tokenizer

    test = split_part(tasks, split, "test")
    spec = kc.require_model()
    if adapter is not None:
        from peft import PeftModel
        from transformers import AutoTokenizer

        saved = AutoTokenizer.from_pretrained(str(adapter))
        model, tokenizer = load_model_and_tokenizer(spec, [], tokenizer=saved)
        model = PeftModel.from_pretrained(model, str(adapter))
    else:
        corpus = [m["content"] for t in test for m in single_turn_prompt(t)]
        model, tokenizer = load_model_and_tokenizer(spec, corpus)
    label = spec.name_or_path or "config-built"
    evaluator = _evaluator(test, evaluation, cache_dir)
    return evaluate_stage(
        stage, label, model, tokenizer, test, evaluator, out, kc.heldout.max_new_tokens
    )


def table_stage(files: dict[str, Path], context: dict | None, out: Path):
    """The report's table (correctness, speedups) from each stage's held-out results, in row
    order; ``context`` (params' ``preset``, ``kernelcompare``, ``suites``, ``tables``) adds the
    header block and the report's numbers. Writes ``out`` + .md/.csv/.tex/.html."""
    from maxcode.kernelcompare.table import kernelcompare_table, load_rows
    from maxcode.report.reference import kernelcompare_context

    rows = load_rows(files)
    notes, extra, meta = kernelcompare_context(context, list(files)) if context else ([], {}, {})
    table = kernelcompare_table(rows, notes, extra, meta)
    table.write(Path(out).parent, Path(out).name)
    return table


def split_part(tasks_path: Path, split_path: Path, part: str) -> list[Task]:
    tasks = read_tasks_jsonl(tasks_path)
    split = Split.from_dict(json.loads(split_path.read_text()), str(split_path))
    wanted = getattr(split, part)
    by_id = {t.task_id: t for t in tasks}
    missing = [t for t in wanted if t not in by_id]
    if missing:
        raise ConfigError(f"{split_path}: {part} ids not in {tasks_path}: {missing[:5]}")
    return [by_id[t] for t in wanted]


def _evaluator(tasks: list[Task], evaluation: EvaluationParams, cache_dir: Path):
    languages = {t.language for t in tasks}
    if len(languages) != 1:
        raise ConfigError(f"tasks mix languages {sorted(languages)}; use one suite")
    return build_evaluator(languages.pop(), evaluation, cache_dir)
