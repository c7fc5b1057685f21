"""What the Snakemake rules ask of the library: the job plan and one function per stage.

``workflow/scripts/*.py`` only unpack the ``snakemake`` object and call these, so every
stage can also be run and tested without Snakemake.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from maxcode.errors import ConfigError, RunMismatch, TaskFormatError
from maxcode.evaluate.cuda.gpus import pinned_gpu
from maxcode.kernelcompare.params import KernelCompareParams
from maxcode.llm.config import role_config_from_dict
from maxcode.loader import load
from maxcode.params import (
    EvaluationParams,
    Params,
    Suite,
    TablesParams,
    load_suite,
)
from maxcode.r2g.dataset import split_tasks
from maxcode.r2g.reranker import load_reranker
from maxcode.records import atomic_write_json, provenance
from maxcode.report.reference import load_reference
from maxcode.report.runs import read_runs
from maxcode.roles import build_critic, build_evaluator, build_policy, require_prices, run_budget
from maxcode.search.config import MethodConfig
from maxcode.search.loop import RunContext, run_search
from maxcode.tasks.model import Task, read_tasks_jsonl, write_tasks_jsonl

EVAL_ENVS = {"cpp": "cpu-eval.yaml", "cuda": "gpu-eval.yaml"}  # conda env per task language
TABLE_NAMES = ("main", "ablation", "rerank", "budget")
TABLE_ROLES = ("generator", "critic")  # the LLM roles the tables' header names
PLOTS = ("speedup_vs_depth",)
TABLE_FORMATS = ("md", "csv", "tex", "html")  # html: the view in `snakemake --report`
# Every path the plan hands out, for the rules, the CLI and the dvc.yaml test alike.
SUITE_DIR = "data/suites/{suite}"
STAGE_DIR = "results/{stage}"  # rollouts | reranked
ROLLOUT = STAGE_DIR + "/{suite}/{method}/{task}/seed{seed}.jsonl"
INFLIGHT_DIR = "results/.inflight"
R2G_DATA = "data/r2g"  # the reward-to-go dataset: train.jsonl, test.jsonl, card.md, card.json
R2G_MODEL = "models/r2g"
R2G_RANKING = "results/r2g/ranking.json"
CORPUS_DIR = (
    "data/corpus"  # `maxcode runs import`: corpus.jsonl, references.json, card.md, card.json
)
R2G_CORPUS_DIR = "models/r2g-corpus"  # both reward-to-go kinds trained and ranked on the corpus
INFLIGHT = INFLIGHT_DIR + "/{stage}/{suite}/{method}/{task}/seed{seed}.jsonl"
TABLE = "results/tables/{name}.{ext}"
PLOT = "results/plots/{name}.png"
PLOT_DATA = "results/plots/{name}.csv"  # the plot's numbers, for `dvc plots`
METRICS = "results/metrics.json"
PROVENANCE = "results/provenance.json"
CACHE_DIR = ".cache"  # evaluation and LLM response caches, shared by every stage
# KernelCompare: the pairs (write_dataset puts <pairs>.stats.json and .card.md beside them),
# the split, one LoRA adapter per trained model stage, one held-out result per model stage.
KC_DATA = "data/kernelcompare"
KC_PAIRS = KC_DATA + "/pairs.jsonl"
KC_PAIRS_STATS = KC_DATA + "/pairs.stats.json"
KC_PAIRS_CARD = KC_DATA + "/pairs.card.md"
KC_SPLIT = KC_DATA + "/split.json"
KC_ADAPTER = "models/kernelcompare/{kcstage}"  # sft | grpo
KC_HELDOUT = "results/kernelcompare/heldout_{kcstage}.jsonl"  # base | sft | grpo
KC_TABLES = [TABLE.format(name="kernelcompare", ext=ext) for ext in TABLE_FORMATS]
CORPUS_TABLES = [TABLE.format(name="r2g_corpus", ext=ext) for ext in TABLE_FORMATS]
KC_LLM_CACHE = CACHE_DIR + "/kernelcompare"  # the llm naive generator's responses


@dataclass
class PipelinePlan:
    """Jobs derived from validated params: which task x method x seed files to build."""

    params: Params
    tasks: dict[str, list[str]]  # suite -> task ids
    held_out: dict[str, list[str]]  # suite -> tasks the reward-to-go model never trains on
    # Under replay: the held-out tasks as corpus problems ("L2/12_Gemm.py"), which the
    # corpus ranking keeps out of the reward-to-go model's training pools.
    held_out_problems: list[str] = field(default_factory=list)

    @classmethod
    def from_config(cls, raw: dict, source: str = "params.yaml") -> PipelinePlan:
        """The plan of a params mapping (Snakemake's ``config``), validated here, once;
        ``source`` names the file the params came from in every error message."""
        return cls.from_params(Params.from_dict(raw, source=source))

    @classmethod
    def from_params(cls, params: Params) -> PipelinePlan:
        tasks, unusable = {}, []
        for name, cfg in params.suites.items():
            try:
                tasks[name] = suite_task_ids(name, cfg)
            except (ConfigError, TaskFormatError) as err:
                unusable.append(str(err))
        unusable += _missing_replay_inputs(params)
        if unusable:  # every path to set at once (the paper preset has several `SET ME`s)
            raise ConfigError(f"{len(unusable)} input(s) cannot be read: " + "; ".join(unusable))
        dataset_cfg = params.r2g.dataset
        test = split_tasks(
            {(s, t) for s, ids in tasks.items() for t in ids},
            dataset_cfg.test_fraction,
            dataset_cfg.seed,
        )
        held_out = {s: [t for t in ids if (s, t) in test] for s, ids in tasks.items()}
        problems = []
        if params.replaying:
            for name, cfg in params.suites.items():
                keep = set(held_out[name])
                problems += [
                    f"L{t.metadata['level']}/{t.metadata['file_name']}"
                    for t in cfg.tasks(name)
                    if t.task_id in keep
                ]
        return cls(params, tasks, held_out, sorted(problems))

    @property
    def replaying(self) -> bool:
        """The generator replays the corpus (``llm.generator.backend: replay``)."""
        return self.params.replaying

    @property
    def corpus_dir(self) -> str:
        """The corpus folder: one the user imported, else the pipeline's import."""
        corpus = self.params.corpus
        return corpus.folder if corpus is not None and corpus.folder else CORPUS_DIR

    @property
    def reranker_dir(self) -> str:
        """The reward-to-go model of ``rerank: model`` methods: under replay the one the
        corpus ranking trains (kind ``r2g.kind``), else the one trained on rollouts."""
        if self.params.replaying:
            return f"{R2G_CORPUS_DIR}/{self.params.r2g.kind}"
        return R2G_MODEL

    @property
    def methods(self) -> dict[str, MethodConfig]:
        return self.params.methods

    @property
    def seeds(self) -> list[int]:
        return list(self.params.search.seeds)

    def rerank_methods(self) -> list[str]:
        return list(self.params.tables.rerank)

    def stage_of(self, method: str) -> str:
        """``reranked`` rollouts need the reward-to-go model; ``rollouts`` feed it."""
        return "reranked" if method in self.rerank_methods() else "rollouts"

    def rollouts(self, method: str) -> list[str]:
        """Reranking methods run on held-out tasks only, so the model never saw them."""
        stage = self.stage_of(method)
        task_sets = self.held_out if stage == "reranked" else self.tasks
        return [
            ROLLOUT.format(stage=stage, suite=suite, method=method, task=task, seed=seed)
            for suite, ids in task_sets.items()
            for task in ids
            for seed in self.seeds
        ]

    def table_methods(self) -> list[str]:
        t = self.params.tables
        return list(dict.fromkeys([*t.main, *t.ablation, *t.rerank]))

    def all_rollouts(self, stage: str | None = None) -> list[str]:
        methods = [m for m in self.table_methods() if stage in (None, self.stage_of(m))]
        return [p for m in methods for p in self.rollouts(m)]

    def suite_dirs(self) -> list[str]:
        return [SUITE_DIR.format(suite=suite) for suite in self.tasks]

    def r2g_training_rollouts(self) -> list[str]:
        return [p for m in self.params.r2g.train_methods for p in self.rollouts(m)]

    def table_outputs(self) -> list[str]:
        out = [TABLE.format(name=n, ext=ext) for n in TABLE_NAMES for ext in TABLE_FORMATS]
        out += [PLOT.format(name=p) for p in PLOTS]
        out += [METRICS, *(PLOT_DATA.format(name=p) for p in PLOTS)]
        return [*out, PROVENANCE]

    def gpus(self, suite: str) -> int:
        """GPUs one rollout of ``suite`` holds: CUDA suites time kernels on one GPU each."""
        if self.params.evaluation.replay.replays:
            return 0  # recorded outcomes stand in for the evaluator
        return 1 if self.params.suites[suite].language == "cuda" else 0

    def corpus_model_dirs(self) -> list[str]:
        """The reward-to-go models the corpus ranking trains, one per kind."""
        corpus = self.params.corpus
        return [f"{R2G_CORPUS_DIR}/{kind}" for kind in (corpus.kinds if corpus else ())]

    def conda_env(self, suite: str) -> str:
        """The rollout's conda env, relative to workflow/rules/: CUDA suites need the GPU one."""
        return "../../envs/" + EVAL_ENVS[self.params.suites[suite].language]

    def roles_of(self, method: str) -> list[str]:
        """The LLM roles a method's rollouts build (``llm.<role>`` is all they read of llm)."""
        return ["generator"] + (["critic"] if self.methods[method].critique else [])

    def language_of(self, suite: str) -> str:
        """The suite's task language: which ``evaluation.<language>`` its rollouts read."""
        return self.params.suites[suite].language

    def dvc_params(self, raw: dict) -> dict[str, list[str]]:
        """The params.yaml keys each DVC stage reads, as ``dvc.yaml`` lists them: what its
        rules pass to their jobs, and what decides which jobs exist.

        dvc.yaml serves every preset, so a stage lists what its jobs read under any of
        them: ``evaluation`` whole (a rollout reads ``reward`` and its suite language's
        block, ``cpp`` or ``cuda``), both LLM roles. ``suites`` and ``methods`` are listed
        whole too: their names are the user's, and DVC tracks only the keys dvc.yaml
        names, so a method added with ``dvc exp run -S`` and changed later would otherwise
        never rerun its rollouts. A key ``raw`` does not hold is listed by its nearest
        parent that it does, for the same reason."""
        rollouts = [
            "search",
            "methods",
            "evaluation",
            "llm.generator",
            "llm.critic",
            "tables.main",
            "tables.ablation",
            "tables.rerank",
        ]
        stages = {
            "suites": ["suites"],
            "rollouts": rollouts,
            "r2g": ["r2g", "search.gamma"],
            "reranked": [*rollouts, "r2g.dataset.test_fraction", "r2g.dataset.seed"],
        }
        if self.params.kernelcompare is not None:
            # The table's header and reference columns read the preset, the suite's
            # paper_benchmark and the reference file.
            stages["kernelcompare"] = [
                "kernelcompare",
                "evaluation",
                "llm.generator",
                "preset",
                "suites",
                "tables.reference",
            ]
        roles = [f"llm.{role}" for role in TABLE_ROLES]
        stages["tables"] = ["preset", "suites", "search", "methods", *roles, "tables"]
        return {stage: _held_keys(keys, raw) for stage, keys in stages.items()}

    def inflight_path(self, wildcards) -> str:
        """Where a rollout grows until it is complete; the declared output appears only then."""
        w = wildcards
        return INFLIGHT.format(
            stage=w.stage, suite=w.suite, method=w.method, task=w.task, seed=w.seed
        )


def _missing_replay_inputs(params: Params) -> list[str]:
    """The corpus folder and measurement files replay reads, where they do not exist."""
    missing = []
    corpus = params.corpus
    if (
        corpus is not None
        and corpus.folder
        and not (Path(corpus.folder) / "corpus.jsonl").is_file()
    ):
        missing.append(
            f"corpus.folder: {corpus.folder} holds no corpus.jsonl; set it to a folder "
            "`maxcode runs import` wrote"
        )
    for path in params.evaluation.replay.measurements:
        if not Path(path).is_file():
            missing.append(
                f"evaluation.replay.measurements: {path} does not exist; set it to a `maxcode eval runs` "
                "export (measurements.jsonl or results.jsonl)"
            )
    return missing


def _held_keys(keys: list[str], raw: dict) -> list[str]:
    """Each dotted key, or its nearest parent that ``raw`` holds; no repeats."""
    held = []
    for key in keys:
        node, parts = raw, []
        for part in key.split("."):
            if not isinstance(node, dict) or part not in node:
                break
            node = node[part]
            parts.append(part)
        if parts:
            held.append(".".join(parts))
    return list(dict.fromkeys(held))


def rollout_files(
    stage: str, suite: str, method: str, task: str, seed: int, out: Path | None = None
) -> tuple[Path, Path]:
    """A rollout's output and the file its records grow in until the run is complete: the
    plan's two paths (the rules' too, so ``maxcode rollout`` resumes a pipeline job's
    records and ``clean_inflight`` tidies up after it), or ``out`` with its in-flight file
    beside it (``maxcode rollout --out FILE``)."""
    keys = {"stage": stage, "suite": suite, "method": method, "task": task, "seed": seed}
    planned = Path(ROLLOUT.format(**keys))
    if out is None or Path(out) == planned:
        return planned, Path(INFLIGHT.format(**keys))
    return Path(out), Path(out).with_name(f".{Path(out).name}.inflight")


def kernelcompare_suite_dir(kc: KernelCompareParams | None) -> str:
    """The suite folder whose tasks KernelCompare splits, trains on and reports
    (``kernelcompare.sources.suite``), for the rules and the CLI's defaults alike."""
    if kc is None or kc.sources is None:
        raise ConfigError("kernelcompare.sources: set it to name the suite KernelCompare uses")
    return SUITE_DIR.format(suite=kc.sources.suite)


def suite_task_ids(name: str, cfg: Suite) -> list[str]:
    """Task ids known before the suite is built, so the job list is fixed at parse time."""
    return cfg.task_ids(name)


# ---- stages -------------------------------------------------------------------------


def build_suite(name: str, cfg: Suite, out_dir: Path) -> list[Task]:
    """Write ``out_dir/tasks.jsonl`` (normalized tasks), beside PIE-layout tests for C++ suites."""
    out_dir = Path(out_dir)
    tasks = [replace(t, suite=name) for t in cfg.tasks(name, out_dir)]  # the params' name
    write_tasks_jsonl(tasks, out_dir / "tasks.jsonl")
    return tasks


def load_task(suite_dir: Path, task_id: str) -> Task:
    for task in read_tasks_jsonl(Path(suite_dir) / "tasks.jsonl"):
        if task.task_id == task_id:
            return task
    raise TaskFormatError(f"{suite_dir}/tasks.jsonl: no task {task_id!r}; rebuild the suite")


def run_rollout(
    *,
    suite_dir: Path,
    task_id: str,
    method: dict,
    seed: int,
    llm: dict,
    evaluation: dict,
    inflight: Path,
    output: Path,
    cache_dir: Path,
    model_dir: Path | None,
    params: dict,
    corpus: Path | None = None,
) -> dict:
    """One task x method x seed; the declared output appears only when the run is complete.

    ``method`` and ``evaluation`` come as Snakemake passes them (plain values, so a change
    reruns the job) and go back to their types through the one strict loader. With
    ``llm.generator.backend: replay`` the policy draws ``corpus``'s programs with the run's
    seed, scored by ``evaluation.replay``'s recorded outcomes or by this machine's evaluator.
    """
    task = load_task(suite_dir, task_id)
    cfg = MethodConfig.from_dict(method)
    evaluation_cfg = load(EvaluationParams, evaluation, "evaluation")
    policy = replayed = None
    if llm["generator"].get("backend") == "replay":
        from maxcode.runs.replay import ReplayCorpus  # the corpus: only for replayed runs

        if corpus is None:
            raise ConfigError("llm.generator.backend: replay needs the corpus (a corpus block)")
        replay_cfg = evaluation_cfg.replay
        source = ReplayCorpus.load(
            Path(corpus), [Path(m) for m in replay_cfg.measurements], replay_cfg.published_labels
        )
        policy = source.policy(seed)
        replayed = source.evaluator(", ".join(replay_cfg.measurements) or "published labels")
    roles = ["generator"] + (["critic"] if cfg.critique else [])
    require_prices(
        [role_config_from_dict(r, llm.get(r)) for r in roles],
        cfg.budget,
        f"set price_input_per_mtok and price_output_per_mtok under llm.<role> (method {cfg.name})",
    )
    spend = run_budget(cfg.budget, f"raise methods.{cfg.name}.budget.{{field}} (or search.budget)")
    reranker = load_reranker(Path(model_dir)) if cfg.rerank == "model" else None
    # A CUDA rollout holds one GPU of the host and sees only that one; its records say which.
    on_gpu = task.language == "cuda" and replayed is None
    pin = pinned_gpu(Path(cache_dir) / "gpu-slots") if on_gpu else nullcontext()
    with pin as gpu:
        ctx = RunContext(
            task=task,
            method=cfg,
            seed=seed,
            policy=policy
            or build_policy(llm["generator"], task.language, cache_dir, run_budget=spend),
            evaluator=build_evaluator(
                task.language, evaluation_cfg, cache_dir, profile=cfg.profile, replayed=replayed
            ),
            critic=build_critic(llm["critic"], task.language, cache_dir, run_budget=spend)
            if cfg.critique
            else None,
            reranker=reranker,
            reward_kind=evaluation_cfg.reward,
            provenance=provenance(params, **({"gpu_device": gpu} if on_gpu else {})),
            llm_budget=spend,
        )
        inflight = Path(inflight)
        inflight.parent.mkdir(parents=True, exist_ok=True)
        with unit_lock(inflight):
            try:
                end = run_search(ctx, inflight)
            except RunMismatch:
                # Scratch records of an older configuration (Snakemake reruns the job because
                # its params changed): start over; the caches replay what is still valid.
                inflight.unlink()
                end = run_search(ctx, inflight)
            publish(inflight, Path(output))
    return end


def clean_inflight(root: Path = Path(".")) -> list[Path]:
    """After a finished run: drop in-flight records whose published rollout holds the same
    bytes, their locks, and folders left empty. An in-flight file without its published
    twin is unfinished work and stays. Returns what was removed."""
    inflight_dir = Path(root) / INFLIGHT_DIR
    removed: list[Path] = []
    for records in sorted(inflight_dir.rglob("*.jsonl")) if inflight_dir.is_dir() else []:
        published = Path(root) / "results" / records.relative_to(inflight_dir)
        if published.is_file() and _same_file(records, published):
            lock = records.with_name(records.name + ".lock")
            for path in (records, lock):
                if path.exists():
                    path.unlink()
                    removed.append(path)
    for folder in sorted(inflight_dir.rglob("*"), key=lambda p: -len(p.parts)):
        if folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()
    if inflight_dir.is_dir() and not any(inflight_dir.iterdir()):
        inflight_dir.rmdir()
    return removed


def _same_file(a: Path, b: Path) -> bool:
    if a.samefile(b):  # published by hard link
        return True
    return a.stat().st_size == b.stat().st_size and a.read_bytes() == b.read_bytes()


def publish(records: Path, output: Path) -> None:
    """Make the finished records the declared output, atomically, and keep them in place.

    If Snakemake dies after this but before it notes the job as done, it deletes the
    output and reruns the job; the job then finds its records complete and publishes
    the very same bytes again instead of recomputing them.
    """
    output.parent.mkdir(parents=True, exist_ok=True)
    staged = output.with_name(f".{output.name}.staged")
    staged.unlink(missing_ok=True)
    try:
        os.link(records, staged)
    except OSError:  # another filesystem: copy instead
        shutil.copyfile(records, staged)
    os.replace(staged, output)


@contextmanager
def unit_lock(inflight: Path) -> Iterator[None]:
    """One process per unit of work: the pipeline runs without Snakemake's directory lock
    (so a rerun after kill -9 needs no --unlock), and this lock, released by the kernel
    when its holder dies, keeps two runs from appending to the same records."""
    lock_path = inflight.with_name(inflight.name + ".lock")
    with open(lock_path, "w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RuntimeError(
                f"{inflight}: another process is running this unit; wait for it or stop it"
            ) from None
        yield


def make_tables(
    rollouts: list[Path],
    ranking: Path | None,
    card: Path | None,
    tables: dict,
    preset: str,
    llm: dict,
    outputs: list[str],
    methods: dict[str, dict] | None = None,
    suites: dict[str, dict] | None = None,
    reference: Path | None = None,
    params: dict | None = None,
) -> None:
    """Every table from the records. ``tables``, ``methods`` (the budgets) and ``suites``
    (their paper benchmarks) come as Snakemake passes them and go back to their types
    through the one strict loader; ``reference`` holds the papers' numbers;
    ``results/provenance.json`` says what produced them (for the HTML report). ``ranking``
    and ``card`` (the reward-to-go model's results) are None when no rerank table is asked
    for."""

    from maxcode.report.tables import write_all  # scipy: seconds to import; only this stage

    runs = read_runs([Path(p) for p in rollouts])
    book = load_reference(reference) if reference else None  # checked with the params
    context = {
        "preset": preset,
        "generator": _role_label(llm["generator"]),
        "critic": _role_label(llm["critic"]),
        "budgets": {
            name: _budget_label(MethodConfig.from_dict(m)) for name, m in (methods or {}).items()
        },
        "benchmarks": {
            name: load_suite(name, cfg).paper_benchmark for name, cfg in (suites or {}).items()
        },
        "reference": book,
    }
    ranked = json.loads(Path(ranking).read_text()) if ranking else {}
    if "kinds" in ranked:  # the corpus ranking (replay): the kind the reranked methods use
        from maxcode.r2g.corpus_ranking import corpus_rerank_summary  # scipy, as above

        ranked = corpus_rerank_summary(ranked, (params or {})["r2g"]["kind"])
    metrics = next(Path(p) for p in outputs if p.endswith("metrics.json"))
    write_all(
        runs,
        load(TablesParams, tables, "tables"),
        ranked,
        json.loads(Path(card).read_text()) if card else {},
        context,
        Path(outputs[0]).parent,
        next(Path(p) for p in outputs if p.endswith(".png")).parent,
        metrics,
    )
    hardware = list({json.dumps(r.hardware, sort_keys=True): r.hardware for r in runs}.values())
    atomic_write_json(
        next(Path(p) for p in outputs if p.endswith("provenance.json")),
        provenance(
            params,
            preset=preset,
            generator=context["generator"],
            critic=context["critic"],
            evaluators=sorted({r.evaluator for r in runs}),
            rollouts=len(runs),
            rollout_hardware=hardware,
            reference=str(reference) if reference else None,
        ),
    )


def _role_label(role: dict) -> str:
    if role["backend"] == "offline":
        return "offline (non-LLM)"
    if role["backend"] == "replay":
        return "replay (programs of public LLM runs from the corpus, seeded per run)"
    label = f"{role['backend']}:{role.get('model', '?')}"
    return label + (f" (thinking {role['thinking_budget']})" if role.get("thinking_budget") else "")


def _budget_label(method: MethodConfig) -> str:
    """``depth x executed per step = evaluations``, plus any hard limit that is set."""
    executed = method.executed_per_step
    label = f"{method.depth} x {executed}"
    if executed != method.k:
        label += f" of {method.k}"
    label += f" = {method.evaluations_budget} evals"
    limits = {k: v for k, v in asdict(method.budget).items() if v is not None}
    return label + "".join(f", {k} {v}" for k, v in limits.items())
