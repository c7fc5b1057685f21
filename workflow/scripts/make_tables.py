import sys

from maxcode.pipeline import make_tables

sys.stderr = open(snakemake.log[0], "w")  # noqa: SIM115
make_tables(
    list(snakemake.input.rollouts),
    snakemake.input.get("ranking"),
    snakemake.input.get("card"),
    snakemake.params.tables,
    snakemake.params.preset,
    snakemake.params.llm,
    list(snakemake.output),
    methods=snakemake.params.methods,
    suites=snakemake.params.suites,
    reference=snakemake.input.get("reference"),
    params=snakemake.config,
)
