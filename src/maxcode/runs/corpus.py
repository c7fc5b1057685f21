"""Build the corpus: read every source, name each problem after the user's KernelBench
checkout, merge duplicate programs, check the project's extractor against the sources'
extracted code, and publish ``corpus.jsonl`` with its card.
"""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, replace
from pathlib import Path

from maxcode.errors import CorpusFormatError
from maxcode.llm.extract import extract_code, is_program
from maxcode.records import atomic_write_json, atomic_write_text
from maxcode.runs.card import card_markdown, make_card
from maxcode.runs.layouts import LAYOUTS, Found
from maxcode.runs.record import CorpusRecord, Problem, code_hash, text_hash

SOURCE_SPEC = re.compile(r"^(?P<layout>[\w-]+):(?P<path>[^@]+)(?:@(?P<commit>[0-9a-fA-F]{4,40}))?$")


@dataclass(frozen=True)
class SourceSpec:
    layout: str
    path: Path
    commit: str
    repo: str

    @classmethod
    def parse(cls, text: str) -> SourceSpec:
        """``LAYOUT:PATH[@COMMIT]``, e.g. ``kernel-coder:.kb/kernel-coder@5a9fb0c``."""
        m = SOURCE_SPEC.match(text)
        if m is None or m.group("layout") not in LAYOUTS:
            raise CorpusFormatError(
                f"--source {text!r}: write LAYOUT:PATH[@COMMIT] with LAYOUT one of {sorted(LAYOUTS)}"
            )
        path = Path(m.group("path"))
        if not path.exists():
            raise CorpusFormatError(f"--source {text!r}: {path} does not exist")
        return cls(m.group("layout"), path, m.group("commit") or "", LAYOUTS[m.group("layout")][1])


class Checkout:
    """The user's KernelBench problems (``KernelBench/level<L>/<P>_<Name>.py``)."""

    def __init__(self, root: Path):
        root = Path(root)
        if (root / "KernelBench").is_dir() and not (root / "level1").is_dir():
            root = root / "KernelBench"
        if not (root / "level1").is_dir():
            raise CorpusFormatError(
                f"--kernelbench {root}: no level1/ folder; point it at KernelBench's KernelBench/ folder"
            )
        self.root = root
        self.files: dict[tuple[int, int], Path] = {}
        for level_dir in root.glob("level*"):
            if not level_dir.name[5:].isdigit():
                continue
            for f in level_dir.glob("*.py"):
                head = f.name.split("_", 1)[0]
                if head.isdigit():
                    self.files[(int(level_dir.name[5:]), int(head))] = f

    def problem(self, level: int, problem_id: int) -> Path | None:
        return self.files.get((level, problem_id))


def same_text(a: str, b: str) -> bool:
    return a.replace("\r\n", "\n").strip() == b.replace("\r\n", "\n").strip()


def extraction_check(raw: str, source_code: str) -> dict:
    """Our extractor on the raw response, against the code the source extracted.

    ``kind`` names the case. Agreeing: ``same``, ``whitespace`` (equal up to blank space),
    ``neither has code`` (both found no program). Disagreeing: ``source kept no code`` and
    ``source kept a non-program block`` (we found a block defining ``ModelNew``, the source kept
    nothing or another block, such as its last block of prose or of ``get_inputs``),
    ``truncated answer`` (the answer ends inside a code block: we keep nothing), ``no code
    found`` (we found none where the source kept a program), ``thinking block`` (the response
    holds reasoning tags), ``several code blocks`` (both programs, from different blocks),
    ``other``.
    """
    ours = extract_code(raw, "cuda")
    base = {"ours_found": ours.source is not None, "blocks": ours.n_blocks, "reason": ours.reason}
    source_is_program = is_program(source_code, "cuda")
    if ours.source is not None and ours.source == source_code.rstrip() + "\n":
        return {**base, "agrees": True, "kind": "same"}
    if ours.source is not None and _squash(ours.source) == _squash(source_code):
        return {**base, "agrees": True, "kind": "whitespace"}
    if ours.source is None and not source_is_program:
        return {**base, "agrees": True, "kind": "neither has code"}
    if ours.source is None:
        kind = "truncated answer" if "unterminated" in ours.reason else "no code found"
    elif not source_code.strip():
        kind = "source kept no code"
    elif not source_is_program:
        kind = "source kept a non-program block"
    elif "think>" in raw.lower():
        kind = "thinking block"
    elif ours.n_blocks > 1:
        kind = "several code blocks"
    else:
        kind = "other"
    return {**base, "agrees": False, "kind": kind}


