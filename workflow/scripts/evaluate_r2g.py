import sys
from pathlib import Path

from maxcode.params import load_r2g
from maxcode.stages.r2g import ranking_stage

sys.stderr = open(snakemake.log[0], "w")  # noqa: SIM115
ranking_stage(
    Path(snakemake.input.model),
    Path(snakemake.input.test).parent,
    load_r2g(snakemake.params.r2g),
    Path(snakemake.output[0]),
)
