"""The corpus record: one candidate program for one KernelBench problem, with every attempt
that produced it.

A program written twice (by two models, two runs, or two turns of one run) is one record
with two attempts, each keeping its own source, turn, feedback and published label: the
evaluator then measures the program once, and the label of every attempt stays readable.
See docs/corpus.md for the fields.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from maxcode.errors import CorpusFormatError

RECORD_VERSION = "corpus-record/1"

VERDICTS = ("ok", "wrong_answer", "runtime_error", "compile_error", "harness_error")
"""Published label classes. ``harness_error``: the run's harness failed on its own (a missing
shared object, an exception in the harness), so the label says nothing about the kernel."""


def code_hash(code: str) -> str:
    """Identity of a program: sha256 of its text with line ends normalized and outer blanks cut."""
    text = code.replace("\r\n", "\n").strip() + "\n"
    return hashlib.sha256(text.encode()).hexdigest()


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class Problem:
    level: int
    problem_id: int
    file_name: str  # KernelBench's name, as in the checkout: "23_Softmax.py"
    reference_hash: str  # sha256 of the reference the run used ("" when unknown)

    @property
    def key(self) -> str:
        return f"L{self.level}/{self.file_name}"


@dataclass(frozen=True)
class Label:
    """What the source's own harness said about the attempt, on its GPU."""

    verdict: str
    compiled: bool | None
    correct: bool | None
    runtime_ms: float | None  # the candidate's mean runtime, when correct and timed
    ref_runtime_ms: float | None  # the reference's, when the source gives it
    speedup: float | None  # ref_runtime / runtime, or the source's own figure
    harness: str  # who labelled it: "KernelBench eval_results.json", "CUDA-L1 score", ...
    gpu: str
    error: str = ""  # the first line of the harness's error; "" when ok
    usable: bool = True
    unusable_reason: str = ""


@dataclass(frozen=True)
class Attempt:
    """One place a source published the program."""

    repo: str  # "owner/name"
    commit: str
    layout: str  # the reader that read it
    path: str  # file inside the repository (with "#key" for entries of one JSON file)
    run: str
    model: str
    label: Label
    trajectory: str = ""  # multi-turn runs: attempts of one trajectory share it; "" = single
    turn: int | None = None  # 0-based order of the attempt within its trajectory
    feedback: str = ""  # the execution feedback this attempt's prompt carried
    diagnosis: str = ""  # the LLM diagnosis of the previous attempt this prompt carried
    extraction: dict | None = None  # our extractor on the raw response, beside the source's code
    reference_differs: bool | None = (
        None  # the run's reference vs the checkout's; None: unpublished
    )


@dataclass
class CorpusRecord:
    problem: Problem
    code: str
    code_hash: str
    attempts: list[Attempt] = field(default_factory=list)
    version: str = RECORD_VERSION

    @property
    def key(self) -> str:
        return f"{self.problem.key}#{self.problem.reference_hash[:8]}#{self.code_hash[:16]}"

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict, where: str = "") -> CorpusRecord:
        try:
            attempts = [
                Attempt(**{**a, "label": Label(**a["label"])}) for a in d.get("attempts", [])
            ]
            return cls(
                problem=Problem(**d["problem"]),
                code=d["code"],
                code_hash=d["code_hash"],
                attempts=attempts,
                version=d.get("version", RECORD_VERSION),
            )
        except (KeyError, TypeError) as err:
            raise CorpusFormatError(
                f"{where}: not a corpus record ({err}); rebuild it with `maxcode runs import`"
            ) from err


def read_references(corpus: Path) -> dict[str, str]:
    """``references.json`` beside the corpus: reference text by content hash."""
    path = Path(corpus)
    path = (path if path.is_dir() else path.parent) / "references.json"
    if not path.is_file():
        raise CorpusFormatError(f"{path}: missing; rebuild the corpus with `maxcode runs import`")
    return json.loads(path.read_text())


def read_corpus(path: Path) -> list[CorpusRecord]:
    """The records of ``corpus.jsonl`` (or of the folder holding it)."""
    path = Path(path)
    if path.is_dir():
        path = path / "corpus.jsonl"
    if not path.is_file():
        raise CorpusFormatError(
            f"{path}: no corpus there; build one with `maxcode runs import --out DIR`"
        )
    out = []
    with open(path) as f:
        for n, line in enumerate(f, start=1):
            if line.strip():
                try:
                    d = json.loads(line)
                except json.JSONDecodeError as err:
                    raise CorpusFormatError(f"{path}: line {n}: not JSON ({err.msg})") from err
                out.append(CorpusRecord.from_dict(d, f"{path}: line {n}"))
    return out
