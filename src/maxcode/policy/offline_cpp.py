"""The offline C++ policy: a real, non-LLM proposer that rewrites programs by known transformations.

It reads the observation the way an LLM policy would: it starts from the best program
it is shown (the observation's best, else the fastest correct attempt in its trajectory,
else the task's reference), adds transformations to it, skips sets already tried, drops
transformations whose candidates failed (and never passed), and favours the ones that
address the bottleneck named in the latest critique. Among what remains it chooses with
the seeded RNG it is given, so a (task, seed) pair always proposes the same candidates.
"""

from __future__ import annotations

import itertools
import random
import re
from dataclasses import dataclass, field

from maxcode.evaluate.result import Status
from maxcode.policy.cpp_transforms import TRANSFORMS, apply_transforms
from maxcode.search.types import Attempt, Observation, Proposal

# Words in a critique that point at a bottleneck class, and the class they point at.
_CRITIQUE_CUES: tuple[tuple[str, str], ...] = (
    (r"\bi/o\b|input/output|\bio-bound|stdio|\bflush", "io"),
    (r"memory[- ]layout|cache|stride|column|row-major|locality|pointer chas", "memory_layout"),
    (r"algorithm|complexity|quadratic|o\(n\^?2\)|super-?linear|repeated work", "algorithm"),
    (r"constant[- ]factor|copies|copying|allocation|realloc|tree lookups|hash", "constant_factor"),
    (r"compute[- ]bound|vectori[sz]|simd|avx", "compute"),
)


@dataclass
class OfflineCppPolicy:
    """Proposes up to ``k`` distinct rewrites per step, each a set of source transformations.

    ``propose`` always returns exactly ``k`` proposals: when fewer distinct untried
    rewrites exist, the rest carry no source, ``status_hint="unsupported"`` and a reason.
    """

    transforms: tuple[str, ...] = field(
        default_factory=lambda: tuple(TRANSFORMS),
        metadata={
            "help": "transformations the policy may use (names in cpp_transforms.TRANSFORMS)"
        },
    )
    max_per_proposal: int = field(
        default=1,
        metadata={
            "help": "most transformations newly applied in one proposal; 1 makes the search "
            "compose rewrites step by step on the best program, as an LLM refines its best attempt"
        },
    )
    preferred_weight: float = field(
        default=4.0,
        metadata={
            "help": "sampling weight of a transformation that addresses the critique's diagnosis (others: 1)"
        },
    )
    name: str = field(
        default="offline-cpp/1", metadata={"help": "recorded in every rollout record"}
    )
    offline: bool = field(
        default=True, metadata={"help": "a non-LLM policy; labelled offline in tables"}
    )

    def __post_init__(self) -> None:
        unknown = [t for t in self.transforms if t not in TRANSFORMS]
        if unknown:
            raise ValueError(
                f"OfflineCppPolicy.transforms: unknown {unknown}; choose from {list(TRANSFORMS)}"
            )
        if self.max_per_proposal < 1:
            raise ValueError(
                f"OfflineCppPolicy.max_per_proposal={self.max_per_proposal}: must be >= 1"
            )
        if self.preferred_weight < 1.0:
            raise ValueError(
                f"OfflineCppPolicy.preferred_weight={self.preferred_weight}: must be >= 1 "
                "(1 ignores the critique)"
            )

    def propose(self, obs: Observation, k: int, rng: random.Random) -> list[Proposal]:
        if k < 1:
            raise ValueError(f"k={k}: the policy needs to propose at least one candidate")
        task = obs.task
        if task.language != "cpp":
            return Proposal.unsupported(
                k,
                f"{self.name} rewrites C++ only; task {task.task_id} is {task.language}",
                policy=self.name,
            )
        base_source, base_set, base_id = _base_of(obs)
        history = obs.attempts_shown()
        banned = _banned(history)
        tried = {frozenset(a.meta.get("transformations", ())) for a in history}
        tried.add(frozenset(base_set))
        applicable = [
            t
            for t in self.transforms
            if t not in base_set
            and t not in banned
            and TRANSFORMS[t].apply(base_source) is not None
        ]
        if not applicable:
            why = (
                f"no transformation applies to {base_id}"
                if not banned
                else f"no transformation applies to {base_id} apart from ones whose candidates failed: {sorted(banned)}"
            )
            return Proposal.unsupported(
                k, f"{why} (tried so far: {sorted(base_set) or 'none'})", policy=self.name
            )
        focus = _critique_focus(obs)
        weights = {
            t: self.preferred_weight if TRANSFORMS[t].targets & focus else 1.0 for t in applicable
        }
        subsets = [
            frozenset(c)
            for size in range(1, min(self.max_per_proposal, len(applicable)) + 1)
            for c in itertools.combinations(applicable, size)
            if frozenset(base_set) | frozenset(c) not in tried
        ]
        # Weighted sampling without replacement (Efraimidis-Spirakis keys), seeded.
        keyed = sorted(
            subsets,
            key=lambda s: rng.random() ** (1.0 / sum(weights[t] for t in s)),
            reverse=True,
        )
        proposals: list[Proposal] = []
        seen_sources = {base_source} | {a.source for a in history}
        for subset in keyed:
            if len(proposals) == k:
                break
            source, applied = apply_transforms(base_source, sorted(subset))
            cumulative = sorted(set(base_set) | set(applied))
            if not applied or source in seen_sources or frozenset(cumulative) in tried:
                continue  # one rewrite disabled another: the result may repeat an earlier one
            seen_sources.add(source)
            tried.add(frozenset(cumulative))
            proposals.append(
                Proposal(
                    source=source,
                    meta={
                        "transformations": cumulative,
                        "applied": applied,
                        "base": base_id,
                        "focus": sorted(focus),
                        "notes": [TRANSFORMS[t].description for t in applied],
                    },
                )
            )
        if not proposals:
            return Proposal.unsupported(
                k,
                f"every combination of {applicable} on {base_id} was already tried",
                policy=self.name,
            )
        if len(proposals) < k:
            proposals += Proposal.unsupported(
                k - len(proposals),
                f"only {len(proposals)} distinct untried rewrites of {base_id} exist",
                policy=self.name,
            )
        return proposals


