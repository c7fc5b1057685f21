# Public KernelBench runs as a corpus, and the reward-to-go ranking on its real candidates.
# Only with a `corpus:` block in params (off in the offline default); a corpus `folder`
# is read as it is, `sources` are imported here. Under replay the ranking holds out the
# pipeline's held-out tasks, and its model reranks the replayed search.


rule corpus_import:
    """Read the public run layouts into one corpus with its card."""
    output:
        corpus=f"{CORPUS_DIR}/corpus.jsonl",
        references=f"{CORPUS_DIR}/references.json",
        card=f"{CORPUS_DIR}/card.md",
        card_json=f"{CORPUS_DIR}/card.json",
    log:
        "logs/corpus/import.log",
    conda:
        "../../envs/train.yaml"
    params:
        corpus=config.get("corpus"),
    script:
        "../scripts/corpus.py"


rule corpus_ranking:
    """Both reward-to-go kinds trained on the corpus's training problems, ranked on the rest."""
    input:
        corpus=f"{PLAN.corpus_dir}/corpus.jsonl",
        references=f"{PLAN.corpus_dir}/references.json",
    output:
        ranking=f"{R2G_CORPUS_DIR}/ranking.json",
        tables=CORPUS_TABLES,
        models=[directory(d) for d in PLAN.corpus_model_dirs()],
    log:
        "logs/corpus/ranking.log",
    conda:
        "../../envs/train.yaml"
    params:
        corpus=config.get("corpus"),
        r2g=config["r2g"],
        gamma=config["search"]["gamma"],
        tables=config["tables"],
        held_out=PLAN.held_out_problems if PLAN.replaying else None,
    script:
        "../scripts/corpus.py"
