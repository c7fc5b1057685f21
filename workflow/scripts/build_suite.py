import sys
from pathlib import Path

from maxcode.pipeline import build_suite

sys.stderr = open(snakemake.log[0], "w")  # noqa: SIM115
tasks = build_suite(snakemake.wildcards.suite, snakemake.params.suite, Path(snakemake.output[0]))
print(f"{len(tasks)} tasks written to {snakemake.output[0]}", file=sys.stderr)