def _base_of(obs: Observation) -> tuple[str, list[str], str]:
    """Start from the best program so far: the observation's best when it has one, else the
    fastest correct attempt its trajectory shows, else the task's reference."""
    shown = [obs.best] if obs.best is not None else list(obs.trajectory)
    correct = [a for a in shown if a.result.status is Status.OK and a.source]
    if not correct:
        return obs.task.reference_source, [], "reference"
    base = max(correct, key=lambda a: a.reward)
    return base.source, list(base.meta.get("transformations", ())), base.candidate_id


def _banned(history: list[Attempt]) -> set[str]:
    """Transformations that were part of a failed candidate and of no correct one."""
    failed: set[str] = set()
    passed: set[str] = set()
    for attempt in history:
        applied = set(attempt.meta.get("applied", ()))
        if attempt.result.status is Status.OK:
            passed |= set(attempt.meta.get("transformations", ()))
        elif attempt.result.status not in (Status.NO_CODE, Status.UNSUPPORTED):
            failed |= applied
    return failed - passed


def _critique_focus(obs: Observation) -> set[str]:
    """Bottleneck classes named by the latest critique (best program's, else the last attempt's)."""
    if not obs.include_critique:
        return set()
    candidates = [obs.best] if obs.best is not None else []
    candidates += list(reversed(obs.trajectory))
    for attempt in candidates:
        if attempt is not None and attempt.critique is not None and attempt.critique.text:
            # The first line is the diagnosis; suggestions below it may name every class.
            text = attempt.critique.text.lower()
            head = text.splitlines()[0]
            focus = {cls for pattern, cls in _CRITIQUE_CUES if re.search(pattern, head)}
            return focus or {cls for pattern, cls in _CRITIQUE_CUES if re.search(pattern, text)}
    return set()
