import sys
from pathlib import Path

from maxcode.pipeline import build_r2g_dataset

sys.stderr = open(snakemake.log[0], "w")  # noqa: SIM115
build_r2g_dataset(
    [Path(p) for p in snakemake.input],
    snakemake.params.r2g,
    snakemake.params.gamma,
    Path(snakemake.output.train).parent,
)
