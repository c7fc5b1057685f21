"""bench_cuda_eval.py's CPU section (KernelBench's inputs in threads) and its one-line input errors."""

from __future__ import annotations

import json
from pathlib import Path

from bench_cuda_eval import main

PROBLEM = """import torch

class Model(torch.nn.Module):
    def forward(self, x, y):
        return x + y.sum()

def get_inputs():
    return [torch.rand({n}, 64), torch.randn({n})]

def get_init_inputs():
    return []
"""


def test_parallel_rand_times_the_largest_problems_and_checks_their_values(tmp_path: Path, capsys):
    level1 = tmp_path / "KernelBench" / "level1"
    level1.mkdir(parents=True)
    for name, n in (("1_small.py", 1_000), ("2_large.py", 40_000), ("3_middle.py", 8_000)):
        (level1 / name).write_text(PROBLEM.format(n=n))
    out = tmp_path / "rand.json"
    argv = ["--section", "parallel-rand", "--kernelbench-dir", str(tmp_path / "KernelBench")]
    argv += ["--count", "2", "--threads", "2,3", "--repeat", "1", "--json", str(out)]
    assert main(argv) == 0
    written = json.loads(out.read_text())
    assert written["benchmark"] == "cuda-parallel-rand"
    rows = written["data"]["parallel_rand"]["rows"]
    assert [r["problem"] for r in rows] == ["2_large.py", "3_middle.py"]  # largest first
    assert all(r["threads_2_s"] > 0 and r["threads_3_s"] > 0 for r in rows)
    assert [h["label"] for h in written["headline"]] == [
        "2_large.py, 3 threads vs serial",
        "3_middle.py, 3 threads vs serial",
    ]
    assert main([*argv[:2], "--kernelbench-dir", str(tmp_path / "nowhere")]) == 2
    assert "--kernelbench-dir" in capsys.readouterr().err


def test_processes_names_what_it_lacks_in_one_line(tmp_path: Path, capsys):
    assert main(["--section", "processes", "--json", str(tmp_path / "p.json")]) == 2
    task = tmp_path / "task.py"
    task.write_text(PROBLEM.format(n=8))
    argv = ["--section", "processes", "--task", str(task), str(tmp_path / "missing.py")]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and "--task" in err[0] and "missing.py: no such file" in err[1]
    assert not (tmp_path / "p.json").exists()


def test_processes_counts_only_verdicts_as_the_same(tmp_path: Path, monkeypatch, capsys):
    """Two processes that both failed agree on nothing: a candidate without a verdict is
    named and left out of the same-verdict count, not counted as one more agreement."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # the GPU stage fails: no verdict
    root = Path(__file__).parents[3]
    hostile = Path(__file__).parent / "hostile"
    out = tmp_path / "p.json"
    argv = ["--section", "processes", "--processes", "2", "--cache-dir", str(tmp_path / "c")]
    argv += ["--task", str(root / "src/maxcode/tasks/builtin_cuda/level1/1_Scaled_vector_add.py")]
    argv += [str(hostile / "torch_only.py"), str(hostile / "good.py"), "--json", str(out)]
    assert main(argv) == 0
    written = json.loads(out.read_text())
    p = written["data"]["processes"]
    assert (p["same_verdicts"], p["compared"], p["no_verdict"]) == (1, 1, ["good"])
    assert p["alone"]["torch_only"]["status"] == "rejected"
    assert written["headline"][0]["value"] == "1/1 (1 without a verdict)"
    assert "no verdict (a maxcode eval cuda process failed): good" in capsys.readouterr().out
