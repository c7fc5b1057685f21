rule tables:
    """Every table, plot and DVC metric, rebuilt from the rollout records alone."""
    input:
        rollouts=PLAN.all_rollouts(),
        ranking="results/r2g/ranking.json",
        card="data/r2g/card.json",
    output:
        PLAN.table_outputs(),
    log:
        "logs/tables.log",
    conda:
        "../../envs/cpu-eval.yaml"
    params:
        tables=config["tables"],
        preset=config["preset"],
        llm=config["llm"],
        methods=lambda wildcards: {n: m.to_dict() for n, m in PLAN.methods.items()},
    script:
        "../scripts/make_tables.py"
