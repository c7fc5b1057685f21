rule r2g_dataset:
    """Reward-to-go examples from rollouts, split by task so no task leaks."""
    input:
        rollouts=PLAN.r2g_training_rollouts(),
        suites=PLAN.suite_dirs(),
    output:
        train="data/r2g/train.jsonl",
        test="data/r2g/test.jsonl",
        card="data/r2g/card.md",
        card_json="data/r2g/card.json",
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
        train="data/r2g/train.jsonl",
        test="data/r2g/test.jsonl",
    output:
        directory("models/r2g"),
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
        model="models/r2g",
        test="data/r2g/test.jsonl",
    output:
        "results/r2g/ranking.json",
    log:
        "logs/r2g/ranking.log",
    conda:
        "../../envs/train.yaml"
    params:
        r2g=config["r2g"],
    script:
        "../scripts/evaluate_r2g.py"
