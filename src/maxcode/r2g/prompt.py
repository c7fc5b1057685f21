"""The reward-to-go model's input text, built the same way for training and scoring.

Training examples come from rollout records and scoring happens inside the search loop;
both call :func:`build_prompt` with the same ``max_chars`` (saved with the model), so the
model never sees a prompt shape at inference that it was not trained on.
"""

from __future__ import annotations

PROMPT_VERSION = "r2g-prompt/1"
ANSWER_CUE = "\n### expected max future reward:"
_CUT = "\n...[{n} chars cut]...\n"


def build_prompt(observation_text: str, source: str, max_chars: int, description: str = "") -> str:
    """Description, observation and candidate code, each cut to a share of ``max_chars``.

    Code gets what the context leaves over (at least half), cut in the middle so the
    head (includes, signatures) and the tail (the hot loop, ``main``) both survive;
    the observation keeps its head, where the best-so-far and latest feedback sit.
    """
    if max_chars < 256:
        raise ValueError(f"max_prompt_chars={max_chars} is too small; use at least 256")
    fixed = len("### task\n\n### observation\n\n### candidate\n\n") + len(ANSWER_CUE)
    budget = max_chars - fixed
    description = _cut_tail(description.strip(), budget // 8)
    observation_text = _cut_tail(observation_text.strip(), (budget - len(description)) // 2)
    source = _cut_middle(source, budget - len(description) - len(observation_text))
    return (
        f"### task\n{description}\n### observation\n{observation_text}\n"
        f"### candidate\n{source}\n{ANSWER_CUE}"
    )


def format_target(value: float) -> str:
    """The value as the model should write it: two decimals, as in "1.84"."""
    return f" {value:.2f}"


def _cut_tail(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[: max(0, limit - 3)] + "..."


def _cut_middle(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    marker_len = len(_CUT.format(n=len(text)))
    keep = max(0, limit - marker_len)
    head = keep * 2 // 3
    tail = keep - head
    cut = len(text) - head - tail
    return text[:head] + _CUT.format(n=cut) + (text[-tail:] if tail else "")
