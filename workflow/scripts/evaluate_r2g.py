import sys
from pathlib import Path

from maxcode.pipeline import evaluate_r2g

sys.stderr = open(snakemake.log[0], "w")  # noqa: SIM115
evaluate_r2g(
    Path(snakemake.input.model),
    Path(snakemake.input.test).parent,
    snakemake.params.r2g,
    Path(snakemake.output[0]),
)