def _squash(text: str) -> str:
    return re.sub(r"\s+", "", text)


def import_corpus(sources: list[SourceSpec], kernelbench: Path, out: Path) -> dict:
    """Read ``sources``; write ``out/corpus.jsonl``, ``references.json`` (each reference a run
    used, by content hash: a program is evaluated against the reference its run used),
    ``card.json`` and ``card.md``; return the card.

    Duplicates merge by (problem, reference, code hash): the same program for a problem whose
    reference changed between KernelBench versions is another candidate.
    """
    checkout = Checkout(kernelbench)
    records: dict[tuple[str, str, str], CorpusRecord] = {}
    references: dict[str, str] = {}
    skipped: Counter[str] = Counter()
    attempts_read: Counter[str] = Counter()
    for spec in sources:
        reader, _ = LAYOUTS[spec.layout]
        for found in reader(spec.path, spec.repo, spec.commit):
            attempts_read[spec.repo] += 1
            record = _record_of(found, checkout, references)
            if record is None:
                skipped[f"{spec.repo}: problem not in the --kernelbench checkout"] += 1
                continue
            key = (record.problem.key, record.problem.reference_hash, record.code_hash)
            if key in records:
                held = records[key]
                held.attempts.extend(record.attempts)
            else:
                records[key] = record
    ordered = sorted(
        records.values(), key=lambda r: (r.problem.level, r.problem.problem_id, r.code_hash)
    )
    out = Path(out)
    atomic_write_json(out / "references.json", dict(sorted(references.items())))
    atomic_write_text(
        out / "corpus.jsonl",
        "".join(json.dumps(r.to_dict(), sort_keys=True) + "\n" for r in ordered),
    )
    card = make_card(
        ordered,
        sources=[_spec_dict(s) for s in sources],
        skipped=dict(skipped),
        read=dict(attempts_read),
    )
    atomic_write_json(out / "card.json", card)
    atomic_write_text(out / "card.md", card_markdown(card))
    return card


def _spec_dict(spec: SourceSpec) -> dict:
    return {"layout": spec.layout, "repo": spec.repo, "commit": spec.commit, "path": str(spec.path)}


def _record_of(found: Found, checkout: Checkout, references: dict[str, str]) -> CorpusRecord | None:
    problem_file = checkout.problem(found.level, found.problem_id)
    if problem_file is None:
        return None
    ours = problem_file.read_text()
    reference = found.reference if found.reference is not None else ours
    differs = None if found.reference is None else not same_text(found.reference, ours)
    references[text_hash(reference)] = reference
    attempt = replace(found.attempt, reference_differs=differs)
    if found.raw_response is not None:
        attempt = replace(attempt, extraction=extraction_check(found.raw_response, found.code))
    return CorpusRecord(
        problem=Problem(found.level, found.problem_id, problem_file.name, text_hash(reference)),
        code=found.code,
        code_hash=code_hash(found.code),
        attempts=[attempt],
    )


def pools(records: list[CorpusRecord]) -> dict[str, list[CorpusRecord]]:
    """Records per problem key."""
    out: dict[str, list[CorpusRecord]] = defaultdict(list)
    for r in records:
        out[r.problem.key].append(r)
    return dict(out)
