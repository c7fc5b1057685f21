import sys
from pathlib import Path

from maxcode.pipeline import train_r2g

sys.stderr = open(snakemake.log[0], "w")  # noqa: SIM115
metrics = train_r2g(
    Path(snakemake.input.train).parent, snakemake.params.r2g, Path(snakemake.output[0])
)
print(metrics, file=sys.stderr)
