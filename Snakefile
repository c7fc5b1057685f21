# maxcode: max-reward inference-time search for code optimization.
# Run:   snakemake --profile workflow/profiles/local
# Rules: workflow/rules/*.smk; parameters: params.yaml (validated before any job).
# Presets: snakemake --configfile presets/gpu.yaml --replace-workflow-config (README: Presets)
from snakemake.utils import min_version

min_version("9.0")


configfile: "params.yaml"


# A preset is a whole params file: merged into params.yaml it would keep params.yaml's
# suites and methods, so it must replace it.
if (
    workflow.config_settings.configfiles
    and "preset" in workflow.config_settings.overwrite_config
    and not workflow.config_settings.replace_workflow_config
):
    raise WorkflowError(
        f"--configfile {' '.join(map(str, workflow.config_settings.configfiles))}: a "
        "whole params file (it sets `preset:`) must replace params.yaml, not extend it; "
        "add --replace-workflow-config"
    )
# The file the CLI stages (kernelcompare) read: the preset when one replaced params.yaml.
PARAMS_FILE = str((workflow.config_settings.configfiles or ["params.yaml"])[-1])


# `snakemake --report report.html`: tables, plots and provenance in one HTML file.
report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/suites.smk"
include: "workflow/rules/rollouts.smk"
include: "workflow/rules/r2g.smk"
include: "workflow/rules/tables.smk"


if "kernelcompare" in config:

    include: "workflow/rules/kernelcompare.smk"


include: "workflow/rules/corpus.smk"


# A finished run leaves no copies of published rollouts in results/.inflight/.
onsuccess:
    clean_inflight()


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
        R2G_MODEL,
        R2G_RANKING,


rule reranked:
    input:
        PLAN.all_rollouts("reranked"),


rule kernelcompare:
    input:
        KC_TABLES,
