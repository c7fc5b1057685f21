# maxcode: max-reward inference-time search for code optimization.
# Run:   snakemake --profile workflow/profiles/local
# Rules: workflow/rules/*.smk; parameters: params.yaml (validated before any job).
from snakemake.utils import min_version

min_version("9.0")


configfile: "params.yaml"


include: "workflow/rules/common.smk"
include: "workflow/rules/suites.smk"
include: "workflow/rules/rollouts.smk"
include: "workflow/rules/r2g.smk"
include: "workflow/rules/tables.smk"
include: "workflow/rules/kernelcompare.smk"


rule all:
    default_target: True
    input:
        final_outputs(),


# Stage targets, one per DVC stage (dvc.yaml runs `snakemake <target>`).
rule suites:
    input:
        PLAN.suite_dirs(),


rule rollouts:
    input:
        PLAN.all_rollouts("rollouts"),


rule r2g:
    input:
        "models/r2g",
        "results/r2g/ranking.json",


rule reranked:
    input:
        PLAN.all_rollouts("reranked"),


rule kernelcompare:
    input:
        multiext("results/tables/kernelcompare", ".md", ".csv", ".tex"),
