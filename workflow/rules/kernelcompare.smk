# Each rule passes its stage the params sections it reads (plain values, so Snakemake
# reruns exactly the stages whose values change); the script loads them strictly.
KC_TASKS = kernelcompare_suite_dir(PLAN.params.kernelcompare)
KC_STAGES = {  # model stage -> the adapter it evaluates (the base model has none)
    "base": None,
    "sft": KC_ADAPTER.format(kcstage="sft"),
    "grpo": KC_ADAPTER.format(kcstage="grpo"),
}
KC_ROWS = {"base": "base model", "sft": "SFT", "grpo": "SFT then GRPO"}


rule kernelcompare_pairs:
    """Slow/fast kernel pairs from Parboil and Rodinia trees, chat JSONL + card."""
    output:
        pairs=KC_PAIRS,
        stats=KC_PAIRS_STATS,
        card=KC_PAIRS_CARD,
    log:
        "logs/kernelcompare/pairs.log",
    conda:
        "../../envs/train.yaml"
    params:
        kernelcompare=kc_sections("sources", "extract", "harness"),
        generator=config["llm"].get("generator"),
        llm_cache=KC_LLM_CACHE,
    script:
        "../scripts/kernelcompare.py"


rule kernelcompare_split:
    """The tasks split 80/20 with seed 42, the same on every machine."""
    input:
        tasks=KC_TASKS,
    output:
        KC_SPLIT,
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
        pairs=KC_PAIRS,
    output:
        directory(KC_STAGES["sft"]),
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
        split=KC_SPLIT,
        sft=KC_STAGES["sft"],
    output:
        directory(KC_STAGES["grpo"]),
    log:
        "logs/kernelcompare/grpo.log",
    conda:
        "../../envs/train.yaml"
    params:
        kernelcompare=kc_sections("model", "grpo"),
        evaluation=config["evaluation"],
        cache_dir=CACHE_DIR,
    script:
        "../scripts/kernelcompare.py"


rule kernelcompare_heldout:
    """One row of the table: a model stage measured on the held-out tasks."""
    input:
        unpack(
            lambda w: {
                "tasks": KC_TASKS,
                "split": KC_SPLIT,
                **({"adapter": KC_STAGES[w.kcstage]} if KC_STAGES[w.kcstage] else {}),
            }
        ),
    output:
        KC_HELDOUT,
    log:
        "logs/kernelcompare/heldout_{kcstage}.log",
    conda:
        "../../envs/train.yaml"
    params:
        kernelcompare=kc_sections("model", "heldout"),
        evaluation=config["evaluation"],
        row=lambda w: KC_ROWS[w.kcstage],
        cache_dir=CACHE_DIR,
    script:
        "../scripts/kernelcompare.py"


rule kernelcompare_table:
    """The report's table: correctness and speedups for base, +SFT, +GRPO."""
    input:
        unpack(
            lambda w: {
                "heldout": expand(KC_HELDOUT, kcstage=KC_STAGES),
                **reference_input(),
            }
        ),
    output:
        [reported(p) for p in KC_TABLES],
    log:
        "logs/kernelcompare/table.log",
    conda:
        "../../envs/train.yaml"
    params:
        rows=list(KC_ROWS.values()),
        context=kc_table_context,
    script:
        "../scripts/kernelcompare.py"
