"""The offline CUDA policy: a real, non-LLM proposer for KernelBench-format tasks.

It reads the reference ``Model`` as an op graph and lowers it in up to two ways
(variants): all in templates (fused elementwise, reduction with prologue/epilogue,
GEMM with epilogue), and partial lowering (``lowering.py``: convolutions, GEMMs and
other ops without a template as ATen library calls from the host code, the chains
around them as fused kernels), plus the partial lowering with each fusion boundary
split in turn. The search tunes the templates' parameters: the first step proposes the
default of each variant whose boundaries are all fused (so the measured reward chooses,
e.g., between the custom GEMM and cuBLAS with a fused epilogue); later ones change one or
two parameters of the best correct configuration so far (else the first default), or
fuse or split at one fusion boundary, preferring moves that answer the latest critique's
diagnosis and the kernel profile's heaviest stage; parameter values that
came with a failure (and never with a success) are not used again, and no
configuration is proposed twice. Tasks that neither variant covers get "unsupported"
proposals naming the blocking op.
"""

from __future__ import annotations

import hashlib
import random
import re
import threading
from dataclasses import dataclass, field

from maxcode.evaluate.result import Status
from maxcode.policy.offline_cuda import space
from maxcode.policy.offline_cuda.families import Plan, Stage, plan_for
from maxcode.policy.offline_cuda.graph import CaptureError, UnsupportedOp, capture
from maxcode.policy.offline_cuda.lowering import LIBRARY, export_graph, lower
from maxcode.policy.offline_cuda.render import kept_channels_last, render
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


def config_key(config: Config, variant: int = 0) -> str:
    return repr((variant, [sorted(p.items()) for p in config]))


@dataclass
class Analysis:
    plan: Plan | None  # the first variant
    reason: str  # why there is no plan
    variants: list[Plan] = field(default_factory=list)


