rule suite:
    """Normalized tasks of one suite: tasks.jsonl plus PIE-layout tests."""
    output:
        directory("data/suites/{suite}"),
    params:
        suite=lambda wildcards: config["suites"][wildcards.suite],
    log:
        "logs/suites/{suite}.log",
    script:
        "../scripts/build_suite.py"
