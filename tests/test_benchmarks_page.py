"""docs/benchmarks.md is what benchmarks/report.py makes of benchmarks/results/."""

import json
import re
import shlex
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import report  # noqa: E402


def test_the_benchmarks_page_is_up_to_date_with_the_result_jsons():
    assert report.main(["--check"]) == 0, "run: python3 benchmarks/report.py"


def _result(path: Path, date: str, value: float) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {"benchmark": "b", "date": date, "commit": "abc", "hardware": "H", "command": "c"}
    record["headline"] = [{"label": "speed", "value": value, "unit": "x"}]
    path.write_text(json.dumps(record))


def test_the_page_shows_the_newest_result_and_links_its_json(tmp_path):
    _result(tmp_path / "r/b/old.json", "2026-01-01T00:00:00Z", 1.5)
    _result(tmp_path / "r/b/new.json", "2026-02-01T00:00:00Z", 2.5)
    out = tmp_path / "page.md"
    assert report.main(["--results", str(tmp_path / "r"), "--out", str(out)]) == 0
    text = out.read_text()
    assert "2.5 x" in text and "(r/b/new.json)" in text
    assert "1.5 x" not in text
    assert report.main(["--results", str(tmp_path / "r"), "--out", str(out), "--check"]) == 0
    _result(tmp_path / "r/b/newer.json", "2026-03-01T00:00:00Z", 3.5)
    assert report.main(["--results", str(tmp_path / "r"), "--out", str(out), "--check"]) == 1


def test_a_result_without_its_provenance_is_named_and_refused(tmp_path, capsys):
    bad = tmp_path / "r/b/x.json"
    bad.parent.mkdir(parents=True)
    bad.write_text(json.dumps({"benchmark": "b", "headline": []}))
    assert report.main(["--results", str(tmp_path / "r"), "--out", str(tmp_path / "p.md")]) == 2
    err = capsys.readouterr().err
    assert str(bad) in err and "commit" in err


@pytest.mark.parametrize("field", ["commit", "hardware", "command"])
def test_every_stored_result_names_its_commit_hardware_and_command(field):
    for path in (ROOT / "benchmarks" / "results").glob("*/*.json"):
        assert json.loads(path.read_text()).get(field), f"{path}: no {field}"


def test_a_written_result_carries_its_provenance_and_goes_on_the_page(tmp_path):
    import result_json

    path = result_json.write_result(
        "b", {"x": 1}, [result_json.headline("speed", 2.5, "x")], tmp_path / "r/b/one.json"
    )
    record = json.loads(path.read_text())
    assert record["data"] == {"x": 1} and record["benchmark"] == "b"
    assert record["commit"] != "unknown" and "cores" in record["hardware"]
    # the command line of the process that wrote it (a pytest worker's is "-c")
    assert record["command"] == shlex.join([Path(sys.argv[0]).as_posix(), *sys.argv[1:]])
    out = tmp_path / "page.md"
    assert report.main(["--results", str(tmp_path / "r"), "--out", str(out)]) == 0
    assert "| b | speed | 2.5 x |" in out.read_text()


def test_a_merge_of_runs_made_elsewhere_names_their_hardware_first(tmp_path):
    import result_json

    path = result_json.write_result(
        "b", {}, [], tmp_path / "m.json", measured_on="2x NVIDIA H200, 32 cores"
    )
    hardware = json.loads(path.read_text())["hardware"]
    assert hardware.startswith("2x NVIDIA H200, 32 cores (merged on ")
    assert hardware.endswith(f"{result_json.hardware()})")


def test_every_stored_result_reruns_with_a_cli_that_exists():
    """A script merged into another CLI leaves results naming it: the page's rerun command
    must name one that is there, so removing a script needs an entry in RENAMED."""
    for old in report.RENAMED:
        assert not (ROOT / "benchmarks" / old).exists(), f"{old} exists: drop it from RENAMED"
    for path in (ROOT / "benchmarks" / "results").glob("*/*.json"):
        command = report.rerun_command(json.loads(path.read_text())["command"])
        for script in re.findall(r"benchmarks/(\w+\.(?:py|sh))", command):
            assert (ROOT / "benchmarks" / script).is_file(), f"{path}: {command}"


def test_a_merged_script_is_rerun_through_the_cli_that_took_it_over():
    old = "python3 benchmarks/bench_eval_processes.py --task t.py --cache-dir c a.py b.py"
    assert report.rerun_command(old) == (
        "python3 benchmarks/bench_cuda_eval.py --section processes --task t.py --cache-dir c a.py b.py"
    )
    assert report.rerun_command("benchmarks/bench_optimize_confirm.py") == (
        "benchmarks/bench_optimize.py confirm"
    )
    assert report.rerun_command("benchmarks/bench_real_cuda.py -n 64") == (
        "benchmarks/bench_real_cuda.py -n 64"
    )
