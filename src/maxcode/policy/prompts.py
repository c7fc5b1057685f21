"""Render the generator and critique prompts from the versioned templates in
``maxcode/prompts/``; every rendered prompt carries the version it came from.

A version is ``<template>/v<N>+<sha8>``: ``N`` is bumped by hand when the wording
changes on purpose, and the content hash changes with any edit, so a record always
says exactly which text the model saw.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import jinja2

from maxcode.evaluate.result import EvalResult, Status
from maxcode.search.observation import format_feedback
from maxcode.search.types import Observation
from maxcode.tasks.model import Task

PROMPTS_DIR = Path(__file__).resolve().parent.parent / "prompts"
_VERSION = re.compile(r"\{#\s*version:\s*(\d+)\s*#\}")
_COMPILE_LOG_LINES = 20


@dataclass(frozen=True)
class Prompt:
    messages: list[dict]
    version: str


def feedback_text(result: EvalResult) -> str:
    """Headline feedback plus what a model needs to act on it (compiler lines, tests, profile)."""
    lines = [format_feedback(result, max_chars=1000)]
    if result.tests:
        lines.append(f"tests passed: {result.tests_passed}/{len(result.tests)}")
        failing = next((t for t in result.tests if t.status is not Status.OK and t.reason), None)
        if failing is not None:
            lines.append(f"first failing test {failing.index}: {failing.reason[:300]}")
    if result.status is Status.COMPILE_ERROR and result.compile_log.strip():
        log = result.compile_log.strip().splitlines()[:_COMPILE_LOG_LINES]
        lines.append("compiler output:\n" + "\n".join(log))
    if result.profile:
        lines.append("execution profile: " + json.dumps(result.profile, sort_keys=True)[:1500])
    return "\n".join(lines)


def _figures_text(figures: dict) -> str:
    """Canonical text (sorted keys at every level), so a replayed evaluation renders the
    same prompt byte for byte and hits the response cache."""

    def value(v: object) -> str:
        if isinstance(v, float):
            return f"{v:.4g}"
        if isinstance(v, dict | list | tuple):
            return json.dumps(v, sort_keys=True, default=str)
        return str(v)

    text = ", ".join(f"{k}={value(v)}" for k, v in sorted(figures.items()))
    return text if len(text) <= 1500 else text[:1497] + "..."


@cache
def _env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(PROMPTS_DIR),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=False,
        autoescape=False,
    )
    env.filters["feedback"] = feedback_text
    env.filters["figures"] = _figures_text
    return env


@cache
def template_version(name: str) -> str:
    """``generator_cpp/v1+1a2b3c4d`` from the template's header and its text (and includes)."""
    text = (PROMPTS_DIR / f"{name}.j2").read_text()
    m = _VERSION.search(text)
    if m is None:
        raise ValueError(
            f"{PROMPTS_DIR / (name + '.j2')}: first line must be '{{# version: N #}}' so records "
            "can say which prompt was used"
        )
    h = hashlib.sha256(text.encode())
    h.update((PROMPTS_DIR / "_common.j2").read_bytes())
    return f"{name}/v{m.group(1)}+{h.hexdigest()[:8]}"


def _render(name: str, context: dict) -> Prompt:
    module = _env().get_template(f"{name}.j2").make_module(context)
    system = str(module.system()).strip()
    user = str(module.user()).strip()
    return Prompt(
        [{"role": "system", "content": system}, {"role": "user", "content": user}],
        template_version(name),
    )


def _family(task: Task) -> str:
    if task.language not in ("cpp", "cuda"):
        raise ValueError(f"task {task.task_id}: no prompt for language {task.language!r}")
    return task.language


def generator_prompt(obs: Observation) -> Prompt:
    """The seeds' generator prompt with the observation's enabled components only."""
    return _render(
        f"generator_{_family(obs.task)}",
        {
            "task": obs.task,
            "best": obs.best,
            "trajectory": obs.trajectory,
            "include_critique": obs.include_critique,
            "include_trajectory": obs.include_trajectory,
            "best_discounted_reward": obs.best_discounted_reward,
            "step": obs.step,
            "depth": obs.depth,
        },
    )


def critique_prompt(task: Task, source: str, result: EvalResult) -> Prompt:
    """The seeds' critique prompt: diagnose the bottleneck, suggest actions."""
    return _render(f"critique_{_family(task)}", {"task": task, "source": source, "result": result})
