"""The KernelBench run-folder reader (benchmarks/public_candidates.py) on a run folder written here."""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

import pytest
from public_candidates import (
    CorpusError,
    Label,
    agrees,
    disagreement_cause,
    label_from_entry,
    load_run,
    load_runs,
    same_gpu_cause,
    stratified_sample,
)

PROBLEM = """import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)

def get_inputs():
    return [torch.rand(16, {n})]

def get_init_inputs():
    return []
"""

ENTRIES = {
    "ok": {"compiled": True, "correctness": True, "runtime": 1.5, "metadata": {}},
    "compile_error": {
        "compiled": False,
        "correctness": False,
        "metadata": {"compilation_error": "Error building extension 'fused_op'\nnvcc ..."},
    },
    "runtime_error": {
        "compiled": True,
        "correctness": False,
        "metadata": {"runtime_error": "CUDA out of memory. Tried to allocate 1.50 GiB"},
    },
    "wrong_answer": {
        "compiled": True,
        "correctness": False,
        "metadata": {"correctness_issue": "Output mismatch", "max_difference": "['0.5']"},
    },
}


def _write_run(root: Path, name: str, level: int, verdicts: list[str]) -> None:
    run = root / "runs" / name
    run.mkdir(parents=True)
    results = {}
    for pid, verdict in enumerate(verdicts, start=1):
        (run / f"level_{level}_problem_{pid}_sample_0_kernel.py").write_text(f"# {name} {pid}\n")
        results[str(pid)] = {
            "sample_id": 0,
            **ENTRIES[verdict],
            "metadata": {"hardware": "NVIDIA A100-SXM4-40GB", **ENTRIES[verdict]["metadata"]},
        }
    (run / "eval_results.json").write_text(json.dumps(results))
    for copy, n in (("problems", 8), ("upstream", 8 if level == 2 else 9)):
        folder = root / copy / f"level{level}"
        folder.mkdir(parents=True, exist_ok=True)
        for pid in range(1, len(verdicts) + 1):
            (folder / f"{pid}_Op{pid}.py").write_text(PROBLEM.format(n=n))


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    verdicts = ["ok", "compile_error", "runtime_error", "wrong_answer"] * 3
    _write_run(tmp_path, "a_level1_run", 1, verdicts)
    _write_run(tmp_path, "b_level1_run", 1, verdicts[::-1])
    _write_run(tmp_path, "c_level2_run", 2, verdicts)
    return tmp_path


def test_labels_map_to_verdict_classes_with_the_first_error_line():
    assert label_from_entry(ENTRIES["ok"]).runtime_ms == 1.5
    label = label_from_entry(ENTRIES["compile_error"])
    assert (label.verdict, label.error) == ("compile_error", "Error building extension 'fused_op'")
    assert label_from_entry(ENTRIES["wrong_answer"]).verdict == "wrong_answer"
    assert label_from_entry(ENTRIES["runtime_error"]).runtime_ms is None
    # KernelBench marks a CUDA error while loading as not compiled: it is a crash
    crash = {
        "compiled": False,
        "correctness": False,
        "metadata": {"cuda_error": "illegal memory access"},
    }
    assert label_from_entry(crash).verdict == "runtime_error"


def test_run_folder_reads_kernels_labels_and_problem_copies(corpus: Path):
    cands = load_run(corpus / "runs" / "a_level1_run", corpus / "problems", corpus / "upstream")
    assert [c.problem_id for c in cands] == list(range(1, 13))
    first = cands[0]
    assert first.key == "a_level1_run/L1/P1"
    assert first.label.hardware == "NVIDIA A100-SXM4-40GB"
    assert first.source == "# a_level1_run 1\n"
    assert first.task().metadata["problem_id"] == 1
    assert first.differs_from_upstream is True  # level 1's upstream copy has other sizes
    level2 = load_run(corpus / "runs" / "c_level2_run", corpus / "problems", corpus / "upstream")
    assert not any(c.differs_from_upstream for c in level2)
    assert (
        load_run(corpus / "runs" / "c_level2_run", corpus / "problems")[0].differs_from_upstream
        is None
    )


