"""`maxcode runs import` on tiny copies of the four public layouts (tests/runs/public_layouts.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from maxcode.cli import app
from maxcode.errors import CorpusFormatError
from maxcode.runs.corpus import SourceSpec, import_corpus
from maxcode.runs.record import read_corpus
from tests.runs.public_layouts import (
    write_agentic,
    write_checkout,
    write_cuda_l1,
    write_kernel_coder,
    write_kernelbench_runs,
)


@pytest.fixture
def sources(tmp_path: Path) -> tuple[list[SourceSpec], Path]:
    checkout = write_checkout(tmp_path / "kb")
    specs = [
        SourceSpec.parse(f"kernelbench-runs:{write_kernelbench_runs(tmp_path / 'ta')}@9202a5c"),
        SourceSpec.parse(f"kernel-coder:{write_kernel_coder(tmp_path / 'kc')}@5a9fb0c"),
        SourceSpec.parse(f"kernelbench-agentic:{write_agentic(tmp_path / 'ag')}@6b0549d"),
        SourceSpec.parse(f"cuda-l1:{write_cuda_l1(tmp_path / 'l1')}@51e8356"),
    ]
    return specs, checkout


def test_every_layout_is_read_and_duplicates_merge_with_every_source(sources, tmp_path):
    specs, checkout = sources
    card = import_corpus(specs, checkout, tmp_path / "corpus")
    records = read_corpus(tmp_path / "corpus")
    # 3 + 8 + 3 + 1 attempts; the Kernel-Coder iterative run's first program is the
    # technoabsurdist program of the same problem, and both empty kernels are one program
    assert card["attempts"] == 15
    assert card["programs"] == 13 and card["duplicates_merged"] == 2
    shared = next(r for r in records if len(r.attempts) == 2 and r.code.strip())
    assert {a.repo for a in shared.attempts} == {
        "technoabsurdist/KernelBench",
        "j1mk1m/Kernel-Coder",
    }
    assert shared.problem.file_name == "1_Relu1.py" and shared.problem.level == 1
    assert {a.commit for a in shared.attempts} == {"9202a5c", "5a9fb0c"}


def test_harness_errors_are_kept_unusable_and_counted(sources, tmp_path):
    specs, checkout = sources
    card = import_corpus(specs, checkout, tmp_path / "corpus")
    kc = card["by_source"]["j1mk1m/Kernel-Coder"]
    assert kc["per_label"] == {"compile_error": 2, "harness_error": 2, "ok": 4}
    assert kc["unusable_labels"] == 2
    records = read_corpus(tmp_path / "corpus" / "corpus.jsonl")
    harness = [a for r in records for a in r.attempts if a.label.verdict == "harness_error"]
    assert all(not a.label.usable and a.label.correct is None for a in harness)


def test_reference_differences_against_the_checkout(sources, tmp_path):
    specs, checkout = sources
    card = import_corpus(specs, checkout, tmp_path / "corpus")
    ta = card["by_source"]["technoabsurdist/KernelBench"]["reference_differs"]
    assert ta == {"differs": 1, "same": 2}
    assert card["by_source"]["j1mk1m/Kernel-Coder"]["reference_differs"] == {"not published": 8}
    assert card["by_source"]["deepreinforce-ai/CUDA-L1"]["reference_differs"] == {"same": 1}


def test_multi_turn_attempts_carry_what_they_saw(sources, tmp_path):
    specs, checkout = sources
    import_corpus(specs, checkout, tmp_path / "corpus")
    turns = sorted(
        (
            a
            for r in read_corpus(tmp_path / "corpus")
            for a in r.attempts
            if a.layout == "kernelbench-agentic"
        ),
        key=lambda a: a.turn,
    )
    assert [a.turn for a in turns] == [0, 1, 2]
    assert turns[0].feedback == "" and turns[0].diagnosis == ""
    assert turns[2].feedback == "Evaluation result (turn 1): correctness=False"
    assert turns[2].diagnosis == "diagnosis of turn 1"
    assert turns[2].label.speedup == pytest.approx(3.0)
    refined = sorted(
        (a for r in read_corpus(tmp_path / "corpus") for a in r.attempts if a.run == "iter_level1"),
        key=lambda a: a.turn,
    )
    assert refined[1].feedback.startswith("previous attempt: ok")
    assert refined[2].feedback.startswith("previous attempt: compile_error")


def test_extraction_is_checked_on_every_raw_response(sources, tmp_path):
    specs, checkout = sources
    card = import_corpus(specs, checkout, tmp_path / "corpus")
    kc = card["by_source"]["j1mk1m/Kernel-Coder"]["extraction"]
    assert kc["raw_responses"] == 8 and kc["agree"] == 8
    assert kc["kinds"] == {"neither has code": 2, "same": 6}
    assert card["by_source"]["pango0/KernelBench-Agentic"]["extraction"]["kinds"] == {"same": 3}
    assert "technoabsurdist/KernelBench" not in [
        repo for repo, s in card["by_source"].items() if s["extraction"]["raw_responses"]
    ]


def test_card_counts_problems_with_enough_programs(sources, tmp_path):
    specs, checkout = sources
    card = import_corpus(specs, checkout, tmp_path / "corpus")
    assert card["problems_per_level"]["level1"] == {
        "problems": 3,
        "with_at_least_4": 1,
        "with_at_least_8": 1,
    }
    md = (tmp_path / "corpus" / "card.md").read_text()
    assert "| level1 | 3 | 1 | 1 |" in md
    assert json.loads((tmp_path / "corpus" / "card.json").read_text()) == card


def test_cli_imports_and_rejects_bad_sources_in_one_line(sources, tmp_path):
    specs, checkout = sources
    runner = CliRunner()
    args = ["runs", "import", "--kernelbench", str(checkout), "--out", str(tmp_path / "c")]
    ok = runner.invoke(app, [*args, "--source", f"cuda-l1:{specs[3].path}"])
    assert ok.exit_code == 0, ok.output
    assert "1 distinct programs" in ok.output
    with pytest.raises(CorpusFormatError, match="LAYOUT:PATH"):
        SourceSpec.parse("nope:/tmp")
    with pytest.raises(CorpusFormatError, match="no level1/ folder"):
        import_corpus(specs, tmp_path, tmp_path / "c2")


def test_a_build_failure_filed_as_a_runtime_error_is_a_compile_error():
    """load_inline builds while the module loads, so KernelBench files a failed build under
    runtime_error; a crash at run time stays a runtime error."""
    from maxcode.runs.kernelbench_format import kernelbench_label

    build = kernelbench_label(
        {
            "compiled": False,
            "correctness": False,
            "metadata": {
                "runtime_error": "Error building extension 'conv1d_cuda': [1/3] c++ -c main.cpp\n"
                "main.cpp:17:5: error: expected primary-expression before 'conv1d_forward'"
            },
        }
    )
    crash = kernelbench_label(
        {
            "compiled": True,
            "correctness": False,
            "metadata": {"runtime_error": "CUDA error: an illegal memory access"},
        }
    )
    assert (build.verdict, build.compiled) == ("compile_error", False)
    assert "main.cpp:17:5: error: expected primary-expression" in build.error
    assert crash.verdict == "runtime_error"
