"""The offline CUDA policy: kernels written from Jinja2 templates for the op graph of a
KernelBench task, tuned by the search loop (see ``policy.py``)."""

from maxcode.policy.offline_cuda.policy import OfflineCudaPolicy

__all__ = ["OfflineCudaPolicy"]
