import sys
from pathlib import Path

from maxcode.params import load_r2g
from maxcode.stages.r2g import dataset_stage

sys.stderr = open(snakemake.log[0], "w")  # noqa: SIM115
card = dataset_stage(
    [Path(p) for p in snakemake.input.rollouts],
    load_r2g(snakemake.params.r2g),
    snakemake.params.gamma,
    [Path(p) for p in snakemake.input.suites],
    Path(snakemake.output.train).parent,
)
print(card, file=sys.stderr)
