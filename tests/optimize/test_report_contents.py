"""What report.html says: settings, candidate changes and their parents, pragma warnings,
readable hardware, no winner section when nothing won, a partial report, the file mode."""

from __future__ import annotations

import os
from pathlib import Path

from maxcode.optimize.report import ReportInputs, pragma_changes, write_report
from maxcode.records import provenance
from maxcode.search.config import MethodConfig
from maxcode.search.loop import RunContext, run_search
from maxcode.search.records import CandidateRecord, RunEnd, read_records
from maxcode.tasks.model import Task

from ..search.conftest import EchoCritic, ScriptedEvaluator, ScriptedPolicy

ORIGINAL = "#include <iostream>\nint main(){ std::cout << 1 << std::endl; }\n"
PRAGMA = '#pragma GCC target("avx2")\n'


def one_step_run(tmp_path: Path, script: list[list[str]]) -> list:
    task = Task(task_id="prog", suite="user", language="cpp", reference_source=ORIGINAL)
    method = MethodConfig(name="maxcode", depth=len(script), k=len(script[0]), critique=True)
    ctx = RunContext(
        task,
        method,
        0,
        ScriptedPolicy(script),
        ScriptedEvaluator(),
        EchoCritic(),
        provenance=provenance({}),
    )
    run_search(ctx, tmp_path / "run.jsonl")
    return read_records(tmp_path / "run.jsonl")


def report(tmp_path: Path, records: list, **kw) -> str:
    inputs = ReportInputs(ORIGINAL, "prog.cpp", {"compile flags": "g++ -O2"}, "summary", **kw)
    write_report(tmp_path / "report.html", records, inputs)
    return (tmp_path / "report.html").read_text()


def test_nothing_won_means_no_winning_change_and_hardware_reads_as_text(tmp_path):
    records = one_step_run(tmp_path, [["ok:0.9 slower", "wrong"]])
    html = report(tmp_path, records)
    assert "Winning change" not in html and 'id="diff"' not in html
    hardware = html.split("<th>hardware</th><td>")[1].split("</td>")[0]
    assert "{" not in hardware and "cores" in hardware
    assert "<th>compile flags</th><td>g++ -O2</td>" in html


def test_winner_names_its_changes_parent_and_pragma_warning(tmp_path):
    records = one_step_run(tmp_path, [[PRAGMA + "ok:2.0 fast"]])
    best = next(r for r in records if isinstance(r, CandidateRecord))
    html = report(tmp_path, records, winner=best, best_found=best)
    assert "<h2>Winning change</h2>" in html
    assert "from reference" in html  # the candidate's parent
    assert html.count("instruction-set pragma") == 2  # in its row and beside the diff
    assert "not portable" in html


def test_pragmas_the_original_already_has_are_not_flagged():
    assert pragma_changes(PRAGMA + ORIGINAL, PRAGMA + ORIGINAL + "//x") == []
    [note] = pragma_changes(ORIGINAL, '#pragma GCC optimize("O3")\n' + ORIGINAL)
    assert "changes code generation" in note and "portable" not in note


def test_a_partial_run_gets_a_report_that_says_so(tmp_path):
    records = one_step_run(tmp_path, [["ok:1.5 a"], ["ok:1.6 b"]])
    partial = [r for r in records if not isinstance(r, RunEnd)]
    html = report(tmp_path, partial)
    assert "<th>stopped by</th><td>interrupted</td>" in html
    assert 'id="speedup-plot"' in html


def test_every_output_has_the_mode_of_run_jsonl(tmp_path):
    records = one_step_run(tmp_path, [["ok:1.5 a"]])
    report(tmp_path, records)
    umask = os.umask(0o022)
    os.umask(umask)
    mode = (tmp_path / "report.html").stat().st_mode & 0o777
    assert mode == (tmp_path / "run.jsonl").stat().st_mode & 0o777 == 0o666 & ~umask
