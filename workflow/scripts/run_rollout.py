import sys
from pathlib import Path

from maxcode.pipeline import run_rollout

sys.stderr = open(snakemake.log[0], "w")  # noqa: SIM115
end = run_rollout(
    suite_dir=Path(snakemake.input.suite),
    task_id=snakemake.wildcards.task,
    method=snakemake.params.method,
    seed=int(snakemake.wildcards.seed),
    llm=snakemake.params.llm,
    evaluation=snakemake.params.evaluation,
    inflight=Path(snakemake.params.inflight),
    output=Path(snakemake.output[0]),
    cache_dir=Path(snakemake.params.cache_dir),
    # Namedlist answers `in` by value, so ask its keys.
    model_dir=Path(snakemake.input.model) if "model" in snakemake.input.keys() else None,  # noqa: SIM118
    params=snakemake.config,
    corpus=Path(snakemake.input.corpus).parent if "corpus" in snakemake.input.keys() else None,  # noqa: SIM118
)
print(
    f"best reward {end['best_reward']:.3f} after {end['evaluations']} evaluations", file=sys.stderr
)
