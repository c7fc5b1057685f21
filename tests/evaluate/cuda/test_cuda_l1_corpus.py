"""CUDA-L1 set reader and static technique classes (benchmarks/public_candidates.py), on rows written here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from bench_real_cuda import main, per_class_table
from public_candidates import (
    CorpusError,
    load_cuda_l1,
    primary_class,
    read_cuda_l1_rows,
    spread_over_classes,
    techniques,
)

REF = (
    "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x * 2\n"
)
CODES = {
    "graph": "g = torch.cuda.CUDAGraph()\nclass ModelNew:\n    def forward(self, x):\n        self.graph.replay()\n        return self.static_output\n",
    "cache": "class ModelNew:\n    def forward(self, x):\n        if self.out is None:\n            self.out = x * 2\n        return self.out\n",
    "tf32": "torch.backends.cuda.matmul.allow_tf32 = True\nclass ModelNew: ...\n",
    "cudnn": "torch.backends.cudnn.benchmark = True\nmod = load_inline(name='k', cpp_sources='', cuda_sources='__global__ void k() {}')\n",
    "kernel": "mod = load_inline(name='k', cpp_sources='', cuda_sources='__global__ void k() {}')\n",
    "plain": "class ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x + x\n",
}


def _row(level: int, task: int, code: str | None, score: float | None = 1.5) -> dict:
    return {
        "level_id": level,
        "task_id": task,
        "ref_code": REF,
        "custom_code": code,
        "cuda_graph_code": None,
        "cudnn_code": "x",
        "score_default": score,
        "score_cudnn": 1.1,
    }


@pytest.fixture
def h100(tmp_path: Path) -> Path:
    rows = [_row(1, i + 1, code) for i, code in enumerate(CODES.values())]
    rows += [_row(2, 1, None), _row(3, 7, CODES["plain"], None)]
    # JSON lines, except one object pretty-printed over many lines and two sharing a line
    text = "\n".join(json.dumps(r) for r in rows[:3])
    text += "\n" + json.dumps(rows[3], indent=2) + "\n"
    text += json.dumps(rows[4]) + " " + json.dumps(rows[5]) + "\n"
    text += "\n".join(json.dumps(r) for r in rows[6:]) + "\n"
    path = tmp_path / "h100.json"
    path.write_text(text)
    return path


def test_reader_takes_objects_across_and_within_lines(h100: Path):
    rows = read_cuda_l1_rows(h100)
    assert [(r["level_id"], r["task_id"]) for r in rows] == [(1, i) for i in range(1, 7)] + [
        (2, 1),
        (3, 7),
    ]
    cands = load_cuda_l1(h100)
    assert len(cands) == 7  # the row without custom_code is skipped
    assert cands[-1].key == "L3/T7" and cands[-1].score is None
    assert cands[0].task().task_id == "cuda-l1-L1-1" and cands[0].task().language == "cuda"
    assert [c.score for c in load_cuda_l1(h100, "cudnn_code", (1,))] == [1.1] * 6


def test_bad_input_names_the_file_and_place(tmp_path: Path, h100: Path):
    with pytest.raises(CorpusError, match="no such file"):
        read_cuda_l1_rows(tmp_path / "missing.json")
    broken = tmp_path / "broken.json"
    broken.write_text(h100.read_text() + '{"level_id": 1,\n "task_id": \n')
    with pytest.raises(CorpusError, match=r"broken\.json: line 1\d: not JSON"):
        read_cuda_l1_rows(broken)
    with pytest.raises(CorpusError, match="variant 'x'"):
        load_cuda_l1(h100, "x")
    assert main(["--source", "cuda-l1", "--h100", str(tmp_path / "missing.json"), "--dry-run"]) == 2


def test_techniques_and_primary_class():
    assert primary_class(CODES["graph"]) == "cuda graphs"  # its stored output is the graph's
    assert techniques(CODES["graph"]) == ["cuda graphs", "stored output"]
    assert primary_class(CODES["cache"]) == "stored output"
    assert primary_class(CODES["tf32"]) == "tf32"
    assert techniques(CODES["cudnn"]) == ["cudnn.benchmark", "custom kernel"]
    assert primary_class(CODES["kernel"]) == "custom kernel"
    assert primary_class(CODES["plain"]) == "torch rewrite"
    assert primary_class("torch.set_float32_matmul_precision('high')") == "tf32"
    assert primary_class("torch.set_float32_matmul_precision('highest')") == "torch rewrite"


def test_spread_and_per_class_table(h100: Path):
    cands = load_cuda_l1(h100)
    picked = spread_over_classes(cands, 5)
    assert len({primary_class(c.source) for c in picked}) == 5
    assert len(spread_over_classes(cands, 0)) == len(cands)
    rows = [
        {
            "class": "custom kernel",
            "techniques": ["custom kernel"],
            "score": 2.0,
            "ours": "ok",
            "speedup": 1.2,
            "failed_check": None,
        },
        {
            "class": "custom kernel",
            "techniques": ["custom kernel"],
            "score": 4.0,
            "ours": "ok",
            "speedup": 1.6,
            "failed_check": None,
        },
        {
            "class": "tf32",
            "techniques": ["tf32", "custom kernel"],
            "score": 3.0,
            "ours": "rejected",
            "speedup": None,
            "failed_check": "torch_tampering",
        },
    ]
    by_class = per_class_table(rows, "class")
    assert by_class["custom kernel"]["our_median_speedup"] == 1.4
    assert by_class["custom kernel"]["their_median_speedup"] == 3.0
    assert by_class["tf32"] == {
        "n": 1,
        "verdicts": {"rejected": 1},
        "checks": {"torch_tampering": 1},
        "our_median_speedup": None,
        "their_median_speedup": None,
    }
    assert per_class_table(rows, "techniques")["custom kernel"]["n"] == 3


def test_the_real_candidate_bench_takes_cuda_l1_as_one_more_set(h100: Path, tmp_path: Path, capsys):
    out = tmp_path / "l1.json"
    base = ["--source", "cuda-l1", "--h100", str(h100), "--dry-run", "--json", str(out)]

    def sample(*extra: str) -> list[dict]:
        assert main([*base, *extra]) == 0
        written = json.loads(out.read_text())
        assert written["benchmark"] == "cuda-l1" and written["data"]["variant"] == "custom_code"
        return written["data"]["sample"]

    everything = sample()  # default: every candidate of levels 1-3
    assert len(everything) == 7
    first, rest = sample("-n", "3"), sample("-n", "3", "--skip", "3")
    assert len({row["class"] for row in first}) == 3  # spread over the classes
    assert first + rest == everything[:6]  # parts run with --skip continue the same order
    by_class = json.loads(out.read_text())["data"]["by_class"]
    assert sum(t["n"] for t in by_class.values()) == 3
    assert all(t["verdicts"] == {"not run": t["n"]} for t in by_class.values())
    kernels = sample("--with-kernel")
    assert kernels and {row["class"] for row in kernels} <= {"cudnn.benchmark", "custom kernel"}
    capsys.readouterr()
    assert main([*base, "--mode", "kernelbench"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "kernelbench-runs" in err[0]


def test_a_pass_over_cuda_l1_results_gives_the_class_tables_not_the_label_agreement(h100: Path):
    from bench_real_cuda import CUDA_L1_SOURCE, _row, summarize_pass

    from maxcode.evaluate.result import EvalResult, Status, Timing

    by_key = {c.key: c for c in load_cuda_l1(h100)}
    timed = EvalResult(Status.OK, timing=Timing("cuda_events", "ms", 1.0, 1.5))
    caught = EvalResult(Status.REJECTED, "stored output", figures={"failed_check": "result_reuse"})
    rows = [_row(by_key["L1/T5"], timed, 1.0), _row(by_key["L1/T2"], caught, 2.0)]
    summary = {"pass": "cold", "rows": rows}
    summarize_pass(summary, CUDA_L1_SOURCE)
    assert "agreement" not in summary
    assert summary["by_class"]["custom kernel"]["our_median_speedup"] == 1.5
    assert summary["by_class"]["custom kernel"]["their_median_speedup"] == 1.5  # its score
    assert summary["by_class"]["stored output"]["checks"] == {"result_reuse": 1}
