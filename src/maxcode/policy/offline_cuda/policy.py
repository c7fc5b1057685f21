"""The offline CUDA policy: a real, non-LLM proposer for KernelBench-format tasks.

It reads the reference ``Model`` as an op graph, picks the template family that covers
it (fused elementwise, reduction with prologue/epilogue, GEMM with epilogue), and
writes kernels from Jinja2 templates. The search tunes the templates' parameters: the
first proposal is a sensible default; later ones change one or two parameters of the
best correct configuration so far (else the default), preferring moves that answer
the latest critique's diagnosis; parameter values that came with a failure (and
never with a success) are not used again, and no configuration is proposed twice.
Tasks with an op no template covers get "unsupported" proposals naming that op.
"""

from __future__ import annotations

import hashlib
import random
import re
import threading
from dataclasses import dataclass, field

from maxcode.evaluate.result import Status
from maxcode.policy.offline_cuda import space
from maxcode.policy.offline_cuda.families import Plan, plan_for
from maxcode.policy.offline_cuda.graph import CaptureError, UnsupportedOp, capture
from maxcode.policy.offline_cuda.render import render
from maxcode.search.types import Attempt, Observation, Proposal

# First line of an offline (or LLM) critique -> bottleneck class (see critique/offline.py).
_CUES: tuple[tuple[str, str], ...] = (
    (r"memory-bandwidth bound|memory[- ]bound", "memory"),
    (r"latency|launch[- ]bound|occupancy|coalesc", "latency"),
    (r"compute[- ]bound", "compute"),
)
_FAILED = {
    Status.COMPILE_ERROR,
    Status.RUNTIME_ERROR,
    Status.WRONG_ANSWER,
    Status.TIMEOUT,
    Status.REJECTED,
    Status.MEMORY_LIMIT,
}

Config = list[dict[str, int]]


def config_key(config: Config) -> str:
    return repr([sorted(p.items()) for p in config])


@dataclass
class Analysis:
    plan: Plan | None
    reason: str  # why there is no plan


