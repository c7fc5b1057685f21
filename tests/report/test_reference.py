"""The papers' numbers: the shipped file is well formed and lands in real columns; a bad
file is refused by entry and field; the column renders in Markdown, CSV and LaTeX."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
import yaml

from maxcode.errors import ConfigError, ReferenceFormatError
from maxcode.evaluate.result import EvalResult, Status, Timing
from maxcode.kernelcompare.table import COLUMNS as KC_COLUMNS
from maxcode.kernelcompare.table import kernelcompare_table, load_rows
from maxcode.params import Params
from maxcode.report.config import TablesParams
from maxcode.report.reference import (
    REFERENCE_PREFIX,
    check_suite_benchmarks,
    kernelcompare_context,
    load_reference,
)
from maxcode.report.runs import read_runs
from maxcode.report.tables import method_table, write_all

from .test_tables import rollouts  # noqa: F401  (the fixture)

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "data" / "paper_reference.yaml"

SMALL = {
    "benchmarks": {"pie": "PIE (C++)"},
    "sources": {
        "paper": {"title": "A Paper", "cite": "Someone 2026", "where": "Table 2", "setup": "GPU X"}
    },
    "values": [
        {
            "table": "main",
            "method": "fast-method",
            "benchmark": "pie",
            "column": "mean best speedup",
            "value": 1.74,
            "source": "paper",
            "note": "ranked among 4 methods",
        }
    ],
}


def write(tmp_path: Path, doc: dict) -> Path:
    path = tmp_path / "ref.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_shipped_values_name_real_columns_methods_and_sources(rollouts, tmp_path):  # noqa: F811
    """A typo in the file would silently hide a number; every entry must land in a cell."""
    book = load_reference(SHIPPED)
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    kc_rule = (REPO / "workflow" / "rules" / "kernelcompare.smk").read_text()
    assert len(book.entries) >= 10
    for entry in book.entries:
        if entry.table == "kernelcompare":  # rows named by KC_ROWS in kernelcompare.smk
            assert f'"{entry.method}"' in kc_rule, entry
        else:
            assert entry.method in params["tables"][entry.table], entry
        assert entry.source in book.sources
    columns = method_table("t", read_runs(rollouts), ["fast-method"], {}, False, 100, 0.95).columns
    for table in ("main", "rerank"):
        assert set(book.columns(table)) <= set(columns), table
    assert set(book.columns("kernelcompare")) <= set(KC_COLUMNS)
    # spot checks against the sources (MaxCode digest; KernelBench L1 and PIE)
    assert (
        book.lookup("main", "cuda-llm+maxcode", "kernelbench_l1", "mean best speedup").value == 3.17
    )
    assert book.lookup("main", "cuda-llm", "pie", "avg rank").value == 2.05


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d["values"][0].pop("column"), r"values\[0\]: .*missing \['column'\]"),
        (
            lambda d: d["values"][0].update(colour=1),
            r"values\[0\]: unknown field\(s\) \['colour'\]",
        ),
        (lambda d: d["values"][0].update(source="other"), r"values\[0\]\.source: 'other'"),
        (lambda d: d["values"][0].update(benchmark="kb"), r"values\[0\]\.benchmark: 'kb'"),
        (lambda d: d["values"][0].update(value="1.7x"), r"values\[0\]\.value: '1.7x' is not"),
        (lambda d: d["values"].append(dict(d["values"][0])), r"values\[1\]: a second value"),
        (lambda d: d["sources"]["paper"].pop("where"), r"sources\.paper: missing \['where'\]"),
    ],
)
def test_malformed_file_is_refused_by_entry_and_field(tmp_path, change, message):
    doc = yaml.safe_load(yaml.safe_dump(SMALL))
    change(doc)
    with pytest.raises(ReferenceFormatError, match=message) as err:
        load_reference(write(tmp_path, doc))
    assert "ref.yaml" in str(err.value)


def test_missing_file_and_unknown_benchmark_say_what_to_set(tmp_path):
    with pytest.raises(ReferenceFormatError, match=r"tables\.reference: .*nope\.yaml"):
        load_reference(tmp_path / "nope.yaml")
    book = load_reference(write(tmp_path, SMALL))
    with pytest.raises(ReferenceFormatError, match=r"suites\.mine\.paper_benchmark: 'PIE'"):
        check_suite_benchmarks(book, {"mine": {"kind": "pie", "paper_benchmark": "PIE"}})


def test_params_validation_checks_the_reference(tmp_path):
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    params["tables"]["reference"] = str(SHIPPED)
    params["suites"]["cpp_builtin"]["paper_benchmark"] = "kernelbench_l3"
    with pytest.raises(
        ConfigError, match=r"suites\.cpp_builtin\.paper_benchmark: 'kernelbench_l3'"
    ):
        Params.from_dict(params)


def test_reference_column_in_every_format(rollouts, tmp_path):  # noqa: F811
    book = load_reference(write(tmp_path, SMALL))
    context = {"preset": "offline", "reference": book, "benchmarks": {"s": "pie"}}
    tables = TablesParams(main=("slow-method", "fast-method"))
    write_all(
        read_runs(rollouts), tables, {}, {}, context, tmp_path / "t", tmp_path / "p", tmp_path / "m"
    )
    column = REFERENCE_PREFIX + "mean best speedup"
    rows = {r["method"]: r for r in csv.DictReader((tmp_path / "t/main.csv").open())}
    assert rows["fast-method"][column] == "1.74"
    assert rows["slow-method"][column] == ""  # the paper gives no number for this row
    md = (tmp_path / "t/main.md").read_text()
    assert f"| {column} |" in md and "| 1.740 |" in md and "| n/a |" in md
    assert "not a like-for-like comparison" in md
    assert "reference benchmark per suite: s -> PIE (C++)" in md
    assert "reference source [paper]: A Paper, Someone 2026; Table 2; GPU X" in md
    assert "reference note (fast-method, pie): ranked among 4 methods" in md
    tex = (tmp_path / "t/main.tex").read_text()
    assert "reference: mean best speedup" in tex and "& 1.740 \\\\" in tex
    # the ablation table has no published numbers, so no reference column
    assert "reference" not in (tmp_path / "t/ablation.csv").read_text().splitlines()[0]


def test_suite_without_a_benchmark_gets_no_numbers(rollouts, tmp_path):  # noqa: F811
    book = load_reference(write(tmp_path, SMALL))
    context = {"reference": book, "benchmarks": {"s": None}}
    table = method_table(
        "t", read_runs(rollouts), ["fast-method"], context, False, 100, 0.95, "main"
    )
    assert table.columns[-1] == REFERENCE_PREFIX + "mean best speedup"
    assert table.rows[0][-1] != table.rows[0][-1]  # NaN: no number shown
    assert any("none (set suites.<name>.paper_benchmark" in n for n in table.notes)


def test_kernelcompare_table_states_its_context_and_the_reports_numbers(tmp_path):
    results = {}
    for stage, correct in (("base model", 0), ("SFT", 1), ("SFT then GRPO", 2)):
        lines = []
        for i in range(2):
            status = Status.OK if i < correct else Status.WRONG_ANSWER
            timing = Timing("cuda_events", "ms", 0.5, 1.0) if status is Status.OK else None
            result = EvalResult(status, timing=timing).to_dict()
            lines.append(json.dumps({"task_id": f"t{i}", "model": "m", "result": result}) + "\n")
        results[stage] = tmp_path / f"{len(results)}.jsonl"
        results[stage].write_text("".join(lines))
    params = {
        "preset": "paper",
        "suites": {"kb": {"kind": "kernelbench", "paper_benchmark": "kernelbench_l1"}},
        "tables": {"reference": str(SHIPPED)},
        "kernelcompare": {"sources": {"suite": "kb"}, "model": {"name_or_path": "ckpt/ds7b"}},
    }
    notes, extra, meta = kernelcompare_context(params, list(results))
    assert extra == {"reference: Correctness": ["6%", "10%", "15%"]}
    kernelcompare_table(load_rows(results), notes, extra, meta).write(tmp_path, "kc")
    md = (tmp_path / "kc.md").read_text()
    assert "- preset: paper" in md and "ckpt/ds7b" in md and "- hardware: " in md
    assert "| SFT then GRPO | m | 2 | 2 | 2 | 100% | 2 | 2 | 2.00x | 15% |" in md
    assert "KernelCompare: Optimizing CUDA Kernel Generation" in md
    rows = list(csv.DictReader((tmp_path / "kc.csv").open()))
    assert [r["reference: Correctness"] for r in rows] == ["6%", "10%", "15%"]
    assert rows[0]["preset"] == "paper" and rows[0]["models"] == "ckpt/ds7b"
    assert "% preset: paper" in (tmp_path / "kc.tex").read_text()
    assert "<td>15%</td>" in (tmp_path / "kc.html").read_text()  # the report's view too
    # a suite shown next to no benchmark gets the column, with no numbers
    params["suites"]["kb"]["paper_benchmark"] = None
    assert kernelcompare_context(params, list(results))[1] == {
        "reference: Correctness": ["-", "-", "-"]
    }
