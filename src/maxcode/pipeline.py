"""What the Snakemake rules ask of the library: the job plan and one function per stage.

``workflow/scripts/*.py`` only unpack the ``snakemake`` object and call these, so every
stage can also be run and tested without Snakemake.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from maxcode.config import resolve_methods, validate_params
from maxcode.records import provenance, read_jsonl
from maxcode.search.config import ConfigError, MethodConfig
from maxcode.tasks.model import Task, TaskFormatError, read_tasks_jsonl, write_tasks_jsonl

BUILTIN_CPP_DIR = Path(__file__).parent / "tasks" / "builtin_cpp"
TABLE_NAMES = ("main", "ablation", "rerank", "budget")
PLOTS = ("speedup_vs_depth",)


@dataclass
class PipelinePlan:
    """Jobs derived from validated params: which task x method x seed files to build."""

    params: dict
    methods: dict[str, MethodConfig]
    tasks: dict[str, list[str]]  # suite -> task ids
    held_out: dict[str, list[str]]  # suite -> tasks the reward-to-go model never trains on

    @classmethod
    def from_config(cls, params: dict) -> PipelinePlan:
        validate_params(params)
        methods = resolve_methods(params)
        tasks = {name: suite_task_ids(name, cfg) for name, cfg in params["suites"].items()}
        from maxcode.r2g.dataset import split_tasks

        r2g = params["r2g"]
        test = split_tasks(
            {(s, t) for s, ids in tasks.items() for t in ids},
            r2g["test_fraction"],
            r2g["split_seed"],
        )
        held_out = {s: [t for t in ids if (s, t) in test] for s, ids in tasks.items()}
        return cls(params, methods, tasks, held_out)

    @property
    def seeds(self) -> list[int]:
        return list(self.params["search"]["seeds"])

    def rerank_methods(self) -> list[str]:
        return list(self.params["tables"]["rerank"])

    def rollouts(self, method: str) -> list[str]:
        """Reranking methods run on held-out tasks only, so the model never saw them."""
        task_sets = self.held_out if method in self.rerank_methods() else self.tasks
        return [
            f"results/rollouts/{suite}/{method}/{task}/seed{seed}.jsonl"
            for suite, ids in task_sets.items()
            for task in ids
            for seed in self.seeds
        ]

    def table_methods(self) -> list[str]:
        t = self.params["tables"]
        return list(dict.fromkeys([*t["main"], *t["ablation"], *t["rerank"]]))

    def all_rollouts(self) -> list[str]:
        return [p for m in self.table_methods() for p in self.rollouts(m)]

    def r2g_training_rollouts(self) -> list[str]:
        return [p for m in self.params["r2g"]["train_methods"] for p in self.rollouts(m)]

    def table_outputs(self) -> list[str]:
        out = [f"results/tables/{n}.{ext}" for n in TABLE_NAMES for ext in ("md", "csv", "tex")]
        out += [f"results/plots/{p}.png" for p in PLOTS]
        out += ["results/metrics.json", "results/plots/speedup_vs_depth.csv"]
        return out

    def inflight_path(self, wildcards) -> str:
        """Where a rollout grows until it is complete; the declared output appears only then."""
        w = wildcards
        return f"results/.inflight/{w.suite}/{w.method}/{w.task}/seed{w.seed}.jsonl"


def suite_task_ids(name: str, cfg: dict) -> list[str]:
    """Task ids known before the suite is built, so the job list is fixed at parse time."""
    if cfg["kind"] == "builtin_cpp":
        available = sorted(p.name for p in BUILTIN_CPP_DIR.iterdir() if (p / "slow.cpp").is_file())
        wanted = cfg.get("problems") or available
        unknown = sorted(set(wanted) - set(available))
        if unknown:
            raise ConfigError(
                f"suites.{name}.problems: unknown problem(s) {unknown}; available: {available}"
            )
        return list(wanted)
    if cfg["kind"] == "pie":
        records = Path(cfg["records"])
        if not records.is_file():
            raise ConfigError(
                f"suites.{name}.records: {records} does not exist (point it at your PIE checkout)"
            )
        ids = []
        for lineno, rec in enumerate(read_jsonl(records), 1):
            if "problem_id" not in rec:
                raise TaskFormatError(f"{records}:{lineno}: record has no 'problem_id' field")
            if rec["problem_id"] not in ids:
                ids.append(rec["problem_id"])
        return ids[: cfg.get("limit") or None]
    raise ConfigError(f"suites.{name}.kind: {cfg['kind']!r} is not a known suite kind")


# ---- stages -------------------------------------------------------------------------


def build_suite(name: str, cfg: dict, out_dir: Path) -> list[Task]:
    """Write ``out_dir/tasks.jsonl`` (normalized tasks) beside the suite's PIE-layout tests."""
    out_dir = Path(out_dir)
    if cfg["kind"] == "builtin_cpp":
        from maxcode.tasks.builtin import materialize_builtin_cpp

        tasks = materialize_builtin_cpp(
            out_dir,
            n_tests=cfg.get("n_tests", 5),
            seed=cfg.get("seed", 0),
            problems=cfg.get("problems") or None,
        )
    else:
        from maxcode.tasks.pie import load_pie_records

        tasks = load_pie_records(Path(cfg["records"]), Path(cfg["tests_root"]), name)
        tasks = tasks[: cfg.get("limit") or None]
    write_tasks_jsonl(tasks, out_dir / "tasks.jsonl")
    return tasks


def load_task(suite_dir: Path, task_id: str) -> Task:
    for task in read_tasks_jsonl(Path(suite_dir) / "tasks.jsonl"):
        if task.task_id == task_id:
            return task
    raise TaskFormatError(f"{suite_dir}/tasks.jsonl: no task {task_id!r}; rebuild the suite")


def load_params_file(path: Path) -> dict:
    return yaml.safe_load(Path(path).read_text())


def rollout_provenance(params: dict) -> dict:
    return provenance(params)
