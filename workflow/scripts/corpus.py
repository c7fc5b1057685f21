"""The corpus rules: unpack ``snakemake`` and call the stage functions."""

import sys
from pathlib import Path

from maxcode.loader import load
from maxcode.params import CorpusParams, TablesParams, load_r2g
from maxcode.runs.corpus import SourceSpec, import_corpus
from maxcode.stages.r2g import corpus_ranking_stage

sys.stderr = sys.stdout = open(snakemake.log[0], "w")  # noqa: SIM115
corpus = load(CorpusParams, snakemake.params.corpus, "corpus")
if snakemake.rule == "corpus_import":
    card = import_corpus(
        [SourceSpec.parse(s) for s in corpus.sources],
        Path(corpus.kernelbench),
        Path(snakemake.output.corpus).parent,
    )
    print(card["programs"], "programs")
else:
    tables = load(TablesParams, snakemake.params.tables, "tables")
    corpus_ranking_stage(
        Path(snakemake.input.corpus).parent,
        load_r2g(snakemake.params.r2g),
        snakemake.params.gamma,
        Path(snakemake.output.ranking).parent,
        Path(snakemake.output.tables[0]).parent,
        tables.bootstrap_samples,
        tables.confidence,
        Path(tables.reference) if tables.reference else None,
        Path(corpus.measurements) if corpus.measurements else None,
        tuple(corpus.kinds),
        held_out=snakemake.params.held_out,
    )
