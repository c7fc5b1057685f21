"""`maxcode eval runs`' CPU side: resume, KernelBench-format results, agreement and export.

The CUDA evaluator needs a GPU to run a candidate, so these tests pass a small fake
evaluation in its place (the seam ``evaluate_corpus`` takes); the GPU path is the
evaluator's own, measured through the device machine.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from maxcode.evaluate.result import EvalResult, Status, Timing
from maxcode.runs.corpus import Checkout, SourceSpec, import_corpus
from maxcode.runs.evaluate import evaluate_corpus
from maxcode.runs.kernelbench_format import kernelbench_label
from maxcode.runs.layouts import kernelbench_entries
from tests.runs.public_layouts import write_checkout, write_kernel_coder, write_kernelbench_runs


class FakeEvaluation:
    """Marks programs whose text holds '-2' wrong, the rest ok at 2 ms against 4 ms; can stop
    after a number of results, as a kill would."""

    def __init__(self, stop_after: int | None = None):
        self.seen: list[str] = []
        self.stop_after = stop_after

    def __call__(self, items, on_result):
        out = []
        for i, (_task, code) in enumerate(items):
            if self.stop_after is not None and len(self.seen) == self.stop_after:
                raise KeyboardInterrupt
            self.seen.append(code)
            if "-2" in code:
                r = EvalResult(Status.WRONG_ANSWER, reason="max abs err 0.5")
            else:
                r = EvalResult(Status.OK, timing=Timing("cuda_events", "ms", 2.0, 4.0))
            on_result(i, r)
            out.append(r)
        return out


@pytest.fixture
def corpus(tmp_path: Path) -> tuple[Path, Path]:
    checkout = write_checkout(tmp_path / "kb")
    specs = [
        SourceSpec.parse(f"kernelbench-runs:{write_kernelbench_runs(tmp_path / 'ta')}@9202a5c"),
        SourceSpec.parse(f"kernel-coder:{write_kernel_coder(tmp_path / 'kc')}@5a9fb0c"),
    ]
    import_corpus(specs, checkout, tmp_path / "corpus")
    return tmp_path / "corpus", checkout


def test_a_kill_loses_only_what_was_in_flight_and_a_rerun_evaluates_nothing_twice(corpus, tmp_path):
    corpus_dir, _ = corpus
    out = tmp_path / "eval"
    killed = FakeEvaluation(stop_after=3)
    with pytest.raises(KeyboardInterrupt):
        evaluate_corpus(corpus_dir, out, killed, "fake/1", "GPU X", batch=2)
    assert len((out / "results.jsonl").read_text().splitlines()) == 3
    rest = FakeEvaluation()
    summary = evaluate_corpus(corpus_dir, out, rest, "fake/1", "GPU X", batch=2)
    assert not set(killed.seen) & set(rest.seen)
    assert summary["measured"] == summary["sampled"] == len(killed.seen) + len(rest.seen)
    again = FakeEvaluation()
    assert evaluate_corpus(corpus_dir, out, again, "fake/1", "GPU X")["evaluated_now"] == 0
    assert again.seen == []
    other_gpu = FakeEvaluation()
    evaluate_corpus(corpus_dir, out, other_gpu, "fake/1", "GPU Y")
    assert len(other_gpu.seen) == summary["measured"]


def test_run_files_read_back_as_kernelbench_results(corpus, tmp_path):
    corpus_dir, checkout = corpus
    out = tmp_path / "eval"
    evaluate_corpus(
        corpus_dir, out, FakeEvaluation(), "fake/1", "GPU X", checkout=Checkout(checkout)
    )
    run = out / "runs" / "technoabsurdist__KernelBench" / "gemini_level1_run"
    (run / "level_1_problem_1_sample_0_kernel.py").write_text(
        ""
    )  # the reader pairs files and entries
    labels = {f.problem_id: kernelbench_label(e) for f, e in kernelbench_entries(run)}
    assert labels[1].verdict == "ok" and labels[1].speedup == pytest.approx(2.0)
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    # problem 2's reference in that run differs from the checkout's
    assert {r["checkout_differs"] for r in rows if "Relu2" in r["key"]} == {True}


def test_agreement_and_an_export_without_code(corpus, tmp_path):
    corpus_dir, _ = corpus
    out = tmp_path / "eval"
    evaluate_corpus(corpus_dir, out, FakeEvaluation(), "fake/1", "GPU X")
    agreement = json.loads((out / "agreement.json").read_text())
    ta = agreement["technoabsurdist/KernelBench"]
    assert ta["labels"] == 3 and ta["pairs"]["wrong_answer -> wrong_answer"] == 1
    kc = agreement["j1mk1m/Kernel-Coder"]
    assert kc["labels"] == 6  # the two harness errors are not usable labels
    assert kc["pairs"]["compile_error -> ok"] == 2
    export = (out / "measurements.jsonl").read_text()
    assert "ModelNew" not in export
    row = json.loads(export.splitlines()[0])
    assert {"code_hash", "task_hash", "evaluator", "gpu", "status", "speedup"} <= set(row)


def test_the_export_gives_the_pools_the_full_results_give(corpus, tmp_path):
    """A machine without a GPU ranks and replays from the export exactly as from the results."""
    from maxcode.runs.evaluate import read_measurements
    from maxcode.runs.pools import build_pools
    from maxcode.runs.record import read_corpus

    corpus_dir, _ = corpus
    out = tmp_path / "eval"
    evaluate_corpus(corpus_dir, out, FakeEvaluation(), "fake/1", "GPU X")
    records = read_corpus(corpus_dir)
    from_results = build_pools(records, read_measurements(out / "results.jsonl"), published=False)
    from_export = build_pools(
        records, read_measurements(out / "measurements.jsonl"), published=False
    )
    assert from_results and from_export == from_results
    assert any(not measured.correct for pool in from_export for _, measured in pool.members)


def test_a_time_limit_stops_between_batches_and_writes_what_finished(corpus, tmp_path):
    corpus_dir, _ = corpus
    out = tmp_path / "eval"
    first = evaluate_corpus(
        corpus_dir, out, FakeEvaluation(), "fake/1", "GPU X", batch=2, max_seconds=0
    )
    assert first["evaluated_now"] == 2 and first["left_for_a_rerun"] == first["sampled"] - 2
    assert (out / "agreement.json").is_file() and first["measured"] == 2
    rest = evaluate_corpus(corpus_dir, out, FakeEvaluation(), "fake/1", "GPU X", batch=2)
    assert rest["evaluated_now"] == first["left_for_a_rerun"] and rest["left_for_a_rerun"] == 0


def test_a_sample_prefix_mixes_levels_and_sources(corpus):
    from maxcode.runs.evaluate import stratified
    from maxcode.runs.record import read_corpus

    corpus_dir, _ = corpus
    records = read_corpus(corpus_dir)
    sample = stratified(records, 4, seed=0)
    assert len(sample) == 4 and len({r.key for r in sample}) == 4
    assert {r.attempts[0].repo for r in sample} == {
        "j1mk1m/Kernel-Coder",
        "technoabsurdist/KernelBench",
    }
    assert [r.key for r in stratified(records, 4, seed=0)] == [r.key for r in sample]
    assert len(stratified(records, None, seed=0)) == len(records)


def test_a_per_problem_sample_takes_whole_problems_with_their_candidates(corpus):
    from collections import Counter
    from dataclasses import replace

    from maxcode.runs.evaluate import by_problem
    from maxcode.runs.record import read_corpus

    corpus_dir, _ = corpus
    level1 = read_corpus(corpus_dir)
    level2 = [replace(r, problem=replace(r.problem, level=2)) for r in level1]
    records = level1 + level2 + [replace(level1[0], problem=replace(level1[0].problem, level=3))]
    available = Counter(r.problem.key for r in level1 + level2)
    everything = by_problem(records, 2, None, seed=0)
    taken = Counter(r.problem.key for r in everything)
    assert taken == {key: min(2, count) for key, count in available.items()}
    assert max(available.values()) > 2  # the cap was exercised
    problems = list(dict.fromkeys(r.problem for r in everything))
    assert [p.level for p in problems] == [1, 2] * (len(problems) // 2)  # levels alternate
    capped = by_problem(records, 2, 4, seed=0)
    assert capped == everything[: len(capped)] and 3 <= len(capped) <= 4  # never half a problem
    assert all(taken[k] == n for k, n in Counter(r.problem.key for r in capped).items())
    assert [r.key for r in by_problem(list(reversed(records)), 2, None, seed=0)] == [
        r.key for r in everything
    ]
    assert by_problem(records, 2, None, seed=1) != everything


def test_a_per_problem_run_measures_that_sample_and_resumes_it(corpus, tmp_path):
    corpus_dir, _ = corpus
    out = tmp_path / "eval"
    first = FakeEvaluation()
    summary = evaluate_corpus(corpus_dir, out, first, "fake/1", "GPU X", per_problem=1)
    assert summary["sampled"] == summary["measured"] == 3  # the fixture's three problems
    keys = [json.loads(line)["key"] for line in (out / "results.jsonl").read_text().splitlines()]
    assert len({k.split("#")[0] for k in keys}) == 3
    again = FakeEvaluation()
    assert (
        evaluate_corpus(corpus_dir, out, again, "fake/1", "GPU X", per_problem=1)["evaluated_now"]
        == 0
    )


def test_a_problem_list_restricts_the_sample_and_names_an_unknown_problem(corpus, tmp_path):
    from maxcode.errors import CorpusFormatError
    from maxcode.runs.record import read_corpus

    corpus_dir, _ = corpus
    keys = sorted({r.problem.key for r in read_corpus(corpus_dir)})
    chosen = {keys[0]}
    fake = FakeEvaluation()
    summary = evaluate_corpus(
        corpus_dir, tmp_path / "eval", fake, "fake/1", "GPU X", per_problem=9, problems=chosen
    )
    rows = (tmp_path / "eval" / "results.jsonl").read_text().splitlines()
    assert summary["sampled"] == len(rows) >= 1
    assert {json.loads(line)["key"].split("#")[0] for line in rows} == chosen
    with pytest.raises(CorpusFormatError, match=r"L9/none\.py"):
        evaluate_corpus(
            corpus_dir, tmp_path / "e2", fake, "fake/1", "GPU X", problems={"L9/none.py"}
        )


def test_a_problem_list_run_keeps_earlier_samples_in_the_outputs(corpus, tmp_path):
    from maxcode.runs.record import read_corpus

    corpus_dir, _ = corpus
    out = tmp_path / "eval"
    keys = sorted({r.problem.key for r in read_corpus(corpus_dir)})
    evaluate_corpus(corpus_dir, out, FakeEvaluation(), "fake/1", "GPU X", per_problem=1)
    before = len((out / "measurements.jsonl").read_text().splitlines())
    summary = evaluate_corpus(
        corpus_dir, out, FakeEvaluation(), "fake/1", "GPU X", per_problem=9, problems={keys[0]}
    )
    rows = (out / "results.jsonl").read_text().splitlines()
    exported = (out / "measurements.jsonl").read_text().splitlines()
    assert len(exported) == summary["measured"] == len(rows) > before
    assert {json.loads(e)["code_hash"] for e in exported} == {
        json.loads(r)["code_hash"] for r in rows
    }
