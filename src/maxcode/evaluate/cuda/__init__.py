"""CUDA evaluator for KernelBench-format tasks (see docs/cuda-evaluator.md)."""

from maxcode.evaluate.cuda.checks import CHECKS, Finding, static_findings
from maxcode.evaluate.cuda.config import CudaEvalConfig
from maxcode.evaluate.cuda.evaluator import EVALUATOR_VERSION, CudaEvaluator

__all__ = [
    "CHECKS",
    "EVALUATOR_VERSION",
    "CudaEvalConfig",
    "CudaEvaluator",
    "Finding",
    "static_findings",
]
