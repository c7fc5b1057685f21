"""The papers' published numbers, shown in a ``reference`` column next to ours.

The numbers are typed in from the source documents into ``data/paper_reference.yaml``;
each names its paper, where in the paper it comes from, and the benchmark it was
measured on. A suite opts in with ``suites.<name>.paper_benchmark``; nothing is matched
by guessing. The papers ran other hardware, models and budgets, so every table that
shows a reference says so next to it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import yaml

from maxcode.errors import ReferenceFormatError

REFERENCE_PREFIX = "reference: "
_ENTRY_FIELDS = {"table", "method", "benchmark", "column", "value", "source", "note"}
_SOURCE_FIELDS = {"title", "cite", "where", "setup"}


@dataclass(frozen=True)
class Source:
    key: str
    title: str
    cite: str
    where: str
    setup: str


@dataclass(frozen=True)
class Entry:
    table: str
    method: str
    benchmark: str
    column: str
    value: float
    source: str
    note: str = ""


@dataclass(frozen=True)
class ReferenceBook:
    path: Path
    benchmarks: dict[str, str]  # id -> display name
    sources: dict[str, Source]
    entries: tuple[Entry, ...]

    def columns(self, table: str) -> list[str]:
        """Columns of ``table`` that have a published number, in file order."""
        return list(dict.fromkeys(e.column for e in self.entries if e.table == table))

    def lookup(self, table: str, method: str, benchmark: str | None, column: str) -> Entry | None:
        if benchmark is None:
            return None
        for e in self.entries:
            if (e.table, e.method, e.benchmark, e.column) == (table, method, benchmark, column):
                return e
        return None


def load_reference(path: Path | str) -> ReferenceBook:
    """Read and check the reference file; every error names the file, the entry and the field."""
    path = Path(path)
    if not path.is_file():
        raise ReferenceFormatError(
            f"tables.reference: {path} does not exist; restore it from the repository "
            "(data/paper_reference.yaml) or set tables.reference: null"
        )
    try:
        doc = yaml.safe_load(path.read_text())
    except yaml.YAMLError as err:
        raise ReferenceFormatError(f"{path}: not valid YAML: {err}") from err
    if not isinstance(doc, dict) or not {"benchmarks", "sources", "values"} <= set(doc):
        raise ReferenceFormatError(f"{path}: needs top-level keys benchmarks, sources, values")
    benchmarks = {str(k): str(v) for k, v in doc["benchmarks"].items()}
    sources = {}
    for key, src in doc["sources"].items():
        missing = _SOURCE_FIELDS - set(src or {})
        if missing:
            raise ReferenceFormatError(f"{path}: sources.{key}: missing {sorted(missing)}")
        sources[key] = Source(key, **{f: str(src[f]) for f in _SOURCE_FIELDS})
    entries = []
    seen = set()
    for i, raw in enumerate(doc["values"]):
        where = f"{path}: values[{i}]"
        if not isinstance(raw, dict):
            raise ReferenceFormatError(f"{where}: must be a mapping with {sorted(_ENTRY_FIELDS)}")
        unknown = set(raw) - _ENTRY_FIELDS
        missing = _ENTRY_FIELDS - {"note"} - set(raw)
        if unknown or missing:
            raise ReferenceFormatError(
                f"{where}: unknown field(s) {sorted(unknown)}, missing {sorted(missing)}"
            )
        if raw["source"] not in sources:
            raise ReferenceFormatError(
                f"{where}.source: {raw['source']!r} is not under sources ({sorted(sources)})"
            )
        if raw["benchmark"] not in benchmarks:
            raise ReferenceFormatError(
                f"{where}.benchmark: {raw['benchmark']!r} is not under benchmarks "
                f"({sorted(benchmarks)})"
            )
        if isinstance(raw["value"], bool) or not isinstance(raw["value"], int | float):
            raise ReferenceFormatError(f"{where}.value: {raw['value']!r} is not a number")
        entry = Entry(**{**raw, "value": float(raw["value"]), "note": raw.get("note", "")})
        key = (entry.table, entry.method, entry.benchmark, entry.column)
        if key in seen:
            raise ReferenceFormatError(f"{where}: a second value for {key}; keep one")
        seen.add(key)
        entries.append(entry)
    return ReferenceBook(path, benchmarks, sources, tuple(entries))


def check_suite_benchmarks(book: ReferenceBook, suites: dict) -> None:
    """Each suite's ``paper_benchmark`` must be one the reference file knows."""
    for name, cfg in suites.items():
        bench = cfg.get("paper_benchmark")
        if bench is not None and bench not in book.benchmarks:
            raise ReferenceFormatError(
                f"suites.{name}.paper_benchmark: {bench!r} is not a benchmark of {book.path} "
                f"(known: {sorted(book.benchmarks)})"
            )


