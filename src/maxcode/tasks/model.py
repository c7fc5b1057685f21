"""The task every evaluator, policy and table agrees on.

A task is one program (C++) or one model (CUDA) to make faster. Tests live on disk
in PIE's layout (``<tests_dir>/input.<i>.txt`` / ``output.<i>.txt``) so that a
candidate never sees expected outputs in its own working directory.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal

from maxcode.errors import TaskFormatError

Language = Literal["cpp", "cuda"]


@dataclass(frozen=True)
class TestCase:
    index: int
    input_path: Path
    output_path: Path


@dataclass(frozen=True)
class Task:
    """One optimization problem.

    ``reference_source`` is the program to beat (PIE's ``src_code``; KernelBench's
    ``Model`` file). ``target_source`` is a known faster solution when the suite has
    one (PIE's ``tgt_code``); it is never shown to a policy.
    """

    task_id: str
    suite: str
    language: Language
    reference_source: str
    tests_dir: Path | None = None
    target_source: str | None = None
    description: str = ""
    tags: tuple[str, ...] = ()
    metadata: dict = field(default_factory=dict)

    def tests(self) -> list[TestCase]:
        """Test cases found on disk, sorted by index; pairs must be complete."""
        if self.tests_dir is None:
            return []
        return discover_tests(self.tests_dir)

    def content_hash(self) -> str:
        """Hash of everything that decides a verdict: reference and test files."""
        h = hashlib.sha256()
        h.update(self.language.encode())
        h.update(self.reference_source.encode())
        for case in self.tests():
            h.update(case.input_path.read_bytes())
            h.update(case.output_path.read_bytes())
        return h.hexdigest()[:16]

    def to_dict(self) -> dict:
        d = asdict(self)
        d["tests_dir"] = str(self.tests_dir) if self.tests_dir else None
        d["tags"] = list(self.tags)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> Task:
        d = dict(d)
        d["tests_dir"] = Path(d["tests_dir"]) if d.get("tests_dir") else None
        d["tags"] = tuple(d.get("tags", ()))
        return cls(**d)


def discover_tests(tests_dir: Path) -> list[TestCase]:
    """PIE layout: ``input.<i>.txt`` with a matching ``output.<i>.txt``."""
    tests_dir = Path(tests_dir)
    if not tests_dir.is_dir():
        raise TaskFormatError(f"{tests_dir}: tests directory does not exist")
    cases = []
    for inp in tests_dir.glob("input.*.txt"):
        idx_text = inp.name[len("input.") : -len(".txt")]
        if not idx_text.isdigit():
            raise TaskFormatError(f"{inp}: test file name must be input.<integer>.txt")
        out = tests_dir / f"output.{idx_text}.txt"
        if not out.is_file():
            raise TaskFormatError(
                f"{inp}: no matching {out.name}; every input.<i>.txt needs an output.<i>.txt"
            )
        cases.append(TestCase(int(idx_text), inp, out))
    for out in tests_dir.glob("output.*.txt"):
        if not (tests_dir / out.name.replace("output.", "input.", 1)).is_file():
            raise TaskFormatError(f"{out}: no matching input file")
    if not cases:
        raise TaskFormatError(f"{tests_dir}: no input.<i>.txt/output.<i>.txt pairs found")
    return sorted(cases, key=lambda c: c.index)


def write_tasks_jsonl(tasks: list[Task], path: Path) -> None:
    from maxcode.records import atomic_write_text

    atomic_write_text(path, "".join(json.dumps(t.to_dict(), sort_keys=True) + "\n" for t in tasks))


def read_tasks_jsonl(path: Path) -> list[Task]:
    path = Path(path)
    if not path.is_file():
        raise TaskFormatError(f"{path}: task file does not exist; run the suites stage first")
    tasks = []
    for lineno, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            tasks.append(Task.from_dict(json.loads(line)))
        except (json.JSONDecodeError, TypeError) as err:
            raise TaskFormatError(f"{path}:{lineno}: not a task record ({err})") from err
    return tasks
