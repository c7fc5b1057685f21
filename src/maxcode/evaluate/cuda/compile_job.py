"""Compile one candidate's extensions on a CPU worker (run as ``python -m`` in a subprocess).

The candidate module is executed, and ``ModelNew`` constructed once, with no GPU visible and
``load_inline`` routed to the build cache, which is how its specs are discovered (they are
often assembled from strings at import time or in ``__init__``). Reads the job as JSON on
stdin, writes a JSON reply on stdout. The task's memory estimate is not made here (see
``estimator``): no candidate code runs where it is made.

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
    import torch  # noqa: F401  (timed apart from the candidate's code)

    marks = [started, time.monotonic()]  # where this process's time went, for the figures
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
        "seconds": {  # where the job's time went (the evaluator adds its start)
            "torch import": round(marks[1] - marks[0], 3),
            "candidate code": round(max(0.0, marks[2] - marks[1] - waited), 3),
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

    def build(self, spec: ExtensionSpec, timeout_s: float = 600.0) -> BuildOutcome:
        t0 = time.monotonic()
        self.requests.write(json.dumps(spec.to_dict()) + "\n")
        self.requests.flush()
        line = self.replies.readline()
        self.waited += time.monotonic() - t0
        if not line:
            raise RuntimeError("the evaluator closed the build channel")
        return BuildOutcome(**json.loads(line))


def construct_on_cpu(candidate: ModuleType, reference_path: Path) -> None:
    """Build ModelNew once on the CPU so extensions created in ``__init__`` compile here too,
    in the pool, and a build error is a compile error. A constructor that needs the GPU fails
    harmlessly here; the GPU worker's constructor then builds with torch's own builder."""
    import torch

    reference = load_module(reference_path, "maxcode_reference")
    torch.manual_seed(0)
    try:
        candidate.ModelNew(*reference.get_init_inputs())
    except BuildError:
        raise
    except Exception:  # the GPU worker reports constructor errors with full context
        return


if __name__ == "__main__":
    main()
