"""`maxcode optimize` on a KernelBench-format task of the built-in CUDA suite."""

from __future__ import annotations

import shutil

import pytest

from maxcode.records import read_jsonl
from maxcode.tasks.builtin_cuda import load_builtin_cuda

from .test_optimize import optimize

has_gpu = shutil.which("nvidia-smi") is not None


@pytest.fixture
def fused_chain(tmp_path):
    """Scale, add, clamp, tanh: four eager kernels that the offline policy fuses into one."""
    task = next(t for t in load_builtin_cuda() if t.metadata["file_name"] == "3_Scale_Add_Clamp.py")
    path = tmp_path / "model.py"
    path.write_text(task.reference_source)
    return path


@pytest.mark.skipif(has_gpu, reason="checks the message shown where there is no GPU")
def test_cuda_target_without_a_gpu_says_so_before_any_work(fused_chain, tmp_path):
    proc = optimize(str(fused_chain), "--kind", "cuda", "--out", str(tmp_path / "out"))
    assert proc.returncode == 2 and "this machine has none" in proc.stderr
    assert not (tmp_path / "out" / "run.jsonl").exists()


@pytest.mark.gpu
@pytest.mark.skipif(not has_gpu, reason="needs an NVIDIA GPU")
def test_offline_cuda_policy_finds_a_faster_fused_kernel(fused_chain, tmp_path):
    out = tmp_path / "out"
    proc = optimize(
        str(fused_chain), "--kind", "cuda", "--out", str(out), "--depth", "2", "--k", "2"
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "offline CUDA templates" in proc.stderr.splitlines()[0]
    records = list(read_jsonl(out / "run.jsonl"))
    end = records[-1]
    assert end["kind"] == "run_end" and end["best_reward"] > 1.0, end
    assert "__global__" in (out / "best.py").read_text()
    html = (out / "report.html").read_text()
    assert 'id="speedup-plot"' in html and 'id="diff"' in html


def test_summary_says_plainly_when_the_best_candidate_is_slower_than_torch_compile():
    from maxcode.optimize.run import _against_compiled

    slower = _against_compiled({"figures": {"speedup_vs_eager": 1.4, "speedup_vs_compiled": 0.8}})
    assert "slower than torch.compile(model) (0.800x" in slower
    assert "no candidate faster than torch.compile was found" in slower
    faster = _against_compiled({"figures": {"speedup_vs_compiled": 1.25}})
    assert faster == " It is 1.250x the speed of torch.compile(model)."
    assert _against_compiled({"figures": {"speedup_vs_eager": 1.4}}) == ""  # C++: no such figure
