# Each rule passes its stage the params sections it reads (plain values, so Snakemake
# reruns exactly the stages whose values change); the script loads them strictly.
KC = config["kernelcompare"]
KC_SOURCES = KC["sources"]
KC_TASKS = SUITE_DIR.format(suite=KC_SOURCES["suite"])
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
        kernelcompare=kc_sections("sources", "extract", "harness"),
        generator=config["llm"].get("generator"),
        llm_cache=".cache/kernelcompare",
    script:
        "../scripts/kernelcompare.py"


rule kernelcompare_split:
    """The tasks split 80/20 with seed 42, the same on every machine."""
    input:
        tasks=KC_TASKS,
    output:
        "data/kernelcompare/split.json",
    log:
        "logs/kernelcompare/split.log",
    conda:
        "../../envs/train.yaml"
    params:
        kernelcompare=kc_sections("split"),
    script:
        "../scripts/kernelcompare.py"


rule kernelcompare_sft:
    """LoRA SFT on the pairs with the report's recipe."""
    input:
        pairs="data/kernelcompare/pairs.jsonl",
    output:
        directory("models/kernelcompare/sft"),
    log:
        "logs/kernelcompare/sft.log",
    conda:
        "../../envs/train.yaml"
    params:
        kernelcompare=kc_sections("model", "sft"),
    script:
        "../scripts/kernelcompare.py"


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
        kernelcompare=kc_sections("model", "grpo"),
        evaluation=config["evaluation"],
        cache_dir=".cache",
    script:
        "../scripts/kernelcompare.py"


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
        kernelcompare=kc_sections("model", "heldout"),
        evaluation=config["evaluation"],
        row=lambda w: KC_ROWS[w.kcstage],
        cache_dir=".cache",
    script:
        "../scripts/kernelcompare.py"


rule kernelcompare_table:
    """The report's table: correctness and speedups for base, +SFT, +GRPO."""
    input:
        heldout=expand(
            "results/kernelcompare/heldout_{kcstage}.jsonl", kcstage=KC_STAGES
        ),
    output:
        [
            reported(p)
            for p in multiext(
                "results/tables/kernelcompare", ".md", ".csv", ".tex", ".html"
            )
        ],
    log:
        "logs/kernelcompare/table.log",
    conda:
        "../../envs/train.yaml"
    params:
        rows=list(KC_ROWS.values()),
        context=kc_table_context,
    script:
        "../scripts/kernelcompare.py"
