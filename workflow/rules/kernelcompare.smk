KC = config["kernelcompare"]["sources"]
KC_TASKS = f"data/suites/{KC['suite']}"
KC_STAGES = {
    "base": None,
    "sft": "models/kernelcompare/sft",
    "grpo": "models/kernelcompare/grpo",
}
KC_ROWS = {"base": "base model", "sft": "SFT", "grpo": "SFT then GRPO"}


rule kernelcompare_pairs:
    """Slow/fast kernel pairs from Parboil and Rodinia trees, chat JSONL + card."""
    output:
        pairs="data/kernelcompare/pairs.jsonl",
        stats="data/kernelcompare/pairs.stats.json",
        card="data/kernelcompare/pairs.card.md",
    log:
        "logs/kernelcompare/pairs.log",
    conda:
        "../../envs/train.yaml"
    params:
        file=PARAMS_FILE,
        trees=" ".join(
            f"--{suite} {KC[suite]}"
            for suite in ("parboil", "rodinia")
            if KC.get(suite)
        ),
    shell:
        "maxcode kernelcompare extract {params.trees} --out {output.pairs} "
        "--params {params.file} > {log} 2>&1"


rule kernelcompare_split:
    """The tasks split 80/20 with seed 42, the same on every machine."""
    input:
        KC_TASKS,
    output:
        "data/kernelcompare/split.json",
    log:
        "logs/kernelcompare/split.log",
    conda:
        "../../envs/train.yaml"
    params:
        file=PARAMS_FILE,
    shell:
        "maxcode kernelcompare split --tasks {input}/tasks.jsonl --out {output} "
        "--params {params.file} > {log} 2>&1"


rule kernelcompare_sft:
    """LoRA SFT on the pairs with the report's recipe."""
    input:
        "data/kernelcompare/pairs.jsonl",
    output:
        directory("models/kernelcompare/sft"),
    log:
        "logs/kernelcompare/sft.log",
    conda:
        "../../envs/train.yaml"
    params:
        file=PARAMS_FILE,
    shell:
        "maxcode kernelcompare sft --pairs {input} --out {output} --params {params.file} > {log} 2>&1"


rule kernelcompare_grpo:
    """Single-turn GRPO from the SFT adapter; reward 0.4 compiles + 0.4 correct + 0.2 faster."""
    input:
        tasks=KC_TASKS,
        split="data/kernelcompare/split.json",
        sft="models/kernelcompare/sft",
    output:
        directory("models/kernelcompare/grpo"),
    log:
        "logs/kernelcompare/grpo.log",
    conda:
        "../../envs/train.yaml"
    params:
        file=PARAMS_FILE,
    shell:
        "maxcode kernelcompare grpo --tasks {input.tasks}/tasks.jsonl --split {input.split} "
        "--out {output} --init-adapter {input.sft} --cache-dir .cache --params {params.file} "
        "> {log} 2>&1"


rule kernelcompare_heldout:
    """One row of the table: a model stage measured on the held-out tasks."""
    input:
        unpack(
            lambda w: {
                "tasks": KC_TASKS,
                "split": "data/kernelcompare/split.json",
                **({"adapter": KC_STAGES[w.kcstage]} if KC_STAGES[w.kcstage] else {}),
            }
        ),
    output:
        "results/kernelcompare/heldout_{kcstage}.jsonl",
    log:
        "logs/kernelcompare/heldout_{kcstage}.log",
    conda:
        "../../envs/train.yaml"
    params:
        file=PARAMS_FILE,
        row=lambda w: KC_ROWS[w.kcstage],
        adapter=lambda w, input: (
            f"--adapter {input.adapter}" if "adapter" in input.keys() else ""
        ),
    shell:
        "maxcode kernelcompare heldout --stage '{params.row}' --tasks {input.tasks}/tasks.jsonl "
        "--split {input.split} --out {output} {params.adapter} --cache-dir .cache "
        "--params {params.file} > {log} 2>&1"


rule kernelcompare_table:
    """The report's table: correctness and speedups for base, +SFT, +GRPO."""
    input:
        expand("results/kernelcompare/heldout_{kcstage}.jsonl", kcstage=KC_STAGES),
    output:
        [
            reported(p)
            for p in multiext("results/tables/kernelcompare", ".md", ".csv", ".tex")
        ],
    log:
        "logs/kernelcompare/table.log",
    conda:
        "../../envs/train.yaml"
    params:
        file=PARAMS_FILE,
        stages=lambda w, input: " ".join(
            f"--stage '{KC_ROWS[s]}={path}'" for s, path in zip(KC_STAGES, input)
        ),
    shell:
        "maxcode kernelcompare table {params.stages} --out results/tables/kernelcompare "
        "--params {params.file} > {log} 2>&1"
