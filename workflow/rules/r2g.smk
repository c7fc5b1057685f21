rule r2g_dataset:
    """Reward-to-go examples from rollouts, split by task so no task leaks."""
    input:
        rollouts=PLAN.r2g_training_rollouts(),
        suites=PLAN.suite_dirs(),
    output:
        train=f"{R2G_DATA}/train.jsonl",
        test=f"{R2G_DATA}/test.jsonl",
        card=f"{R2G_DATA}/card.md",
        card_json=f"{R2G_DATA}/card.json",
    log:
        "logs/r2g/dataset.log",
    conda:
        "../../envs/train.yaml"
    params:
        r2g=config["r2g"],
        gamma=config["search"]["gamma"],
    script:
        "../scripts/build_r2g_dataset.py"


rule r2g_train:
    """Train the reward-to-go model (kind from params) on the training split."""
    input:
        train=f"{R2G_DATA}/train.jsonl",
        test=f"{R2G_DATA}/test.jsonl",
    output:
        directory(R2G_MODEL),
    log:
        "logs/r2g/train.log",
    conda:
        "../../envs/train.yaml"
    params:
        r2g=config["r2g"],
    script:
        "../scripts/train_r2g.py"


rule r2g_ranking:
    """Ranking quality on held-out tasks: average rank, Spearman, top-m kept reward."""
    input:
        model=R2G_MODEL,
        test=f"{R2G_DATA}/test.jsonl",
    output:
        R2G_RANKING,
    log:
        "logs/r2g/ranking.log",
    conda:
        "../../envs/train.yaml"
    params:
        r2g=config["r2g"],
    script:
        "../scripts/evaluate_r2g.py"
