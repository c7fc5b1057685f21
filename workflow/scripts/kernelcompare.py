"""One script for KernelCompare's rules: unpack ``snakemake`` and call the stage function."""

import sys
from pathlib import Path

from maxcode.kernelcompare.params import load_kernelcompare_params
from maxcode.llm.config import role_config_from_dict
from maxcode.loader import load
from maxcode.params import EvaluationParams
from maxcode.stages import kernelcompare as stages

sys.stderr = sys.stdout = open(snakemake.log[0], "w")  # noqa: SIM115
rule, out = snakemake.rule, Path(snakemake.output[0])
p, i = snakemake.params, snakemake.input
# The table reads the header's context, not a stage's sections.
sections = p.context["kernelcompare"] if rule == "kernelcompare_table" else p.kernelcompare
kc = load_kernelcompare_params({"kernelcompare": sections})
if rule == "kernelcompare_pairs":
    stats = stages.extract_pairs(
        kc,
        role_config_from_dict("generator", p.generator),
        out,
        Path(kc.sources.parboil) if kc.sources.parboil else None,
        Path(kc.sources.rodinia) if kc.sources.rodinia else None,
        None,
        Path(p.llm_cache),
    )
    print(stats["suites"])
elif rule == "kernelcompare_split":
    print(stages.split_stage(kc, Path(i.tasks) / "tasks.jsonl", out).fingerprint)
elif rule == "kernelcompare_table":
    files = dict(zip(p.rows, [Path(f) for f in i.heldout], strict=True))
    table = stages.table_stage(files, p.context, out.with_suffix(""))  # .md -> the prefix
    print(table.markdown())
elif rule == "kernelcompare_sft":
    print(stages.sft_stage(kc, Path(i.pairs), out))
else:
    evaluation = load(EvaluationParams, p.evaluation, "evaluation")
    tasks, split, cache = Path(i.tasks) / "tasks.jsonl", Path(i.split), Path(p.cache_dir)
    if rule == "kernelcompare_grpo":
        print(stages.grpo_stage(kc, evaluation, tasks, split, out, Path(i.sft), cache))
    else:
        adapter = Path(i.adapter) if "adapter" in i.keys() else None  # noqa: SIM118
        records = stages.heldout_stage(kc, evaluation, p.row, tasks, split, out, adapter, cache)
        print(f"{p.row}: {len(records)} held-out tasks evaluated")
