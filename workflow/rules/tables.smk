rule tables:
    """Every table, plot and DVC metric, rebuilt from the rollout records alone."""
    input:
        unpack(tables_inputs),
    output:
        [reported(p) for p in PLAN.table_outputs()],
    log:
        "logs/tables.log",
    conda:
        "../../envs/cpu-eval.yaml"
    params:
        tables=config["tables"],
        preset=config["preset"],
        llm={role: config["llm"][role] for role in TABLE_ROLES},
        suites=config["suites"],
        methods=lambda wildcards: {n: m.to_dict() for n, m in PLAN.methods.items()},
    script:
        "../scripts/make_tables.py"
