rule suite:
    """Normalized tasks of one suite: tasks.jsonl plus PIE-layout tests."""
    output:
        directory(SUITE_DIR),
    log:
        "logs/suites/{suite}.log",
    conda:
        "../../envs/cpu-eval.yaml"
    params:
        suite=lambda wildcards: config["suites"][wildcards.suite],
    script:
        "../scripts/build_suite.py"
