rule rollout:
    """One unit of work: a task x method x seed search, every candidate recorded."""
    input:
        unpack(rollout_inputs),
    output:
        "results/rollouts/{suite}/{method}/{task}/seed{seed}.jsonl",
    params:
        method=lambda wildcards: PLAN.methods[wildcards.method].to_dict(),
        llm=config["llm"],
        evaluation=config["evaluation"],
        inflight=lambda wildcards: PLAN.inflight_path(wildcards),
        cache_dir=".cache",
    log:
        "logs/rollouts/{suite}/{method}/{task}/seed{seed}.log",
    resources:
        cpu_eval=1,
    script:
        "../scripts/run_rollout.py"
