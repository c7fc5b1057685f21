rule rollout:
    """One unit of work: a task x method x seed search, every candidate recorded."""
    input:
        unpack(rollout_inputs),
    output:
        ROLLOUT,
    log:
        "logs/{stage}/{suite}/{method}/{task}/seed{seed}.log",
    conda:
        lambda wildcards: PLAN.conda_env(wildcards.suite)
    threads: 1
    resources:
        gpu=lambda wildcards: PLAN.gpus(wildcards.suite),
    params:
        method=lambda wildcards: PLAN.methods[wildcards.method].to_dict(),
        llm=rollout_llm,
        evaluation=rollout_evaluation,
        inflight=lambda wildcards: PLAN.inflight_path(wildcards),
        cache_dir=CACHE_DIR,
    script:
        "../scripts/run_rollout.py"
