import sys
from pathlib import Path

from maxcode.params import load_suite
from maxcode.pipeline import build_suite

sys.stderr = open(snakemake.log[0], "w")  # noqa: SIM115
name = snakemake.wildcards.suite
tasks = build_suite(name, load_suite(name, snakemake.params.suite), Path(snakemake.output[0]))
print(f"{len(tasks)} tasks written to {snakemake.output[0]}", file=sys.stderr)
