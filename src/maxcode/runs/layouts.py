"""One reader per public layout of LLM-written KernelBench candidates.

Each reader walks a local copy of a public repository (never part of this project: the user
points at it) and yields :class:`Found` rows: the problem's level and id, the reference the
run used when the source publishes it, the candidate code, the model's raw response when
kept, and the attempt (source, model, run, turn, feedback, label).

- ``kernelbench-runs``: KernelBench's ``runs/<run>/level_<L>_problem_<P>_sample_<S>_kernel.py``
  with ``eval_results.json`` keyed by problem id and ``generation_config.yaml`` (as in
  technoabsurdist/KernelBench); the run's problem copy is ``KernelBench/level<L>/`` beside.
- ``kernel-coder``: ``runs/<run>/level_<L>_problem_<P>_{solution_<S>|epoch_<E>_sample_<S>}_kernel.py``
  with ``_response.txt`` beside, ``eval_results.json`` a list keyed by ``evaluation_id`` and
  ``config.yaml`` (j1mk1m/Kernel-Coder). Iterative-refinement runs are trajectories
  (solution index = turn); the run keeps no prompts, so an attempt's feedback is rebuilt from
  the previous attempt's label.
- ``kernelbench-agentic``: ``experiments/runs/<run>/gen_results.json`` (pango0/KernelBench-Agentic):
  per problem, turns with ``raw_response``, ``extracted_code``, ``eval``, the feedback the next
  turn saw and an LLM ``diagnosis``; the run's problem copy is ``KernelBench/KernelBench/``.
- ``cuda-l1``: ``optimized_cuda_code/<gpu>.json`` (deepreinforce-ai/CUDA-L1), a stream of JSON
  objects with ``ref_code``, ``custom_code`` and the reported speedup ``score_default``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import yaml

from maxcode.errors import CorpusFormatError
from maxcode.runs.kernelbench_format import first_line, kernelbench_label
from maxcode.runs.record import Attempt, Label


@dataclass(frozen=True)
class Found:
    level: int
    problem_id: int
    reference: str | None  # the run's own copy of the problem; None when not published
    code: str
    raw_response: str | None  # the model's whole answer, when the source keeps it
    attempt: Attempt


@dataclass(frozen=True)
class RunFile:
    """One kernel file of a KernelBench-format run folder."""

    level: int
    problem_id: int
    sample: int
    epoch: int | None
    path: Path


KERNEL_FILE = re.compile(
    r"^level_(\d+)_problem_(\d+)_(?:epoch_(\d+)_sample_(\d+)|sample_(\d+)|solution_(\d+))_kernel\.py$"
)


def run_files(run_dir: Path) -> list[RunFile]:
    """The kernel files of a run folder, sorted by level, problem, epoch and sample."""
    out = []
    for path in Path(run_dir).glob("level_*_kernel.py"):
        m = KERNEL_FILE.match(path.name)
        if m is None:
            continue
        epoch = int(m.group(3)) if m.group(3) is not None else None
        sample = next(int(g) for g in (m.group(4), m.group(5), m.group(6)) if g is not None)
        out.append(RunFile(int(m.group(1)), int(m.group(2)), sample, epoch, path))
    return sorted(out, key=lambda f: (f.level, f.problem_id, f.epoch or 0, f.sample))


def read_json(path: Path) -> object:
    if not path.is_file():
        raise CorpusFormatError(f"{path}: missing; the layout needs it beside the run's files")
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise CorpusFormatError(f"{path}: not JSON (line {err.lineno}): {err.msg}") from err


def _config(path: Path) -> dict:
    if not path.is_file():
        return {}
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as err:
        raise CorpusFormatError(f"{path}: not YAML ({err})") from err
    return data if isinstance(data, dict) else {}


def run_reference(problems: Path, level: int, problem_id: int) -> str | None:
    """``<problems>/level<L>/<P>_*.py`` as text, or None when the copy lacks it."""
    hits = sorted((Path(problems) / f"level{level}").glob(f"{problem_id}_*.py"))
    return hits[0].read_text() if hits else None


def _runs(root: Path, sub: str) -> list[Path]:
    folder = Path(root) / sub
    if not folder.is_dir():
        raise CorpusFormatError(
            f"{folder}: no such folder; point the source at the repository root"
        )
    return sorted(p for p in folder.iterdir() if p.is_dir())


# -- technoabsurdist/KernelBench ----------------------------------------------------------


def kernelbench_entries(run_dir: Path) -> Iterator[tuple[RunFile, dict]]:
    """Each sample-0 kernel of a ``runs/<run>`` folder with its ``eval_results.json`` entry;
    a kernel generated but never evaluated is skipped (there is no label to keep)."""
    results_path = Path(run_dir) / "eval_results.json"
    results = read_json(results_path)
    if not isinstance(results, dict):
        raise CorpusFormatError(f"{results_path}: expected an object keyed by problem id")
    for f in run_files(run_dir):
        entry = results.get(str(f.problem_id))
        if isinstance(entry, list):  # several samples per problem
            entry = next((e for e in entry if e.get("sample_id", 0) == f.sample), None)
        elif f.sample != 0:
            entry = None
        if entry is not None:
            yield f, entry


def read_kernelbench_runs(root: Path, repo: str, commit: str) -> Iterator[Found]:
    for run_dir in _runs(root, "runs"):
        if not (run_dir / "eval_results.json").is_file():
            continue  # a test folder without labels
        model = str(_config(run_dir / "generation_config.yaml").get("model_name", run_dir.name))
        for f, entry in kernelbench_entries(run_dir):
            label = _label(entry, run_dir / "eval_results.json", f.problem_id)
            yield Found(
                f.level,
                f.problem_id,
                run_reference(Path(root) / "KernelBench", f.level, f.problem_id),
                f.path.read_text(),
                None,
                Attempt(
                    repo=repo,
                    commit=commit,
                    layout="kernelbench-runs",
                    path=str(f.path.relative_to(root)),
                    run=run_dir.name,
                    model=model,
                    label=label,
                ),
            )


def _label(entry: object, where: Path, key: object) -> Label:
    try:
        return kernelbench_label(entry)  # type: ignore[arg-type]
    except CorpusFormatError as err:
        raise CorpusFormatError(f"{where}: {key}: {err}") from err


# -- j1mk1m/Kernel-Coder ------------------------------------------------------------------


def read_kernel_coder(root: Path, repo: str, commit: str) -> Iterator[Found]:
    for run_dir in _runs(root, "runs"):
        if not (run_dir / "eval_results.json").is_file():
            continue
        cfg = _config(run_dir / "config.yaml")
        model = str(cfg.get("model_name", run_dir.name)).removeprefix("hosted_vllm/")
        iterative = str(cfg.get("method", "")) == "iterative refinement"
        results_path = run_dir / "eval_results.json"
        entries = read_json(results_path)
        if not isinstance(entries, list):
            raise CorpusFormatError(f"{results_path}: expected a list of evaluations")
        by_id = {e.get("evaluation_id"): e for e in entries if isinstance(e, dict)}
        previous: tuple[tuple[int, int], Label] | None = None
        for f in run_files(run_dir):
            stem = f.path.name.removesuffix("_kernel.py")
            entry = by_id.get(stem)
            if entry is None:
                continue
            label = _label(entry, results_path, stem)
            response = f.path.with_name(f"{stem}_response.txt")
            turn = f.sample if iterative else None
            feedback = ""
            if iterative and previous is not None and previous[0] == (f.level, f.problem_id):
                feedback = label_feedback(previous[1])
            yield Found(
                f.level,
                f.problem_id,
                None,
                f.path.read_text(),
                response.read_text() if response.is_file() else None,
                Attempt(
                    repo=repo,
                    commit=commit,
                    layout="kernel-coder",
                    path=str(f.path.relative_to(root)),
                    run=run_dir.name,
                    model=model,
                    label=label,
                    trajectory=f"{run_dir.name}/L{f.level}/P{f.problem_id}" if iterative else "",
                    turn=turn,
                    feedback=feedback,
                ),
            )
            previous = ((f.level, f.problem_id), label)


def label_feedback(label: Label) -> str:
    """The previous attempt's verdict as the feedback text of a run that kept no prompts."""
    lines = [f"previous attempt: {label.verdict}"]
    if label.error:
        lines.append(f"error: {label.error}")
    if label.runtime_ms is not None:
        lines.append(f"runtime: {label.runtime_ms:g} ms")
    return "\n".join(lines)


