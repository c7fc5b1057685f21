"""What a user sees while `maxcode optimize` runs: a live panel on a terminal, else one line per event."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from rich.console import Console
from rich.live import Live
from rich.table import Table

from maxcode.search.config import MethodConfig


@dataclass
class Progress:
    method: MethodConfig
    started: float = field(default_factory=time.monotonic)
    step: int = 0
    in_flight: int = 0
    best: float = 0.0
    last_critique: str = ""
    usage: dict = field(default_factory=dict)
    evaluations: int = 0
    steps_done: int = 0

    def eta_s(self) -> float | None:
        if not self.steps_done:
            return None
        per_step = (time.monotonic() - self.started) / self.steps_done
        return per_step * (self.method.depth - self.steps_done)

    def update(self, event: str, data: dict) -> None:
        if event == "propose":
            self.step, self.in_flight = data["step"], data["m"]
        elif event == "candidate":
            self.in_flight = max(0, self.in_flight - 1)
            self.best = max(self.best, data["reward"] or 0.0)
            self.usage, self.evaluations = data["usage"], data["evaluations"]
            if data.get("critique"):
                self.last_critique = data["critique"].strip().splitlines()[0][:100]
        elif event == "step_end":
            self.steps_done = data["step"] + 1
        elif event == "resume":
            self.best = data["best_reward"]


def plural(n: int, word: str) -> str:
    """``1 evaluation``, ``2 evaluations``."""
    return f"{n} {word}{'' if n == 1 else 's'}"


def budget_text(p: Progress) -> str:
    b = p.method.budget
    u = p.usage
    tokens = u.get("input_tokens", 0) + u.get("output_tokens", 0)
    parts = [
        f"evals {p.evaluations}/{b.max_evaluations or p.method.evaluations_budget}",
        f"LLM calls {u.get('calls', 0)}" + (f"/{b.max_llm_calls}" if b.max_llm_calls else ""),
        f"tokens {tokens}" + (f"/{b.max_tokens}" if b.max_tokens else ""),
        f"${u.get('cost_usd', 0.0):.4f}" + (f"/${b.max_cost_usd:.2f}" if b.max_cost_usd else ""),
    ]
    return ", ".join(parts)


class LiveView:
    """Subscribe ``handle`` to the loop's events; a TTY gets a rich panel, a pipe gets lines."""

    def __init__(
        self,
        method: MethodConfig,
        console: Console | None = None,
        offline: bool = False,
    ):
        self.progress = Progress(method)
        self.console = console or Console(stderr=True)
        self.live: Live | None = None
        self.offline = offline  # an offline policy: say when it has nothing left to try

    def __enter__(self) -> LiveView:
        if self.console.is_terminal:
            self.live = Live(self._table(), console=self.console, refresh_per_second=4)
            self.live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.live is not None:
            self.live.update(self._table())
            self.live.__exit__(None, None, None)

    def handle(self, event: str, data: dict) -> None:
        self.progress.update(event, data)
        if event == "resume" or (event == "evaluate" and not data["n"]):  # above the panel too
            self.console.print(self._line(event, data), soft_wrap=True)
        elif self.live is not None:
            self.live.update(self._table())
        else:
            self.console.print(self._line(event, data), soft_wrap=True)

    def _line(self, event: str, data: dict) -> str:
        p = self.progress
        if event == "resume":
            extended = "; depth or budget grew, so the run goes on" if data["extended"] else ""
            aside = (
                f"; {data['set_aside']} records of the step in flight set aside in run.jsonl.dropped.jsonl"
                if data["set_aside"]
                else ""
            )
            return (
                f"resumed: replayed {data['steps']} finished steps ({data['evaluations']} evaluations, "
                f"best {data['best_reward']:.3f}x) from the records{aside}{extended}"
            )
        if event == "propose":
            return f"[step {data['step'] + 1}/{p.method.depth}] proposing {plural(data['k'], 'candidate')}..."
        if event == "evaluate" and not data["n"]:
            why = data.get("reasons") or ["the policy proposed no program"]
            further = (
                "; the offline policy has nothing left to try (an --llm model would go further)"
                if self.offline
                else ""
            )
            return (
                f"[step {data['step'] + 1}/{p.method.depth}] nothing to evaluate: {why[0]}{further}"
            )
        if event == "evaluate":
            return (
                f"[step {data['step'] + 1}/{p.method.depth}] evaluating "
                f"{plural(data['n'], 'candidate')}..."
            )
        if event == "candidate":
            reward = data["reward"]
            return (
                f"[step {data['step'] + 1}] candidate {data['index']}: {data['status']}"
                + (f", speedup {reward:.3f}x" if reward else "")
                + f" | best {p.best:.3f}x | {budget_text(p)}"
            )
        if event == "step_end":
            eta = p.eta_s()
            return f"[step {data['step'] + 1}/{p.method.depth}] done; best {p.best:.3f}x" + (
                f"; ETA {eta:.0f}s" if eta is not None else ""
            )
        if event != "run_end":
            return f"[{event}]"
        return f"[done] best {data['best_reward']:.3f}x after {plural(data['evaluations'], 'evaluation')} ({data['stopped_by']})"

    def _table(self) -> Table:
        p = self.progress
        t = Table(title=f"maxcode optimize: {p.method.name}", show_header=False)
        eta = p.eta_s()
        rows = [
            ("step", f"{p.step + 1}/{p.method.depth}"),
            ("candidates in flight", str(p.in_flight)),
            ("best speedup so far", f"{p.best:.3f}x"),
            ("last critique", p.last_critique or "-"),
            ("spent / budget", budget_text(p)),
            ("ETA", f"{eta:.0f} s" if eta is not None else "after the first step"),
        ]
        for k, v in rows:
            t.add_row(k, v)
        return t