def analyze_source(source: str, where: str = "task") -> Analysis:
    """Both lowerings of a task: all-template (fx capture) and partial (export + library calls).

    The partial lowering is a variant of its own only where it differs, i.e. keeps some op
    as a library call (cuBLAS GEMM + fused epilogue next to the custom GEMM template)."""
    variants: list[Plan] = []
    reasons: list[str] = []
    try:
        variants.append(plan_for(capture(source, where)))
    except (UnsupportedOp, CaptureError) as err:
        reasons.append(str(err))
    try:
        graph = export_graph(source, where)
        partial = lower(graph)
        if not variants or any(s.family == LIBRARY for s in partial.stages):
            variants.append(partial)
            # Where the fusion boundaries fall: each fused boundary split in turn (the
            # search reaches these by moves, not in its first step).
            for boundary in sorted(b for b, fused in partial.boundaries.items() if fused):
                variants.append(lower(graph, frozenset([boundary])))
    except (UnsupportedOp, CaptureError) as err:
        reasons.append(str(err))
    if not variants:
        # The partial lowering's reason names what no template covers at all.
        return Analysis(None, reasons[-1])
    return Analysis(variants[0], "", variants)


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
    boundary_weight: float = field(
        default=8.0,
        metadata={
            "help": "sampling weight of a move that fuses or splits at a fusion boundary (a "
            "one-parameter move weighs 1), times preferred_weight per cue it follows"
        },
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
        if self.boundary_weight <= 0.0:
            raise ValueError(
                f"OfflineCudaPolicy.boundary_weight={self.boundary_weight}: must be > 0"
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
                self._cache[key] = analyze_source(source, where)
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
        variants = analysis.variants
        history = [
            a
            for a in obs.attempts_shown()
            if "params" in a.meta
            and a.meta.get("variant", 0) < len(variants)
            and a.meta.get("family") == variants[a.meta.get("variant", 0)].family
        ]
        tried = {config_key(a.meta["params"], a.meta.get("variant", 0)) for a in history}
        base_attempt = _best_correct(history)
        v = base_attempt.meta.get("variant", 0) if base_attempt else 0
        plan = variants[v]
        own = [a for a in history if a.meta.get("variant", 0) == v]
        bad = _bad_values(own)
        base = (
            base_attempt.meta["params"] if base_attempt else [space.default(s) for s in plan.stages]
        )
        base_id = base_attempt.candidate_id if base_attempt else "default"
        focus = _critique_focus(obs)
        chosen: list[tuple[int, Config, list[str]]] = []
        for vi, variant_plan in enumerate(variants):  # every variant's default first
            if not all(variant_plan.boundaries.values()):
                continue  # a split fusion boundary: reached by a move from the fused plan
            defaults = [space.default(s) for s in variant_plan.stages]
            vbad = _bad_values([a for a in history if a.meta.get("variant", 0) == vi])
            key = config_key(defaults, vi)
            if key not in tried and not _uses_bad(defaults, vbad, _all_keys(defaults)):
                chosen.append((vi, defaults, []))
                tried.add(key)
        moves = []
        fixed = _fixed_stages(plan, base)
        for si, stage in enumerate(plan.stages):
            if si in fixed:
                continue
            for p, keys in space.neighbours(stage, base[si]):
                config = [dict(b) for b in base]
                config[si] = p
                changed = [f"{si}.{key}" for key in keys]
                if config_key(config, v) in tried or _uses_bad(config, bad, changed):
                    continue
                weight = (1.0 if len(keys) == 1 else self.two_param_weight) * (
                    self.preferred_weight ** space.cue_weight(stage, base[si], p, focus)
                )
                moves.append((v, config, changed, weight))
        hot = _hot_boundaries(plan, base_attempt)
        for vi, other in enumerate(variants):  # move a fusion boundary: fuse or split
            flipped = _flipped(plan.boundaries, other.boundaries)
            if vi == v or flipped is None:
                continue
            config = _carry(plan, base, other)
            if config_key(config, vi) in tried:
                continue
            fuse = other.boundaries[flipped]
            cues = (len(focus & {"memory", "latency"}) if fuse else int("compute" in focus)) + int(
                flipped in hot
            )
            moves.append(
                (vi, config, [flipped], self.boundary_weight * self.preferred_weight**cues)
            )
        # Weighted sampling without replacement (Efraimidis-Spirakis keys), seeded.
        moves.sort(key=lambda m: rng.random() ** (1.0 / m[3]), reverse=True)
        for vi, config, changed, _ in moves:
            if len(chosen) >= k:
                break
            if config_key(config, vi) not in tried:
                tried.add(config_key(config, vi))
                chosen.append((vi, config, changed))
        if len(chosen) < k:  # the neighbourhood is used up: any untried configuration
            for config in _untried(plan, tried, bad, rng, v):
                if len(chosen) >= k:
                    break
                if config_key(config, v) not in tried:
                    tried.add(config_key(config, v))
                    chosen.append((v, config, ["*"]))
        proposals = [
            Proposal(
                source=render(variants[vi], config, self.name).source,
                meta={
                    "policy": self.name,
                    "family": variants[vi].family,
                    "variant": vi,
                    "stages": [s.family for s in variants[vi].stages],
                    "params": config,
                    "changed": changed,
                    "base": base_id,
                    "focus": sorted(focus),
                },
            )
            for vi, config, changed in chosen[:k]
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
    plan: Plan,
    tried: set[str],
    bad: set[tuple[str, int]],
    rng: random.Random,
    variant: int,
) -> list[Config]:
    per_stage = [space.all_configs(s) for s in plan.stages]
    defaults = [space.default(s) for s in plan.stages]
    configs: list[Config] = []
    for si, options in enumerate(per_stage):
        for p in options:
            config = [dict(d) for d in defaults]
            config[si] = p
            kept = kept_channels_last(plan.stages, config)
            for t in plan.stages[si].tensors:  # tunable only with its input in NCHW
                if t.py in kept:
                    config[int(t.py.split(":")[1])] = {"channels_last": 0}
            configs.append(config)
    rng.shuffle(configs)
    return [
        c
        for c in configs
        if config_key(c, variant) not in tried
        and not _uses_bad(c, bad, _all_keys(c))
        and all(c[si] == defaults[si] for si in _fixed_stages(plan, c))
    ]


def _fixed_stages(plan: Plan, config: Config) -> set[int]:
    """Stages whose parameters do not apply under ``config``: elementwise kernels that
    transpose a convolution's result kept channels-last (fixed tiles). They stay at their
    defaults, so no two proposals differ only there."""
    kept = kept_channels_last(plan.stages, config)
    return {si for si, s in enumerate(plan.stages) if any(t.py in kept for t in s.tensors)}


def _flipped(base: dict[str, bool], other: dict[str, bool]) -> str | None:
    """The one fusion boundary ``other`` places differently from ``base`` (None: not one).
    A boundary only one of them has is a consequence (a pooling can be read inside a
    reduction only while the reduction's prologue is fused) and does not count."""
    differ = [b for b in base if b in other and base[b] != other[b]]
    return differ[0] if len(differ) == 1 else None


def _carry(plan: Plan, config: Config, other: Plan) -> Config:
    """``config`` moved to ``other``'s stages: a stage computing the same node with the same
    template (and, for a convolution, the same choice of keeping its result channels-last)
    keeps its parameters, the others start at their defaults."""

    def key(s: Stage) -> tuple:
        return s.extra.get("node"), space.variant(s), s.extra.get("keep_channels_last")

    tuned = {key(s): p for s, p in zip(plan.stages, config, strict=True)}
    carried = [dict(tuned.get(key(s), space.default(s))) for s in other.stages]
    for si in _fixed_stages(other, carried):
        carried[si] = space.default(other.stages[si])
    return carried


# Kernel names the templates give each stage (ew3_vector, red5_rows<true>, stats1_stats, ...),
# as the profiler prints them ("void red5_rows<true>(float const*, ...)").
_STAGE_KERNEL = re.compile(
    r"\b(?:ew|red|gemm|stats|scan)(\d+)_"
    r"(?:vector|scalar|from_channels_last|rows|cols|partials|finish|gemm|stats)\b"
)


def _hot_boundaries(plan: Plan, attempt: Attempt | None) -> set[str]:
    """Fusion boundaries of the stage that takes the most GPU time in ``attempt``'s kernel
    profile (present when the method profiles); none when a library kernel dominates."""
    profile = attempt.result.profile if attempt is not None else None
    rows = profile.get("functions") if isinstance(profile, dict) else None
    if not rows or not isinstance(rows[0], dict):
        return set()
    top = max(rows, key=lambda r: float(r.get("time_us") or 0.0))
    match = _STAGE_KERNEL.search(str(top.get("function", "")))
    if match is None or int(match.group(1)) >= len(plan.stages):
        return set()
    return set(plan.stages[int(match.group(1))].extra.get("boundaries", ()))


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