def test_bad_corpus_paths_name_the_path_and_the_fix(corpus: Path):
    with pytest.raises(CorpusError, match=r"no such run folder.*a_level1_run"):
        load_runs(corpus / "runs", ["nope"], corpus / "problems")
    with pytest.raises(CorpusError, match=r"level1: no problem file '\d+_"):
        load_run(corpus / "runs" / "a_level1_run", corpus / "elsewhere")
    (corpus / "runs" / "a_level1_run" / "eval_results.json").write_text("{")
    with pytest.raises(CorpusError, match=r"eval_results\.json: not JSON"):
        load_run(corpus / "runs" / "a_level1_run", corpus / "problems")


def test_sample_is_stratified_deterministic_and_one_per_problem(corpus: Path):
    runs = ["a_level1_run", "b_level1_run", "c_level2_run"]
    cands = load_runs(corpus / "runs", runs, corpus / "problems")
    sample = stratified_sample(cands, 16)
    assert len(sample) == 16
    assert sample == stratified_sample(list(reversed(cands)), 16)  # listing order does not matter
    assert stratified_sample(cands, 16, seed=1) != sample
    # one round over the 12 (level, verdict, run) strata: every label class of every run
    first_round = stratified_sample(cands, 12)
    assert Counter((c.label.verdict, c.run) for c in first_round) == Counter(
        {(v, r): 1 for v in ("ok", "compile_error", "runtime_error", "wrong_answer") for r in runs}
    )
    assert {c.run for c in sample} == set(runs)
    # any prefix mixes labels and levels (a short run or KernelBench's harness takes one)
    assert len({c.label.verdict for c in sample[:4]}) == 4
    assert {c.level for c in sample[:8]} == {1, 2}
    assert len({(c.level, c.problem_id) for c in sample}) == 16
    level2 = stratified_sample(cands, 16, levels=(2,))
    assert len(level2) == 12 and all(c.level == 2 for c in level2)
    assert len(stratified_sample(cands, 100)) == 24  # 12 problems per level at most


BN_PROBLEM = "self.bn = nn.BatchNorm2d(16)\n"
A100 = "NVIDIA A100-SXM4-40GB"


def _label(verdict: str, error: str = "") -> Label:
    return Label(verdict, error, A100, None)


@pytest.mark.parametrize(
    ("problem", "label", "status", "reason", "cause"),
    [
        (PROBLEM, _label("ok"), "rejected", "result_reuse: output reused", "hack"),
        (PROBLEM, _label("ok"), "timeout", "call took 31 s", "timeout"),
        (
            PROBLEM,
            _label("runtime_error", "CUDA out of memory. Tried to allocate 1.50 GiB"),
            "ok",
            "",
            "labels' GPU memory",
        ),
        (
            PROBLEM,
            _label(
                "runtime_error",
                "CUDA error: no kernel image is available for execution on the device",
            ),
            "ok",
            "",
            "labels' environment",
        ),
        (
            PROBLEM,
            _label("compile_error", "Error building extension 'fused_op'"),
            "ok",
            "",
            "labels' environment",
        ),
        (
            PROBLEM,
            _label("compile_error", "Error building extension 'fused_op': [1/3] nvcc error"),
            "ok",
            "",
            "other",
        ),
        (
            PROBLEM,
            _label(
                "compile_error",
                "Error building extension 'fused_op': cuda.cu(119): error: identifier \"C10_CUDA_KERNEL_LAUNCH_CHECK\" is undefined",
            ),
            "ok",
            "",
            "labels' environment",
        ),
        (
            PROBLEM,
            _label("ok"),
            "runtime_error",
            "evaluation failed: CUDA out of memory",
            "evaluator memory",
        ),
        (BN_PROBLEM, _label("wrong_answer", "Output mismatch"), "ok", "", "semantics"),
        (
            BN_PROBLEM,
            _label("ok"),
            "wrong_answer",
            "trial 0: output 0: 3 of 9 elements outside",
            "semantics",
        ),
        (
            PROBLEM,
            _label("ok"),
            "wrong_answer",
            "trial 0: output 0: 5 of 10 elements outside atol=0.0001 rtol=0.0001, max abs err 0.003, max rel err 0.1",
            "tolerance version",
        ),
        (
            PROBLEM,
            _label("ok"),
            "wrong_answer",
            "trial 0: output 0: 5 of 10 elements outside atol=0.0001 rtol=0.0001, max abs err 0.5, max rel err 0.1",
            "other",
        ),
        (
            PROBLEM,
            _label("ok"),
            "wrong_answer",
            "trial 0: output 0: 5 of 10 elements outside atol=0.01 rtol=0.01, max abs err 0.003, max rel err 9",
            "other",
        ),
    ],
)
def test_disagreements_get_the_cause_their_evidence_shows(problem, label, status, reason, cause):
    assert not agrees(label.verdict, status)
    assert disagreement_cause(problem, label, status, reason) == cause


