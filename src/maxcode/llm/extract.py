"""Pull the candidate program out of a completion, whatever shape the model chose.

Handles backtick and tilde fences of any length with or without a language tag,
several blocks (the last complete one that is a whole program wins: defines
``ModelNew`` for CUDA tasks, ``main`` for C++), no fence at all, reasoning wrapped
in ``<think>`` tags or closed by a lone ``</think>`` (reasoning models whose chat
template opens the tag in the prompt, as QwQ's does), and output cut at the token limit. A completion without usable
code yields ``source=None`` and a reason, never an exception.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Opening fence: 3+ backticks or tildes, optional info string. The closing fence is the
# same character repeated at least as often, alone on its line (CommonMark).
_OPEN = re.compile(r"^(?P<indent>[ \t]{0,3})(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^\n`]*)$", re.M)
_THINK = re.compile(r"<think>.*?(?:</think>|\Z)", re.S | re.I)
_THINK_END = re.compile(r"</think>", re.I)

LANG_TAGS = {
    "cpp": {"", "cpp", "c++", "cc", "cxx", "c", "hpp", "h"},
    "cuda": {"", "python", "py", "python3", "cuda", "cu"},
}
_MAIN = re.compile(r"\b(?:int|signed|auto)\s+main\s*\(")
_MODEL_NEW = re.compile(r"^\s*class\s+ModelNew\b", re.M)


@dataclass(frozen=True)
class Extraction:
    source: str | None
    reason: str = ""  # why source is None, or how it was found
    n_blocks: int = 0


@dataclass(frozen=True)
class _Block:
    info: str
    body: str
    complete: bool


def _blocks(text: str) -> list[_Block]:
    blocks: list[_Block] = []
    pos = 0
    while (m := _OPEN.search(text, pos)) is not None:
        fence = m.group("fence")
        info = m.group("info").strip().split()[0].lower() if m.group("info").strip() else ""
        body_start = m.end() + 1
        close = re.compile(rf"^[ \t]{{0,3}}{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$", re.M)
        end = close.search(text, body_start)
        if end is None:
            blocks.append(_Block(info, text[body_start:], complete=False))
            break
        blocks.append(_Block(info, text[body_start : end.start()], complete=True))
        pos = end.end()
    return blocks


def is_program(source: str, language: str) -> bool:
    """A whole candidate: C++ with ``main``, or a KernelBench file defining ``ModelNew``."""
    if language == "cpp":
        return _MAIN.search(source) is not None
    return _MODEL_NEW.search(source) is not None


def extract_code(text: str, language: str, truncated: bool = False) -> Extraction:
    """The candidate source for a task in ``language`` ("cpp" or "cuda").

    After a lone ``</think>`` the answer is read first; when it holds no program, the
    reasoning before the tag is read (the model wrote its code there and closed without
    repeating it), and the reason says so.
    """
    if language not in LANG_TAGS:
        raise ValueError(
            f"extract_code: language must be one of {sorted(LANG_TAGS)}, got {language!r}"
        )
    visible = _THINK.sub("", text or "")
    ends = list(_THINK_END.finditer(visible))
    if not ends:
        return _extract_visible(visible.strip(), language, truncated)
    answer = _extract_visible(visible[ends[-1].end() :].strip(), language, truncated)
    if answer.source is not None:
        return answer
    reasoning = _extract_visible(visible[: ends[-1].start()].strip(), language, False)
    if reasoning.source is None:
        return answer
    return Extraction(
        reasoning.source,
        f"{reasoning.reason}, inside the reasoning (none after </think>)",
        reasoning.n_blocks,
    )


def _extract_visible(visible: str, language: str, truncated: bool) -> Extraction:
    if not visible:
        return Extraction(
            None, "empty completion" + (" (cut at the token limit)" if truncated else "")
        )
    blocks = _blocks(visible)
    if blocks and not blocks[-1].complete and not blocks[-1].body.strip():
        # a lone fence closing unfenced code (the opening one was in the prompt)
        visible = visible.rsplit("\n", 1)[0] if "\n" in visible else ""
        blocks = blocks[:-1]
    tags = LANG_TAGS[language]
    usable = [b for b in blocks if b.complete and b.info in tags and is_program(b.body, language)]
    if usable:
        return Extraction(usable[-1].body.rstrip() + "\n", "fenced block", len(blocks))
    want = "defines class ModelNew" if language == "cuda" else "defines main()"
    if blocks and not blocks[-1].complete:
        return Extraction(
            None,
            f"completion cut inside a code block (unterminated fence){' at the token limit' if truncated else ''}; "
            f"no complete block {want}",
            len(blocks),
        )
    if blocks:
        tags_seen = sorted({b.info or "untagged" for b in blocks})
        return Extraction(
            None,
            f"{len(blocks)} code block(s) ({', '.join(tags_seen)}) but none {want}",
            len(blocks),
        )
    bare = _bare_program(visible, language)
    if bare is not None:
        if truncated:
            return Extraction(None, "unfenced code cut at the token limit", 0)
        return Extraction(bare, "unfenced code", 0)
    return Extraction(None, f"no code block in completion (none {want})", 0)


def _bare_program(text: str, language: str) -> str | None:
    """Code written without a fence: from the first line that starts a program."""
    if not is_program(text, language):
        return None
    starts = (
        r"^\s*(#include|#define|using\s+namespace|typedef|template\s*<|int\s+main)"
        if language == "cpp"
        else r"^\s*(import|from)\s+\w"
    )
    m = re.search(starts, text, re.M)
    if m is None:
        return None
    return text[m.start() :].strip() + "\n"
