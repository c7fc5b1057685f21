"""Load PIE (Performance-Improving Edits) records as tasks.

Two record formats exist in the wild:

- current (PIE release, and the built-in suite): ``problem_id``, ``src_code`` (slow
  program), ``tgt_code`` (faster program), optional ``src_id``/``tgt_id``, ``n_tests``,
  ``tests`` and runtimes such as ``src_agg_runtime``/``tgt_agg_runtime``;
- older (pie-perf jsonl splits): ``problem_id``, ``input`` (slow program), ``target``
  (faster program), ``submission_id_v0``/``v1``, ``cpu_time_v0``/``v1``, ``language``.

Test cases live in ``<tests_root>/<problem_id>/input.<i>.txt`` / ``output.<i>.txt``. Several
records may share a problem (different users' submissions); each becomes its own task,
named ``<problem_id>`` when alone and ``<problem_id>_<submission id>`` otherwise.
"""

from __future__ import annotations

import json
from pathlib import Path

from maxcode.errors import TaskFormatError
from maxcode.tasks.model import Task, discover_tests

FORMATS = {
    "current": {"source": "src_code", "target": "tgt_code", "id": "src_id"},
    "older": {"source": "input", "target": "target", "id": "submission_id_v0"},
}
# Recorded measurements and ids kept in Task.metadata when a record has them, so our
# verdicts and timings can be compared with PIE's (field names as in the PIE releases).
RECORDED_FIELDS = (
    "src_agg_runtime",
    "tgt_agg_runtime",
    "fastest_agg_runtime",
    "fastest_agg_runtime_updated",
    "speedup",
    "src_status",
    "tgt_status",
    "tgt_id",
    "user_id",
    "cpu_time_v0",
    "cpu_time_v1",
    "measured_runtime_v0",
    "measured_runtime_v1",
    "memory_v0",
    "memory_v1",
    "status_v0",
    "status_v1",
    "submission_id_v1",
    "runtime_lift",
    "improvement_frac",
)
CPP_LANGUAGES = {"cpp", "c++", "C++", "cc"}
_DESCRIPTIVE = ("title", "description", "slowness", "slowness_cause", "helpful_transformations")


def record_format(record: dict) -> str | None:
    """``"current"`` or ``"older"`` by the source field present; None when neither is."""
    for name, fields in FORMATS.items():
        if fields["source"] in record:
            return name
    return None


def load_pie_records(records_path: Path, tests_root: Path, suite: str) -> list[Task]:
    """Tasks (language "cpp") from a PIE jsonl file whose tests lie under ``tests_root``."""
    records_path, tests_root = Path(records_path), Path(tests_root)
    if not records_path.is_file():
        raise TaskFormatError(f"{records_path}: PIE records file does not exist")
    if not tests_root.is_dir():
        raise TaskFormatError(
            f"{tests_root}: tests root does not exist; it must hold <problem_id>/input.<i>.txt"
        )
    records = []
    for lineno, line in enumerate(records_path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        where = f"{records_path}:{lineno}"
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            raise TaskFormatError(f"{where}: not JSON ({err})") from err
        if not isinstance(record, dict):
            raise TaskFormatError(f"{where}: a record must be a JSON object")
        records.append((where, record))
    if not records:
        raise TaskFormatError(f"{records_path}: no records")
    counts: dict[str, int] = {}
    for _, r in records:
        pid = r.get("problem_id")
        if isinstance(pid, str):
            counts[pid] = counts.get(pid, 0) + 1
    tasks = [_task(where, r, tests_root, suite, counts) for where, r in records]
    seen: dict[str, str] = {}
    for (where, _), task in zip(records, tasks, strict=True):
        if task.task_id in seen:
            raise TaskFormatError(
                f"{where}: task id {task.task_id!r} repeats {seen[task.task_id]}; give each "
                "record of a problem a distinct src_id / submission_id_v0"
            )
        seen[task.task_id] = where
    return tasks


def _task(where: str, r: dict, tests_root: Path, suite: str, counts: dict[str, int]) -> Task:
    fmt = record_format(r)
    if fmt is None:
        raise TaskFormatError(
            f"{where}: no program field; a PIE record needs 'src_code' (current format) "
            "or 'input' (older format)"
        )
    fields = FORMATS[fmt]
    pid = _str(where, r, "problem_id")
    source = _str(where, r, fields["source"])
    target = r.get(fields["target"])
    if target is not None and not isinstance(target, str):
        raise TaskFormatError(f"{where}: field {fields['target']!r} must be a string or absent")
    language = r.get("language", "cpp")
    if language not in CPP_LANGUAGES:
        raise TaskFormatError(
            f"{where}: field 'language' is {language!r}; only C++ records can be loaded "
            f"(one of {sorted(CPP_LANGUAGES)})"
        )
    tests_dir = tests_root / pid
    try:
        cases = discover_tests(tests_dir)
    except TaskFormatError as err:
        raise TaskFormatError(f"{where}: problem {pid!r}: {err}") from err
    n_tests = r.get("n_tests")
    if n_tests is not None:
        if not isinstance(n_tests, int) or isinstance(n_tests, bool) or n_tests < 1:
            raise TaskFormatError(
                f"{where}: field 'n_tests' must be a positive integer, got {n_tests!r}"
            )
        if len(cases) != n_tests:
            raise TaskFormatError(
                f"{where}: field 'n_tests' says {n_tests} but {tests_dir} holds {len(cases)} "
                "test pairs; regenerate the tests or fix the record"
            )
    task_id = pid
    if counts.get(pid, 0) > 1:
        sub = r.get(fields["id"])
        if not isinstance(sub, str) or not sub:
            raise TaskFormatError(
                f"{where}: problem {pid!r} has several records, so field {fields['id']!r} "
                "(a non-empty string) is needed to tell them apart"
            )
        task_id = f"{pid}_{sub}"
    metadata = {k: r[k] for k in RECORDED_FIELDS if k in r}
    metadata.update({k: r[k] for k in _DESCRIPTIVE if k in r and k != "description"})
    metadata["pie_format"] = fmt
    if fields["id"] in r:
        metadata["submission_id"] = r[fields["id"]]
    description = r.get("description") or r.get("title") or ""
    if not isinstance(description, str):
        raise TaskFormatError(f"{where}: field 'description' must be a string")
    return Task(
        task_id=task_id,
        suite=suite,
        language="cpp",
        reference_source=source,
        tests_dir=tests_dir,
        target_source=target,
        description=description,
        metadata=metadata,
    )


def _str(where: str, r: dict, key: str) -> str:
    if key not in r:
        raise TaskFormatError(f"{where}: missing field {key!r}")
    value = r[key]
    if not isinstance(value, str) or not value.strip():
        raise TaskFormatError(
            f"{where}: field {key!r} must be a non-empty string, got {type(value).__name__}"
        )
    return value
