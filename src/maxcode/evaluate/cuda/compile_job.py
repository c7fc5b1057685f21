"""Compile one candidate's extensions on a CPU worker (run as ``python -m`` in a subprocess).

Before any candidate code runs, the job whose turn it is (one per task) estimates the task's
GPU memory from the reference on ``meta`` and sends it first on the build channel, where a
candidate cannot have written yet. The candidate module is executed, and ``ModelNew``
constructed once, with no GPU visible and ``load_inline`` routed to the build cache, which is
how its specs are discovered (they are often assembled from strings at import time or in
``__init__``). Reads the job as JSON on stdin, writes a JSON reply on stdout.

This process runs the candidate's code, so it runs sandboxed and sees the build cache
read-only: with ``request_fd``/``reply_fd`` in the job, each spec goes to the evaluator
(one JSON line each way), which builds it into the cache and answers with the outcome; only
the evaluator writes the cache, so a candidate cannot plant a build for another one.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from types import ModuleType

from maxcode.evaluate.cuda.build import BuildCache, BuildError, BuildOutcome, ExtensionSpec
from maxcode.evaluate.cuda.loader import cached_load_inline, load_module


def main() -> None:
    started = time.monotonic()
    job = json.loads(sys.stdin.read())
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # the candidate's prints must not corrupt the reply
    cache: BuildCache | ParentBuilder
    if "request_fd" in job:
        cache = ParentBuilder(job["request_fd"], job["reply_fd"])
    else:
        cache = BuildCache(
            Path(job["cache_root"]),
            job["cuda_arch"],
            job["host_pch"],
            job["light_cuda_headers"],
            split_host=job.get("split_host_functions", False),
            light_host_headers=job.get("light_host_headers", False),
        )
    builds: list[BuildOutcome] = []
    import_error = None
    import torch  # noqa: F401  (timed apart from the estimate, which uses it)

    marks = [started, time.monotonic()]  # where this process's time went, for the figures
    memory_mb = reference_mb = None
    if job.get("estimate", True):  # once per task: the evaluator says which job makes it
        memory_mb, reference_mb = gpu_memory_estimates_mb(Path(job["reference_path"]))
        if isinstance(cache, ParentBuilder):  # before candidate code runs: it can be trusted
            cache.tell({"estimate": [memory_mb, reference_mb]})
    marks.append(time.monotonic())
    try:
        with cached_load_inline(cache, job["timeout_s"], builds.append):
            candidate = load_module(Path(job["candidate_path"]), "maxcode_candidate")
            construct_on_cpu(candidate, Path(job["reference_path"]))
    except BuildError:
        pass  # recorded in builds
    except BaseException as err:
        import_error = f"{type(err).__name__}: {str(err).strip()[:300]}"
    marks.append(time.monotonic())
    # what this process waited for its builds: a build started ahead took longer than that
    waited = (
        cache.waited if isinstance(cache, ParentBuilder) else sum((b.seconds for b in builds), 0.0)
    )
    reply = {
        "builds": [b.to_dict() for b in builds],
        "import_error": import_error,
        "gpu_memory_mb": memory_mb,
        "reference_gpu_memory_mb": reference_mb,
        "seconds": {  # where the job's time went (the evaluator adds its start)
            "torch import": round(marks[1] - marks[0], 3),
            "shape estimate": round(marks[2] - marks[1], 3),
            "candidate code": round(max(0.0, marks[3] - marks[2] - waited), 3),
            "builds": round(waited, 3),
        },
    }
    out.write(json.dumps(reply))
    out.flush()
    os._exit(0)  # skip interpreter teardown of whatever the candidate created


class ParentBuilder:
    """``BuildCache.build`` done by the evaluator: spec out, outcome back, over two pipes."""

    def __init__(self, request_fd: int, reply_fd: int):
        self.requests = os.fdopen(request_fd, "w")
        self.replies = os.fdopen(reply_fd)
        self.waited = 0.0  # seconds spent in build(), for the job's figures

    def tell(self, message: dict) -> None:
        self.requests.write(json.dumps(message) + "\n")
        self.requests.flush()

    def build(self, spec: ExtensionSpec, timeout_s: float = 600.0) -> BuildOutcome:
        t0 = time.monotonic()
        self.tell(spec.to_dict())
        line = self.replies.readline()
        self.waited += time.monotonic() - t0
        if not line:
            raise RuntimeError("the evaluator closed the build channel")
        return BuildOutcome(**json.loads(line))


def construct_on_cpu(candidate: ModuleType, reference_path: Path) -> None:
    """Build ModelNew once on the CPU so extensions created in ``__init__`` compile here too,
    in the pool, not serially inside the GPU worker. A constructor that needs the GPU fails
    harmlessly here; the GPU worker then builds what is left (through the same cache)."""
    import torch

    reference = load_module(reference_path, "maxcode_reference")
    torch.manual_seed(0)
    try:
        candidate.ModelNew(*reference.get_init_inputs())
    except BuildError:
        raise
    except Exception:  # the GPU worker reports constructor errors with full context
        return


# What an evaluation process holds besides the task's tensors: a CUDA context, torch's and
# cuBLAS's kernels and workspaces, the L2 flush buffer.
PROCESS_OVERHEAD_MB = 1500.0


def gpu_memory_estimates_mb(reference_path: Path) -> tuple[float | None, float | None]:
    """GPU memory a candidate's evaluation of this task, and the task's reference process,
    are expected to need, from shapes alone: ``(candidate, reference)`` in MB.

    The reference is built and run on torch's ``meta`` device (no data, no GPU): an
    evaluation holds the reference's and the candidate's weights, three input sets (a
    correctness trial's, the timing set and its swap partner) and two outputs (the
    reference's and the candidate's), plus the process's own overhead. On the H100 the peaks
    of real level-1 candidates were 3.8x their input for an elementwise problem (input and
    output of one size; this gives 5x) and 2.9x for a reduction (3x). Four outputs, as
    before, made an elementwise problem's estimate 7x its input (46 GB for a 6.4 GB input):
    the admission then held small jobs back behind it (2026-11-27). The reference process
    (``worker.run_reference``) holds the weights once, one input set and two outputs (the
    eager and the compiled call's): 19.9 GB for a 6 GB elementwise task, which was counted at
    its candidate's peak instead (at least 28 GB from a 25.3 GB peak) until 2026-11-27.
    ``(None, None)`` when the reference does not run on ``meta`` (the evaluator then assumes
    an even share of the GPU, and a job that runs out beside others is run again alone).
    """
    import torch

    from maxcode.evaluate.cuda.trial_inputs import tensor_bytes

    try:
        reference = load_module(reference_path, "maxcode_reference_shapes")
        with torch.device("meta"):
            model = reference.Model(*reference.get_init_inputs())
            inputs = reference.get_inputs()
            outputs = model(*inputs)
    except Exception:
        return None, None
    weights = sum(t.numel() * t.element_size() for t in (*model.parameters(), *model.buffers()))
    inputs_b, outputs_b = tensor_bytes(inputs), tensor_bytes(outputs)
    candidate = 2 * weights + 3 * inputs_b + 2 * outputs_b
    alone = weights + inputs_b + 2 * outputs_b
    return (
        round(candidate / 2**20 + PROCESS_OVERHEAD_MB, 1),
        round(alone / 2**20 + PROCESS_OVERHEAD_MB, 1),
    )


if __name__ == "__main__":
    main()