# -- pango0/KernelBench-Agentic ------------------------------------------------------------


def read_agentic(root: Path, repo: str, commit: str) -> Iterator[Found]:
    problems = Path(root) / "KernelBench" / "KernelBench"
    for run_dir in _runs(root, "experiments/runs"):
        path = run_dir / "gen_results.json"
        if not path.is_file():
            continue
        data = read_json(path)
        if not isinstance(data, dict) or not isinstance(data.get("levels"), dict):
            raise CorpusFormatError(f"{path}: expected an object with 'meta' and 'levels'")
        model = str((data.get("meta") or {}).get("model", run_dir.name))
        for level_key, per_problem in sorted(data["levels"].items()):
            for pid_key, row in sorted(per_problem.items(), key=lambda kv: int(kv[0])):
                level, pid = int(level_key), int(pid_key)
                rel = f"{path.relative_to(root)}#levels.{level_key}.{pid_key}"
                reference = run_reference(problems, level, pid)
                turns = row.get("turns") or []
                if not turns:  # single-shot runs keep no evaluation: an unlabelled attempt
                    if row.get("extracted_code"):
                        yield Found(
                            level,
                            pid,
                            reference,
                            row["extracted_code"],
                            row.get("raw_response"),
                            Attempt(
                                repo,
                                commit,
                                "kernelbench-agentic",
                                rel,
                                run_dir.name,
                                model,
                                UNLABELLED,
                            ),
                        )
                    continue
                seen_feedback, seen_diagnosis = "", ""
                for t in turns:
                    if t.get("extracted_code"):
                        yield Found(
                            level,
                            pid,
                            reference,
                            t["extracted_code"],
                            t.get("raw_response"),
                            Attempt(
                                repo=repo,
                                commit=commit,
                                layout="kernelbench-agentic",
                                path=f"{rel}.turns.{t.get('turn')}",
                                run=run_dir.name,
                                model=model,
                                label=agentic_label(t.get("eval") or {}),
                                trajectory=f"{run_dir.name}/L{level}/P{pid}",
                                turn=int(t.get("turn", 0)),
                                feedback=seen_feedback,
                                diagnosis=seen_diagnosis,
                            ),
                        )
                    seen_feedback = str(t.get("feedback") or "")
                    seen_diagnosis = str((t.get("diagnosis") or {}).get("raw") or "")


