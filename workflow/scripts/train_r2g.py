import sys
from pathlib import Path

from maxcode.params import load_r2g
from maxcode.stages.r2g import train_stage

sys.stderr = open(snakemake.log[0], "w")  # noqa: SIM115
metrics = train_stage(
    Path(snakemake.input.train).parent, load_r2g(snakemake.params.r2g), Path(snakemake.output[0])
)
print(metrics, file=sys.stderr)
