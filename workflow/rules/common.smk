# Validate params before any job runs, then derive the job lists from them.
from maxcode.pipeline import PipelinePlan

PLAN = PipelinePlan.from_config(config)


wildcard_constraints:
    stage="rollouts|reranked",
    suite="[a-z0-9_]+",
    method="[a-z0-9][a-z0-9+_-]*",
    task="[A-Za-z0-9_.-]+",
    kcstage="base|sft|grpo",
    seed="[0-9]+",


def final_outputs():
    kernelcompare = multiext("results/tables/kernelcompare", ".md", ".csv", ".tex")
    return PLAN.table_outputs() + (
        list(kernelcompare) if "kernelcompare" in config else []
    )


def rollout_inputs(wildcards):
    """The suite's tasks, plus the reward-to-go model when the method reranks with it."""
    inputs = {"suite": f"data/suites/{wildcards.suite}"}
    if PLAN.methods[wildcards.method].rerank == "model":
        inputs["model"] = "models/r2g"
    return inputs