UNLABELLED = Label(
    verdict="unlabelled",
    compiled=None,
    correct=None,
    runtime_ms=None,
    ref_runtime_ms=None,
    speedup=None,
    harness="",
    gpu="",
    usable=False,
    unusable_reason="the source published no evaluation of this attempt",
)


def agentic_label(ev: dict) -> Label:
    """A turn's ``eval``: KernelBench's fields plus ``ref_runtime``. An eval with no metadata
    recorded no GPU and no error: the harness did not report why, so it is not usable."""
    if not ev.get("metadata"):
        return Label(
            verdict="harness_error",
            compiled=None,
            correct=None,
            runtime_ms=None,
            ref_runtime_ms=None,
            speedup=None,
            harness="KernelBench-Agentic eval",
            gpu="",
            error=first_line(str(ev.get("error") or "")),
            usable=False,
            unusable_reason="the evaluation recorded no GPU and no error",
        )
    return kernelbench_label(
        {**ev, "compiled": bool(ev.get("compiled")), "correctness": bool(ev.get("correctness"))},
        harness="KernelBench-Agentic eval",
    )


# -- deepreinforce-ai/CUDA-L1 --------------------------------------------------------------


def read_json_stream(path: Path) -> list[dict]:
    """Every JSON object in the file, whatever the line breaks between or inside them."""
    path = Path(path)
    if not path.is_file():
        raise CorpusFormatError(
            f"{path}: no such file; point it at CUDA-L1's optimized_cuda_code/<gpu>.json"
        )
    text = path.read_text()
    decoder = json.JSONDecoder()
    rows, pos = [], 0
    while True:
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos == len(text):
            return rows
        try:
            row, pos = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as err:
            line = text.count("\n", 0, err.pos) + 1
            raise CorpusFormatError(f"{path}: line {line}: not JSON ({err.msg})") from err
        if not isinstance(row, dict):
            raise CorpusFormatError(f"{path}: value {len(rows) + 1} is not an object")
        rows.append(row)


CUDA_L1_GPUS = {
    "h100": "NVIDIA H100",
    "a100": "NVIDIA A100",
    "l40": "NVIDIA L40",
    "h20": "NVIDIA H20",
    "3090": "NVIDIA RTX 3090",
}


def read_cuda_l1(root: Path, repo: str, commit: str) -> Iterator[Found]:
    """``custom_code`` only: ``cuda_graph_code`` and ``cudnn_code`` are the reference with a
    CUDA graph or cuDNN flags (CUDA-L1's baselines), not the model's candidates."""
    path = Path(root)
    if path.is_dir():
        path = path / "optimized_cuda_code" / "h100.json"
    gpu = CUDA_L1_GPUS.get(path.stem, path.stem)
    for i, row in enumerate(read_json_stream(path), start=1):
        missing = [k for k in ("level_id", "task_id", "ref_code") if k not in row]
        if missing:
            raise CorpusFormatError(f"{path}: object {i} lacks {missing}")
        if not row.get("custom_code"):
            continue
        score = number(row.get("score_default"))
        label = Label(
            verdict="ok",
            compiled=True,
            correct=True,
            runtime_ms=None,
            ref_runtime_ms=None,
            speedup=score,
            harness="CUDA-L1 reported score",
            gpu=gpu,
            usable=score is not None,
            unusable_reason="" if score is not None else "no score_default",
        )
        yield Found(
            int(row["level_id"]),
            int(row["task_id"]),
            row["ref_code"],
            row["custom_code"],
            None,
            Attempt(
                repo=repo,
                commit=commit,
                layout="cuda-l1",
                path=f"{path.name}#{i}",
                run=path.stem,
                model="CUDA-L1",
                label=label,
            ),
        )


def number(value: object) -> float | None:
    try:
        return float(value)  # the set writes scores as strings
    except (TypeError, ValueError):
        return None


Reader = Callable[[Path, str, str], Iterator[Found]]

LAYOUTS: dict[str, tuple[Reader, str]] = {
    "kernelbench-runs": (read_kernelbench_runs, "technoabsurdist/KernelBench"),
    "kernel-coder": (read_kernel_coder, "j1mk1m/Kernel-Coder"),
    "kernelbench-agentic": (read_agentic, "pango0/KernelBench-Agentic"),
    "cuda-l1": (read_cuda_l1, "deepreinforce-ai/CUDA-L1"),
}
"""Layout name -> (reader, the public repository it was written for)."""