@dataclass
class OfflineCudaPolicy:
    """Proposes exactly ``k`` candidates per step: rendered kernels, or unsupported proposals
    with a reason when the task's ops are not covered or the parameter space is used up."""

    preferred_weight: float = field(
        default=4.0,
        metadata={
            "help": "sampling weight of a move that follows the critique's diagnosis, per cue followed (others: 1)"
        },
    )
    two_param_weight: float = field(
        default=0.25,
        metadata={"help": "relative weight of moves that change two parameters at once"},
    )
    name: str = field(
        default="offline-cuda/1", metadata={"help": "recorded in every rollout record"}
    )
    offline: bool = field(
        default=True, metadata={"help": "a non-LLM policy; labelled offline in tables"}
    )
    _cache: dict[str, Analysis] = field(default_factory=dict, init=False, repr=False)
    # Capture imports torch internals lazily; concurrent first captures must not interleave.
    _lock: threading.Lock = field(
        default_factory=threading.Lock, init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        if self.preferred_weight < 1.0:
            raise ValueError(
                f"OfflineCudaPolicy.preferred_weight={self.preferred_weight}: must be >= 1 (1 ignores the critique)"
            )
        if not 0.0 < self.two_param_weight <= 1.0:
            raise ValueError(
                f"OfflineCudaPolicy.two_param_weight={self.two_param_weight}: must be in (0, 1]"
            )

    def analyze(self, source: str, where: str = "task") -> Analysis:
        """Graph capture and family detection for a task source (cached by content)."""
        key = hashlib.sha256(source.encode()).hexdigest()
        with self._lock:
            if key not in self._cache:
                try:
                    self._cache[key] = Analysis(plan_for(capture(source, where)), "")
                except (UnsupportedOp, CaptureError) as err:
                    self._cache[key] = Analysis(None, str(err))
            return self._cache[key]

    def propose(self, obs: Observation, k: int, rng: random.Random) -> list[Proposal]:
        if k < 1:
            raise ValueError(f"k={k}: the policy needs to propose at least one candidate")
        task = obs.task
        if task.language != "cuda":
            return Proposal.unsupported(
                k,
                f"{self.name} writes CUDA only; task {task.task_id} is {task.language}",
                policy=self.name,
                family=None,
            )
        analysis = self.analyze(task.reference_source, task.metadata.get("file_name", task.task_id))
        if analysis.plan is None:
            return Proposal.unsupported(k, analysis.reason, policy=self.name, family=None)
        plan = analysis.plan
        defaults = [space.default(s) for s in plan.stages]
        history = [a for a in obs.attempts_shown() if a.meta.get("family") == plan.family]
        tried = {config_key(a.meta["params"]) for a in history if "params" in a.meta}
        bad = _bad_values(history)
        base_attempt = _best_correct(history)
        base = base_attempt.meta["params"] if base_attempt else defaults
        base_id = base_attempt.candidate_id if base_attempt else "default"
        focus = _critique_focus(obs)
        chosen: list[tuple[Config, list[str]]] = []
        if config_key(defaults) not in tried and not _uses_bad(defaults, bad, _all_keys(defaults)):
            chosen.append((defaults, []))
            tried.add(config_key(defaults))
        moves = []
        for si, stage in enumerate(plan.stages):
            for p, keys in space.neighbours(stage, base[si]):
                config = [dict(b) for b in base]
                config[si] = p
                changed = [f"{si}.{key}" for key in keys]
                if config_key(config) in tried or _uses_bad(config, bad, changed):
                    continue
                weight = (1.0 if len(keys) == 1 else self.two_param_weight) * (
                    self.preferred_weight ** space.cue_weight(stage, base[si], p, focus)
                )
                moves.append((config, changed, weight))
        # Weighted sampling without replacement (Efraimidis-Spirakis keys), seeded.
        moves.sort(key=lambda m: rng.random() ** (1.0 / m[2]), reverse=True)
        for config, changed, _ in moves:
            if len(chosen) == k:
                break
            if config_key(config) not in tried:
                tried.add(config_key(config))
                chosen.append((config, changed))
        if len(chosen) < k:  # the neighbourhood is used up: any untried configuration
            for config in _untried(plan, tried, bad, rng):
                if len(chosen) == k:
                    break
                if config_key(config) not in tried:
                    tried.add(config_key(config))
                    chosen.append((config, ["*"]))
        proposals = [
            Proposal(
                source=render(plan, config, self.name).source,
                meta={
                    "policy": self.name,
                    "family": plan.family,
                    "stages": [s.family for s in plan.stages],
                    "params": config,
                    "changed": changed,
                    "base": base_id,
                    "focus": sorted(focus),
                },
            )
            for config, changed in chosen
        ]
        if len(proposals) < k:
            proposals += Proposal.unsupported(
                k - len(proposals),
                f"parameter space of the {plan.family} template exhausted for {task.task_id}: "
                f"every configuration was tried or uses a value that failed",
                policy=self.name,
                family=None,
            )
        return proposals


def _best_correct(history: list[Attempt]) -> Attempt | None:
    correct = [a for a in history if a.result.status is Status.OK and "params" in a.meta]
    return max(correct, key=lambda a: a.reward, default=None)


def _all_keys(config: Config) -> list[str]:
    return [f"{si}.{key}" for si, p in enumerate(config) for key in p]


def _bad_values(history: list[Attempt]) -> set[tuple[str, int]]:
    """(stage.key, value) pairs a failed candidate changed, never seen in a correct one."""
    failed: set[tuple[str, int]] = set()
    passed: set[tuple[str, int]] = set()
    for a in history:
        config = a.meta.get("params")
        if config is None:
            continue
        values = {(f"{si}.{key}", v) for si, p in enumerate(config) for key, v in p.items()}
        if a.result.status is Status.OK:
            passed |= values
        elif a.result.status in _FAILED:
            changed = a.meta.get("changed") or []
            keys = _all_keys(config) if changed == ["*"] else changed
            failed |= {(key, v) for key, v in values if key in keys}
    return failed - passed


def _uses_bad(config: Config, bad: set[tuple[str, int]], keys: list[str]) -> bool:
    values = {(f"{si}.{key}", v) for si, p in enumerate(config) for key, v in p.items()}
    return any(pair in bad and pair[0] in keys for pair in values)


def _untried(
    plan: Plan, tried: set[str], bad: set[tuple[str, int]], rng: random.Random
) -> list[Config]:
    per_stage = [space.all_configs(s) for s in plan.stages]
    defaults = [space.default(s) for s in plan.stages]
    configs: list[Config] = []
    for si, options in enumerate(per_stage):
        for p in options:
            config = [dict(d) for d in defaults]
            config[si] = p
            configs.append(config)
    rng.shuffle(configs)
    return [
        c for c in configs if config_key(c) not in tried and not _uses_bad(c, bad, _all_keys(c))
    ]


def _critique_focus(obs: Observation) -> set[str]:
    """Bottleneck classes in the latest critique's diagnosis (best attempt's first)."""
    if not obs.include_critique:
        return set()
    candidates = ([obs.best] if obs.best is not None else []) + list(reversed(obs.trajectory))
    for attempt in candidates:
        if attempt is not None and attempt.critique is not None and attempt.critique.text:
            head = attempt.critique.text.lower().splitlines()[0]
            return {cls for pattern, cls in _CUES if re.search(pattern, head)}
    return set()
