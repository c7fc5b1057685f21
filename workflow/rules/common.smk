# Validate params before any job runs, then derive the job lists from them.
from pathlib import Path

from maxcode.pipeline import (
    CACHE_DIR,
    CORPUS_DIR,
    CORPUS_TABLES,
    KC_ADAPTER,
    KC_HELDOUT,
    KC_LLM_CACHE,
    KC_PAIRS,
    KC_PAIRS_CARD,
    KC_PAIRS_STATS,
    KC_SPLIT,
    KC_TABLES,
    PLOT,
    R2G_DATA,
    R2G_MODEL,
    R2G_CORPUS_DIR,
    R2G_RANKING,
    ROLLOUT,
    SUITE_DIR,
    TABLE,
    TABLE_ROLES,
    PipelinePlan,
    clean_inflight,
    kernelcompare_suite_dir,
)

PLAN = PipelinePlan.from_config(config, source=PARAMS_FILE)


wildcard_constraints:
    stage="rollouts|reranked",
    suite="[a-z0-9_]+",
    method="[a-z0-9][a-z0-9+_-]*",
    task="[A-Za-z0-9_.-]+",
    kcstage="base|sft|grpo",
    seed="[0-9]+",


def final_outputs():
    """Tables, the reward-to-go model's held-out ranking (made even when no rerank table
    reads it), KernelCompare's table, and the corpus's ranking table when params have
    a `corpus:` block."""
    return (
        PLAN.table_outputs()
        + ([] if PLAN.replaying else [R2G_RANKING])
        + (KC_TABLES if "kernelcompare" in config else [])
        + (CORPUS_TABLES if "corpus" in config else [])
    )


def rollout_inputs(wildcards):
    """The suite's tasks, the reward-to-go model when the method reranks with it, and the
    corpus when the generator replays it."""
    inputs = {"suite": SUITE_DIR.format(suite=wildcards.suite)}
    if PLAN.methods[wildcards.method].rerank == "model":
        inputs["model"] = PLAN.reranker_dir
    if PLAN.replaying:
        inputs["corpus"] = f"{PLAN.corpus_dir}/corpus.jsonl"
    return inputs


def rollout_llm(wildcards):
    """The LLM roles the method's rollouts build, as written in params (only these, so a
    change to another role reruns none of its jobs)."""
    return {role: config["llm"][role] for role in PLAN.roles_of(wildcards.method)}


def rollout_evaluation(wildcards):
    """The reward, the evaluator settings of the suite's task language and, for replayed
    programs, the recorded outcomes that score them."""
    evaluation = config["evaluation"]
    keys = ("reward", PLAN.language_of(wildcards.suite), "replay")
    return {key: evaluation[key] for key in keys if key in evaluation}


# Each table, plot and provenance file is flagged for `snakemake --report report.html`,
# with a caption from workflow/report/.
TABLE_CATEGORIES = {
    "main": "Main results",
    "ablation": "Ablation",
    "rerank": "Reward-to-go reranking",
    "budget": "Budgets",
    "kernelcompare": "KernelCompare training",
}


def reported(path):
    """A table, plot or provenance file, flagged for the report under its category."""
    stem, ext, folder = Path(path).stem, Path(path).suffix[1:], Path(path).parent
    if folder == Path(TABLE).parent:
        return report(
            path,
            caption=f"../report/table_{stem}.rst",
            category="Tables",
            subcategory=TABLE_CATEGORIES[stem],
            labels={"table": stem, "format": ext},
        )
    if folder == Path(PLOT).parent:
        return report(
            path,
            caption="../report/speedup_vs_depth.rst",
            category="Plots",
            subcategory="Speedup vs depth" + (" (data)" if ext == "csv" else ""),
            labels={"plot": stem, "format": ext},
        )
    return report(
        path,
        caption=f"../report/{stem}.rst",
        category="Provenance",
        labels={"file": Path(path).name},
    )


def reference_input():
    """The papers' numbers, when a file is set: an input of every table that shows them."""
    reference = config["tables"].get("reference")
    return {"reference": reference} if reference else {}


def tables_inputs(wildcards):
    """Rollouts; the reward-to-go results when the rerank table has methods (else no model
    is trained; under replay, the corpus ranking's); the papers' numbers when one is set.
    """
    inputs = {"rollouts": PLAN.all_rollouts()}
    if PLAN.rerank_methods() and PLAN.replaying:
        # the model the corpus ranking trains
        inputs["ranking"] = f"{R2G_CORPUS_DIR}/ranking.json"
    elif PLAN.rerank_methods():
        inputs["ranking"] = R2G_RANKING
        inputs["card"] = f"{R2G_DATA}/card.json"
    return {**inputs, **reference_input()}


def kc_table_context(wildcards):
    """What the KernelCompare table's header and reference columns read of params."""
    suite = config["kernelcompare"]["sources"]["suite"]
    return {
        "preset": config["preset"],
        "kernelcompare": config["kernelcompare"],
        "suites": {suite: config["suites"][suite]},
        "tables": {"reference": config["tables"].get("reference")},
    }


def kc_sections(*names):
    """The named kernelcompare sections, as written in params: a KernelCompare rule
    passes the ones its stage reads, so a change there (and only there) reruns it."""
    kc = config["kernelcompare"]
    return {name: kc[name] for name in names if name in kc}