def test_a_build_failure_is_labelled_by_its_first_compiler_diagnostic():
    log = (
        "Error building extension 'fused_op': [1/3] /usr/bin/nvcc -c /home/u/cache/fused_op/cuda.cu -o cuda.cuda.o \n"
        '/home/u/cache/fused_op/cuda.cu(57): error: namespace "thrust" has no member "device_ptr"\n'
        "1 error detected in the compilation of cuda.cu"
    )
    entry = {"compiled": False, "correctness": False, "metadata": {"compilation_error": log}}
    assert label_from_entry(entry).error == (
        'Error building extension \'fused_op\': cuda.cu(57): error: namespace "thrust" has no member "device_ptr"'
    )


def test_only_the_same_class_agrees():
    assert agrees("ok", "ok") and agrees("compile_error", "compile_error")
    assert not agrees("runtime_error", "memory_limit")


def test_bench_overrides_are_typed_and_a_bad_one_exits_2_with_one_line(corpus: Path, capsys):
    from bench_real_cuda import main, parse_overrides

    assert parse_overrides(["timing_trials=50", "flush_l2=false", "cuda_arch=9.0"]) == {
        "timing_trials": 50,
        "flush_l2": False,
        "cuda_arch": "9.0",
    }
    base = ["--runs-dir", str(corpus / "runs"), "--runs", "a_level1_run", "--problems"]
    assert main([*base, str(corpus / "problems"), "--set", "no_such_key=1"]) == 2
    assert main([*base, str(corpus / "missing"), "--dry-run"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and "no_such_key" in err[0] and "--problems" in err[1]
    assert main([*base, str(corpus / "problems"), "--dry-run", "-n", "4"]) == 0
    assert "4 candidates of 12" in capsys.readouterr().out


def test_bench_only_keeps_the_named_candidates_and_rejects_unknown_keys(
    corpus: Path, tmp_path: Path, capsys
):
    from bench_real_cuda import main

    base = ["--runs-dir", str(corpus / "runs"), "--runs", "a_level1_run", "--problems"]
    base += [str(corpus / "problems"), "--dry-run", "-n", "4", "--json", str(tmp_path / "r.json")]
    assert main(base) == 0
    written = json.loads((tmp_path / "r.json").read_text())
    assert written["benchmark"] == "cuda-real-candidates" and written["commit"]
    keys = [row["candidate"] for row in written["data"]["sample"]]
    assert main([*base, "--only", keys[2], keys[0]]) == 0
    kept = json.loads((tmp_path / "r.json").read_text())["data"]["sample"]
    assert [row["candidate"] for row in kept] == [keys[0], keys[2]]  # sample order, not argv's
    capsys.readouterr()
    assert main([*base, "--only", keys[0], "a_level1_run/L1/P99"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--only" in err[0] and "a_level1_run/L1/P99" in err[0]


def test_bench_names_the_host_its_throughput_depends_on():
    """Two runs of the same code on H100 machines differed by 36-64% in every CPU-bound
    stage: a throughput figure without its host's CPU cannot be compared with another."""
    from bench_real_cuda import describe_host

    host = describe_host()
    assert host["cores"] >= 1 and host["serial_rand_ns_per_element"] > 0
    assert isinstance(host["cpu"], str) and host["cpu"]
    assert host["load_1min"] >= 0


def test_slot_occupancy_adds_up_slot_seconds_over_the_span_and_the_large_ones_share():
    from bench_real_cuda import INPUTS_AHEAD_STAGE, SLOT_STAGE, slot_occupancy

    def row(arrival, slot, peak, inputs=0.0, ahead=None):
        stages = {SLOT_STAGE: slot, "correctness_inputs": inputs} if slot is not None else {}
        if ahead is not None:  # its launch waited for the worker's store to finish them
            stages[INPUTS_AHEAD_STAGE] = ahead
        return {
            "arrival_s": arrival,
            "stage_seconds": stages,
            "peak_gpu_memory_mb": peak,
            "trial_inputs_made_ahead": ahead is not None,
        }

    rows = [
        row(10.0, 10.0, 20_000.0, 4.0),
        row(20.0, 5.0, 1_000.0, 1.0),
        row(0.1, None, None),
        row(12.0, 6.0, 30_000.0, 0.5, ahead=2.0),
    ]
    assert slot_occupancy(rows, 2) == {
        "slots": 2,
        "span_s": 20.0,  # from the first admission (0 s) to the last result (20 s)
        "slot_seconds": 21.0,
        "busy_slots_mean": 1.05,
        "large_candidates": 2,
        "large_slot_seconds": 16.0,
        "large_made_ahead": 1,
        "large_inputs_wait_s": 6.5,  # 4 in its own process; 0.5 mapped + 2 before its start
    }
    assert slot_occupancy([row(0.1, None, None)], 2) is None  # static verdicts only


FAKE_KB_EVAL = """
from pydantic import BaseModel

class KernelExecResult(BaseModel):
    compiled: bool = False
    metadata: dict = {}
    runtime: float = -1.0
"""


def test_kernelbench_harness_imports_without_pydantic(tmp_path: Path, monkeypatch):
    from kernelbench_harness import LLM_CLIENTS, import_kernelbench

    (tmp_path / "kernelbench").mkdir()
    (tmp_path / "kernelbench" / "__init__.py").write_text("")
    (tmp_path / "kernelbench" / "eval.py").write_text(FAKE_KB_EVAL)
    for name in ("pydantic", "kernelbench", "kernelbench.eval"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    for name in (*LLM_CLIENTS, "google"):  # stubbed or imported here: as before after the test
        if name not in sys.modules:
            monkeypatch.setitem(sys.modules, name, None)
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setitem(sys.modules, "pydantic", None)  # import pydantic raises ImportError
    kbe = import_kernelbench(tmp_path)
    a, b = kbe.KernelExecResult(compiled=True), kbe.KernelExecResult()
    a.metadata["x"] = 1
    assert (a.compiled, b.compiled, b.metadata, b.runtime) == (True, False, {}, -1.0)
    # anthropic is installed with the project: left to its own import, never a stand-in
    anthropic = sys.modules.get("anthropic")
    assert anthropic is None or hasattr(anthropic, "Anthropic")


@pytest.mark.parametrize(
    ("ours", "reason", "kernelbench", "detail", "cause"),
    [
        (
            "rejected",
            "nondeterministic: two calls ...",
            "ok",
            "",
            "our check (KernelBench has none)",
        ),
        (
            "wrong_answer",
            "timing input set 1: output 0: 2 of 1024 elements outside",
            "ok",
            "",
            "our timed input sets (KernelBench checks only its trials)",
        ),
        (
            "wrong_answer",
            "trial 0: ...; check with strict FP32 (tf32: off; maxcode eval cuda --tf32 off)",
            "ok",
            "",
            "TF32 (the verdict names it)",
        ),
        (
            "ok",
            "",
            "wrong_answer",
            "{'correctness_trials': '(3 / 5)'}",
            "KernelBench's trials differ run to run",
        ),
        ("ok", "", "runtime_error", "CUDA error", "KernelBench's runtime error"),
        ("ok", "", "wrong_answer", "{'correctness_trials': '(0 / 5)'}", "other"),
    ],
)
def test_a_same_gpu_disagreement_gets_its_cause(ours, reason, kernelbench, detail, cause):
    row = {"ours": ours, "reason": reason}
    assert same_gpu_cause(row, {"kernelbench_here": kernelbench, "detail": detail}) == cause


def test_a_kernelbench_run_resumes_from_the_rows_its_json_holds(tmp_path: Path):
    """A run cut short keeps its rows; the next run with the same --json takes them as done
    (those of its sample only) and a missing or unreadable file means a fresh start."""
    from bench_real_cuda import _earlier_kernelbench_rows
    from result_json import write_result

    rows = [{"candidate": "a/L1/P1", "kernelbench_here": "ok"}, {"candidate": "b/L2/P7"}]
    path = tmp_path / "kb.json"
    write_result("cuda-real-candidates-kernelbench", {"kernelbench": {"rows": rows}}, path=path)
    assert _earlier_kernelbench_rows(path, {"a/L1/P1", "c/L1/P3"}) == {"a/L1/P1": rows[0]}
    assert _earlier_kernelbench_rows(tmp_path / "missing.json", {"a/L1/P1"}) == {}
    (tmp_path / "cut.json").write_text('{"data": {"kernel')
    assert _earlier_kernelbench_rows(tmp_path / "cut.json", {"a/L1/P1"}) == {}


FAKE_KB_VERDICTS = """
class KernelExecResult:
    def __init__(self, **fields):
        self.__dict__.update(fields)


def eval_kernel_against_ref(original_model_src, custom_model_src, seed_num=42, **settings):
    # KernelBench's records for a launch failure, a wrong result and a correct one
    if custom_model_src == "launch":
        error = {"runtime_error": "CUDA kernel launch error: invalid argument"}
        return KernelExecResult(compiled=True, correctness=False, metadata=error)
    if custom_model_src == "wrong":
        issue = {"correctness_issue": "Output mismatch", "max_difference": ["1.7"]}
        return KernelExecResult(compiled=True, correctness=False, metadata=issue)
    return KernelExecResult(
        compiled=True, correctness=True, metadata={}, runtime=0.5, ref_runtime=1.0,
        runtime_stats={}, ref_runtime_stats={},
    )
"""


def test_kernelbench_here_is_read_by_the_rules_of_its_published_labels(tmp_path: Path, monkeypatch):
    """KernelBench files a kernel launch failure as an incorrect result with a runtime_error in
    its metadata; its published labels call that runtime_error, so its verdict here must too."""
    from kernelbench_harness import verdict

    (tmp_path / "kernelbench").mkdir()
    (tmp_path / "kernelbench" / "__init__.py").write_text("")
    (tmp_path / "kernelbench" / "eval.py").write_text(FAKE_KB_VERDICTS)
    for name in ("kernelbench", "kernelbench.eval"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    monkeypatch.setattr(sys, "path", list(sys.path))
    got = {
        src: verdict(str(tmp_path), "ref", src, str(tmp_path)) for src in ("launch", "wrong", "ok")
    }
    assert got["launch"]["category"] == "runtime_error"
    assert got["launch"]["detail"].startswith("CUDA kernel launch error")
    assert got["wrong"]["category"] == "wrong_answer"
    assert (got["ok"]["category"], got["ok"]["speedup"]) == ("ok", 2.0)


def test_the_same_gpu_table_reads_ours_from_the_result_file_the_ours_mode_writes(
    tmp_path: Path, capsys
):
    from bench_real_cuda import print_same_gpu_agreement
    from result_json import write_result

    ours_rows = [
        {"candidate": "a/L1/P1", "ours": "ok", "tf32": "torch-default"},
        {"candidate": "a/L2/P9", "ours": "rejected", "reason": "no_custom_kernel_launched: ..."},
    ]
    path = tmp_path / "ours.json"
    write_result("cuda-real-candidates", {"passes": [{"rows": ours_rows}]}, path=path)
    kb_rows = [
        {"candidate": c, "kernelbench_here": "ok", "detail": ""} for c in ("a/L1/P1", "a/L2/P9")
    ]
    report: dict = {}
    print_same_gpu_agreement(path, kb_rows, report)
    table = report["same_gpu_agreement"]
    assert [r["agree"] for r in table["rows"]] == [True, False]
    assert table["by_cause"] == {"our check (KernelBench has none)": 1}
    assert "agree: 1/2" in capsys.readouterr().out


def test_a_kernelbench_run_builds_evaluates_and_resumes(tmp_path: Path, capsys):
    """The whole kernelbench mode on a stand-in of KernelBench's eval module: each candidate
    is built, then evaluated in a fresh process and read by the labels' rules; a second run
    with the same --json evaluates nothing again."""
    import argparse

    from bench_real_cuda import mode_kernelbench
    from public_candidates import RealCandidate

    from maxcode.runs.record import Label

    kb_src = tmp_path / "kb"
    (kb_src / "kernelbench").mkdir(parents=True)
    (kb_src / "kernelbench" / "__init__.py").write_text("")
    (kb_src / "kernelbench" / "eval.py").write_text(
        FAKE_KB_VERDICTS
        + "\n\ndef build_compile_cache(source, verbose, build_dir):\n"
        + "    return (source != 'nobuild', None, 'nvcc: error: nobuild')\n"
    )
    problem = tmp_path / "problem.py"
    problem.write_text("ref")
    sample = []
    for i, source in enumerate(("ok", "launch", "nobuild"), start=1):
        (tmp_path / f"k{i}.py").write_text(source)
        label = Label("ok", True, True, None, None, None, "KernelBench eval_results.json", "A100")
        sample.append(RealCandidate("run", 1, i, tmp_path / f"k{i}.py", problem, label, None))
    args = argparse.Namespace(
        kb_n=3,
        kb_jobs=2,
        kb_src=kb_src,
        work=tmp_path / "work",
        json=tmp_path / "kb.json",
        ours_json=None,
    )
    mode_kernelbench(args, sample, {})
    rows = json.loads(args.json.read_text())["data"]["kernelbench"]["rows"]
    assert [r["kernelbench_here"] for r in rows] == ["ok", "runtime_error", "compile_error"]
    capsys.readouterr()
    mode_kernelbench(args, sample, {})
    assert "3 candidates have a row" in capsys.readouterr().out
    assert json.loads(args.json.read_text())["data"]["kernelbench"]["rows"] == rows


CAUGHT_BUILD = """
from torch.utils.cpp_extension import load_inline
try:
    ext = load_inline(name="k", cpp_sources="", cuda_sources=src, functions=["k"])
except Exception:
    ext = None
"""
UNCAUGHT_BUILD = CAUGHT_BUILD.replace("try:\n    ", "").split("\nexcept")[0]


@pytest.mark.parametrize(
    "label, status, reason, code, cause",
    [
        # KernelBench times the fallback after a failed build; ours stops at the build
        (
            _label("ok"),
            "compile_error",
            "extension 'k' failed to build (host): ...",
            CAUGHT_BUILD,
            "build fallback",
        ),
        (
            _label("ok"),
            "compile_error",
            "extension 'k' failed to build (host): ...",
            UNCAUGHT_BUILD,
            "other",
        ),
        (
            _label("wrong_answer"),
            "compile_error",
            "extension 'k' failed to build",
            CAUGHT_BUILD,
            "other",
        ),
        # KernelBench calls any exception while loading the module a compile failure
        (
            _label("compile_error", "name 'get_inputs' is not defined"),
            "runtime_error",
            "candidate module raised at import: NameError: name 'get_inputs' is not defined",
            "",
            "harness class",
        ),
        (
            _label("compile_error", "x"),
            "runtime_error",
            "ModelNew.forward raised: NameError",
            "",
            "other",
        ),
        # KernelBench runs the candidate in the reference's namespace: its names resolve there
        (
            _label("wrong_answer", "Output shape mismatch"),
            "runtime_error",
            "candidate module raised at import: NameError: name 'get_inputs' is not defined",
            "",
            "reference names",
        ),
        (
            _label("wrong_answer", "Output shape mismatch"),
            "runtime_error",
            "ModelNew.forward raised: NameError: name 'kernel_size' is not defined",
            "",
            "other",
        ),
        # a failed build that the run's harness filed as a runtime error
        (
            _label(
                "runtime_error",
                "Error building extension 'k': [1/3] c++ ... error: 'f' was not declared",
            ),
            "compile_error",
            "extension 'k' failed to build (host): main.cpp:5:5: error: 'f' was not declared",
            "",
            "harness class",
        ),
        (
            _label("runtime_error", "Error building extension 'k'"),
            "ok",
            "",
            "",
            "labels' environment",
        ),
        # a failed build with the compiler's message, where ours built: nothing says why
        (
            _label("runtime_error", "Error building extension 'k': cuda.cu(9): error: bad"),
            "wrong_answer",
            "trial 0: output 0: 5 of 10 elements outside atol=0.01 rtol=0.01, max abs err 9",
            "",
            "other",
        ),
        (
            _label("runtime_error", "illegal memory access"),
            "compile_error",
            "extension 'k' failed",
            "",
            "other",
        ),
    ],
)
def test_disagreements_the_candidate_s_code_explains(label, status, reason, code, cause):
    assert disagreement_cause(PROBLEM, label, status, reason, code) == cause


def test_a_name_the_reference_binds_at_module_level_is_a_namespace_difference():
    sized = PROBLEM + "batch_size, (kernel_size, stride) = 16, (3, 1)\n"
    label = _label("wrong_answer", "Output shape mismatch")
    for name in ("batch_size", "kernel_size", "stride", "Model", "nn"):
        reason = f"ModelNew.forward raised: NameError: name '{name}' is not defined (line 9)"
        assert disagreement_cause(sized, label, "runtime_error", reason) == "reference names"
    reason = "ModelNew.forward raised: NameError: name 'channels' is not defined (line 9)"
    assert disagreement_cause(sized, label, "runtime_error", reason) == "other"
    assert (
        disagreement_cause(sized, label, "wrong_answer", reason.replace("channels", "stride"))
        == "other"
    )
