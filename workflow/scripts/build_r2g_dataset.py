import sys
from pathlib import Path

from maxcode.pipeline import build_r2g_dataset

sys.stderr = open(snakemake.log[0], "w")  # noqa: SIM115
card = build_r2g_dataset(
    [Path(p) for p in snakemake.input.rollouts],
    snakemake.params.r2g,
    snakemake.params.gamma,
    [Path(p) for p in snakemake.input.suites],
    Path(snakemake.output.train).parent,
)
print(card, file=sys.stderr)
