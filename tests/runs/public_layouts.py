"""Tiny copies of the four public run layouts and of a KernelBench checkout, written here.

Each writer lays out files the way its public repository does, with a handful of problems,
so the readers, the merge and the card are tested on every layout without public code.
"""

from __future__ import annotations

import json
from pathlib import Path

PROBLEM = """import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x) * {scale}

def get_inputs():
    return [torch.rand(16, 32)]

def get_init_inputs():
    return []
"""


def kernel(tag: str) -> str:
    """A distinct candidate program per tag."""
    return (
        "import torch\nimport torch.nn as nn\n\n"
        f"class ModelNew(nn.Module):\n    def forward(self, x):\n        return torch.relu(x)  # {tag}\n"
    )


def write_checkout(root: Path, problems: int = 3) -> Path:
    for level in (1, 2):
        folder = root / "KernelBench" / f"level{level}"
        folder.mkdir(parents=True)
        for pid in range(1, problems + 1):
            (folder / f"{pid}_Relu{pid}.py").write_text(PROBLEM.format(scale=pid))
    return root / "KernelBench"


def write_kernelbench_runs(root: Path, differing_problem: int = 2) -> Path:
    """technoabsurdist/KernelBench: runs/<run>/ + eval_results.json + the run's KernelBench copy."""
    for pid in (1, 2, 3):
        folder = root / "KernelBench" / "level1"
        folder.mkdir(parents=True, exist_ok=True)
        scale = pid + 100 if pid == differing_problem else pid
        (folder / f"{pid}_Relu{pid}.py").write_text(PROBLEM.format(scale=scale))
    run = root / "runs" / "gemini_level1_run"
    run.mkdir(parents=True)
    (run / "generation_config.yaml").write_text("model_name: gemini-2.5-pro\nlevel: 1\n")
    results = {}
    for pid, ok in ((1, True), (2, False), (3, True)):
        (run / f"level_1_problem_{pid}_sample_0_kernel.py").write_text(kernel(f"shared-{pid}"))
        results[str(pid)] = {
            "sample_id": 0,
            "compiled": True,
            "correctness": ok,
            "runtime": 2.0 if ok else -1.0,
            "metadata": {"hardware": "NVIDIA A100-SXM4-40GB"}
            | ({} if ok else {"correctness_issue": "Output mismatch"}),
        }
    (run / "eval_results.json").write_text(json.dumps(results))
    return root


def write_kernel_coder(root: Path) -> Path:
    """j1mk1m/Kernel-Coder: best-of-n and iterative-refinement runs, responses beside kernels."""
    for name, method in (("bon_level1", "best of n"), ("iter_level1", "iterative refinement")):
        run = root / "runs" / name
        run.mkdir(parents=True)
        (run / "config.yaml").write_text(
            f"method: {method}\nmodel_name: hosted_vllm/Qwen/Qwen2.5-Coder-7B-Instruct\n"
        )
        entries = []
        for s in range(4):
            stem = f"level_1_problem_1_solution_{s}"
            code = "" if s == 3 else kernel(f"{name}-{s}")
            if name == "iter_level1" and s == 0:
                code = kernel("shared-1")  # the same program as the other source's problem 1
            (run / f"{stem}_kernel.py").write_text(code)
            response = f"Here it is:\n```python\n{code}```\n" if code else "I cannot."
            (run / f"{stem}_response.txt").write_text(response)
            meta: dict = {"hardware": "NVIDIA RTX A6000"}
            if s == 3:
                meta["other_error"] = "error: 'NoneType' object is not callable"
            elif s == 1:
                meta["compilation_error"] = "Error building extension 'x'"
            entries.append(
                {
                    "evaluation_id": stem,
                    "compiled": s in (0, 2),
                    "correctness": s in (0, 2),
                    "runtime": 3.0 if s in (0, 2) else -1.0,
                    "metadata": meta,
                }
            )
        (run / "eval_results.json").write_text(json.dumps(entries))
    return root


def write_agentic(root: Path) -> Path:
    """pango0/KernelBench-Agentic: gen_results.json with turns, feedback and a diagnosis."""
    problems = root / "KernelBench" / "KernelBench" / "level2"
    problems.mkdir(parents=True)
    (problems / "1_Relu1.py").write_text(PROBLEM.format(scale=1))
    turns = []
    for t in range(3):
        code = kernel(f"agentic-{t}") if t < 2 else kernel("shared-1")
        ok = t == 2
        turns.append(
            {
                "turn": t,
                "raw_response": f"<think>plan</think>\n```python\n{code}```",
                "extracted_code": code,
                "eval": {
                    "compiled": True,
                    "correctness": ok,
                    "runtime": 1.0 if ok else -1.0,
                    "ref_runtime": 3.0,
                    "metadata": {"hardware": "Tesla V100-SXM2-32GB"}
                    | ({} if ok else {"correctness_issue": "Output mismatch"}),
                },
                "feedback": f"Evaluation result (turn {t}): correctness={ok}",
                "diagnosis": {"raw": f"diagnosis of turn {t}"},
            }
        )
    data = {
        "meta": {"method": "agentic", "model": "Qwen/Qwen2.5-Coder-7B-Instruct"},
        "levels": {"2": {"1": {"problem_id": 1, "turns": turns}}},
    }
    run = root / "experiments" / "runs" / "agentic_qwen"
    run.mkdir(parents=True)
    (run / "gen_results.json").write_text(json.dumps(data))
    return root


def write_cuda_l1(root: Path) -> Path:
    """deepreinforce-ai/CUDA-L1: a stream of objects, one split over lines, scores as strings."""
    folder = root / "optimized_cuda_code"
    folder.mkdir(parents=True)
    rows = [
        {
            "level_id": "1",
            "task_id": "1",
            "ref_code": PROBLEM.format(scale=1),
            "custom_code": kernel("l1-1"),
            "score_default": "2.5",
        },
        {
            "level_id": "1",
            "task_id": "3",
            "ref_code": PROBLEM.format(scale=3),
            "custom_code": "",
            "score_default": "1.0",
        },
    ]
    text = json.dumps(rows[0], indent=1) + json.dumps(rows[1]) + "\n"
    (folder / "h100.json").write_text(text)
    return root
