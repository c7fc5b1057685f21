"""CUDA-L1's published H100 candidates (github deepreinforce-ai/CUDA-L1): reader and static technique classes.

``optimized_cuda_code/h100.json`` holds one JSON object per task (``level_id``, ``task_id``,
``ref_code``, ``custom_code``, ``cuda_graph_code``, ``cudnn_code``, ``score_*``). It is
read as a stream of JSON values, so an object split over several lines, or several objects
on one line, reads the same. Most of its "kernels" are not kernels: the classes below name
what a candidate does, found from its source before it runs; the evaluator's verdict
then says what we make of each. Never commit the set; point ``--h100`` (or ``$KB``) at it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from maxcode.errors import CorpusFormatError
from maxcode.runs.layouts import number, read_json_stream
from maxcode.tasks.model import Task

VARIANTS = ("custom_code", "cuda_graph_code", "cudnn_code")


CudaL1Error = CorpusFormatError
"""The set cannot be read; the message names the file, the place and the fix."""


@dataclass(frozen=True)
class CudaL1Candidate:
    level: int
    task_id: int
    reference: str
    code: str  # the chosen variant's source
    score: float | None  # CUDA-L1's reported speedup of this variant on its H100

    @property
    def key(self) -> str:
        return f"L{self.level}/T{self.task_id}"

    def task(self) -> Task:
        return Task(
            task_id=f"cuda-l1-L{self.level}-{self.task_id}",
            suite="cuda-l1",
            language="cuda",
            reference_source=self.reference,
            tags=(f"level{self.level}",),
            metadata={
                "level": self.level,
                "problem_id": self.task_id,
                "file_name": f"{self.task_id}.py",
            },
        )


SCORE_OF = {
    "custom_code": "score_default",
    "cuda_graph_code": "score_cuda_graph",
    "cudnn_code": "score_cudnn",
}


def read_rows(path: Path) -> list[dict]:
    """Every JSON object in the file, whatever the line breaks (the corpus's CUDA-L1 reader)."""
    return read_json_stream(path)


def load_candidates(
    path: Path, variant: str = "custom_code", levels: tuple[int, ...] = (1, 2, 3)
) -> list[CudaL1Candidate]:
    """Rows with code in ``variant``, sorted by level and task; rows without it are skipped."""
    if variant not in VARIANTS:
        raise CudaL1Error(f"variant {variant!r}: choose one of {VARIANTS}")
    out = []
    for i, row in enumerate(read_rows(path), start=1):
        missing = [k for k in ("level_id", "task_id", "ref_code") if k not in row]
        if missing:
            raise CudaL1Error(f"{path}: object {i} lacks {missing}")
        if int(row["level_id"]) not in levels or not row.get(variant):
            continue
        score = row.get(SCORE_OF[variant])
        out.append(
            CudaL1Candidate(
                level=int(row["level_id"]),
                task_id=int(row["task_id"]),
                reference=row["ref_code"],
                code=row[variant],
                score=number(score),
            )
        )
    return sorted(out, key=lambda c: (c.level, c.task_id))


# Each technique: a pattern over the candidate's source, and why it matters to a reward.
TECHNIQUES: dict[str, tuple[re.Pattern[str], str]] = {
    "stored output": (
        re.compile(r"^\s*return\s+self\.(?!_?(shape|dtype|device)\b)\w+\s*$", re.M),
        "returns a tensor kept on the module: result caching unless every call rewrites it (then it is an output buffer that aliases across calls)",
    ),
    "cuda graphs": (
        re.compile(
            r"torch\.cuda\.CUDAGraph|torch\.cuda\.graph\(|make_graphed_callables|reduce-overhead"
        ),
        "replays recorded launches: legitimate when the replay does the real work on the call's inputs",
    ),
    "tf32": (
        re.compile(
            r"allow_tf32\s*=\s*True|set_float32_matmul_precision\(\s*['\"](high|medium)['\"]"
        ),
        "lowers matmul/conv precision for every op in the process, the reference's too",
    ),
    "cudnn.benchmark": (
        re.compile(r"cudnn\.benchmark\s*=\s*True"),
        "a global flag that also speeds up the reference's convolutions when set in the same process",
    ),
    "lower precision": (
        re.compile(r"\.half\(\)|torch\.(float16|bfloat16)|autocast"),
        "computes in fp16/bf16 where the reference is fp32",
    ),
    "custom kernel": (
        re.compile(r"load_inline|cpp_extension|@triton\.jit|__global__|RawKernel"),
        "builds a kernel of its own",
    ),
    "torch.compile/jit": (
        re.compile(r"torch\.compile\(|torch\.jit\.(script|trace)"),
        "hands the work to torch's compilers",
    ),
}
PRIMARY_ORDER = (
    "cuda graphs",
    "stored output",
    "tf32",
    "cudnn.benchmark",
    "custom kernel",
    "lower precision",
    "torch.compile/jit",
)
"""A candidate's primary class is the first of its techniques in this order (the one that most
decides what its reported speedup means; a graph replays into a stored output by design, so
graphs come first); 'torch rewrite' when it uses none. The classes are static and heuristic:
what the candidate does at run time is for the evaluator's checks to say."""


def techniques(source: str) -> list[str]:
    return [name for name in PRIMARY_ORDER if TECHNIQUES[name][0].search(source)]


def primary_class(source: str) -> str:
    found = techniques(source)
    return found[0] if found else "torch rewrite"