def reference_cells(
    book: ReferenceBook, table: str, method: str, benchmark: str | None
) -> tuple[list[float], list[Entry]]:
    """One cell per reference column of ``table`` (NaN where the papers give no number)."""
    found = [book.lookup(table, method, benchmark, col) for col in book.columns(table)]
    cells = [e.value if e else math.nan for e in found]
    return cells, [e for e in found if e]


def reference_notes(
    book: ReferenceBook, used: list[Entry], suites: dict[str, str | None]
) -> list[str]:
    """What the reference columns are, where each number comes from, and why they differ."""
    if not book.entries:
        return []
    shown = {s: b for s, b in suites.items() if b}
    notes = [
        "reference columns: the papers' published numbers, typed in from the papers "
        f"({book.path.name}); measured on other hardware, with other models, tasks and "
        "budgets than this run: context, not a like-for-like comparison",
        "reference benchmark per suite: "
        + (
            ", ".join(f"{s} -> {book.benchmarks[b]}" for s, b in sorted(shown.items()))
            if shown
            else "none (set suites.<name>.paper_benchmark to show one)"
        ),
    ]
    for key in sorted({e.source for e in used}):
        src = book.sources[key]
        notes.append(f"reference source [{key}]: {src.title}, {src.cite}; {src.where}; {src.setup}")
    notes += [f"reference note ({e.method}, {e.benchmark}): {e.note}" for e in used if e.note]
    return notes


def kernelcompare_context(
    params: dict, stages: list[str]
) -> tuple[list[str], dict[str, list[str]], dict[str, str]]:
    """Header notes, reference columns and the CSV's run context for the KernelCompare table.

    ``stages`` are the row names in order; the report's numbers are matched by row name
    on the benchmark of ``kernelcompare.sources.suite``.
    """
    from maxcode.records import hardware_fingerprint

    kc = params.get("kernelcompare") or {}
    model = kc.get("model") or {}
    suite = (kc.get("sources") or {}).get("suite", "?")
    model_label = model.get("name_or_path") or "a tiny model built from a config (offline)"
    hw = hardware_fingerprint()
    hardware = f"{hw['cpu']} ({hw['cores']} cores)" + (
        f"; GPU {', '.join(hw['gpus'])}" if hw.get("gpus") else ""
    )
    heldout = (kc.get("heldout") or {}).get("max_new_tokens", "default")
    notes = [
        f"preset: {params.get('preset', '?')}",
        f"models: base {model_label}; its SFT adapter; GRPO from the SFT adapter",
        f"tasks: the held-out split of suite {suite} (kernelcompare.split)",
        "budget (params; unset keys keep the report's recipe): "
        f"sft {kc.get('sft') or {}}, grpo {kc.get('grpo') or {}}, "
        f"held-out generation max_new_tokens {heldout}",
        f"hardware: {hardware}",
    ]
    meta = {"preset": str(params.get("preset", "?")), "models": model_label, "hardware": hardware}
    path = (params.get("tables") or {}).get("reference")
    if not path:
        return notes, {}, meta
    book = load_reference(path)
    benchmark = ((params.get("suites") or {}).get(suite) or {}).get("paper_benchmark")
    extra, used = {}, []
    for column in book.columns("kernelcompare"):
        found = [book.lookup("kernelcompare", s, benchmark, column) for s in stages]
        extra[REFERENCE_PREFIX + column] = [f"{e.value:.0%}" if e else "-" for e in found]
        used += [e for e in found if e]
    if extra:
        notes += reference_notes(book, used, {suite: benchmark})
    return notes, extra, meta
