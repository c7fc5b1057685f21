"""The corpus card: what a reader of the corpus must know before using it.

Counts per source, level, model and published label; how many problems have at least 4
and 8 distinct programs (the ranking evaluation needs several per problem); harness errors;
references that differ from the user's checkout; the extractor's agreement with the
sources' extracted code.
"""

from __future__ import annotations

from collections import Counter, defaultdict

from maxcode.runs.record import CorpusRecord


def _count(items) -> dict[str, int]:
    """Counts keyed by text, so the card reads the same from memory and from card.json."""
    return dict(sorted(Counter(str(i) for i in items).items()))


def make_card(records: list[CorpusRecord], sources: list[dict], skipped: dict, read: dict) -> dict:
    attempts = [(r, a) for r in records for a in r.attempts]
    per_problem: dict[str, int] = Counter(r.problem.key for r in records)
    levels = sorted({r.problem.level for r in records})
    by_source: dict[str, dict] = {}
    for repo in sorted({a.repo for _, a in attempts}):
        mine = [(r, a) for r, a in attempts if a.repo == repo]
        ext = [a.extraction for _, a in mine if a.extraction is not None]
        by_source[repo] = {
            "attempts": len(mine),
            "programs": len({r.key for r, _ in mine}),
            "per_level": _count(r.problem.level for r, _ in mine),
            "per_model": _count(a.model for _, a in mine),
            "per_label": _count(a.label.verdict for _, a in mine),
            "unusable_labels": sum(not a.label.usable for _, a in mine),
            "unusable_reasons": _count(
                a.label.unusable_reason for _, a in mine if not a.label.usable
            ),
            "gpus": _count(a.label.gpu or "unknown" for _, a in mine),
            "multi_turn_attempts": sum(bool(a.trajectory) for _, a in mine),
            "reference_differs": _count(
                {None: "not published", True: "differs", False: "same"}[a.reference_differs]
                for _, a in mine
            ),
            "extraction": {
                "raw_responses": len(ext),
                "agree": sum(e["agrees"] for e in ext),
                "kinds": _count(e["kind"] for e in ext),
            },
        }
    problems = {}
    for level in levels:
        counts = [n for key, n in per_problem.items() if key.startswith(f"L{level}/")]
        problems[f"level{level}"] = {
            "problems": len(counts),
            "with_at_least_4": sum(n >= 4 for n in counts),
            "with_at_least_8": sum(n >= 8 for n in counts),
        }
    usable_per_problem: dict[str, set] = defaultdict(set)
    for r, a in attempts:
        if a.label.usable:
            usable_per_problem[r.problem.key].add(r.code_hash)
    return {
        "sources": sources,
        "attempts_read": read,
        "skipped": skipped,
        "attempts": len(attempts),
        "programs": len(records),
        "duplicates_merged": len(attempts) - len(records),
        "problems": len(per_problem),
        "per_level": _count(r.problem.level for r in records),
        "per_label": _count(a.label.verdict for _, a in attempts),
        "usable_labels": sum(a.label.usable for _, a in attempts),
        "problems_per_level": problems,
        "problems_with_4_usable": sum(len(v) >= 4 for v in usable_per_problem.values()),
        "problems_with_8_usable": sum(len(v) >= 8 for v in usable_per_problem.values()),
        "by_source": by_source,
    }


def card_markdown(card: dict) -> str:
    lines = [
        "# Corpus of public KernelBench runs",
        "",
        f"- {card['programs']} distinct programs from {card['attempts']} published attempts "
        f"({card['duplicates_merged']} duplicates merged by code hash, every source kept); "
        f"{card['problems']} problems",
        f"- per level (programs): {_inline(card['per_level'])}",
        f"- per label (attempts): {_inline(card['per_label'])}; usable labels: {card['usable_labels']}",
        f"- problems with >= 4 / >= 8 programs carrying a usable label: "
        f"{card['problems_with_4_usable']} / {card['problems_with_8_usable']}",
    ]
    for key, n in card["skipped"].items():
        lines.append(f"- skipped: {key}: {n}")
    lines += ["", "| level | problems | >= 4 programs | >= 8 programs |", "|---|---|---|---|"]
    for level, p in card["problems_per_level"].items():
        lines.append(
            f"| {level} | {p['problems']} | {p['with_at_least_4']} | {p['with_at_least_8']} |"
        )
    lines += [
        "",
        "| source | commit | attempts | programs | per level | labels | unusable | GPUs | reference vs checkout |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    commits = {s["repo"]: s["commit"] for s in card["sources"]}
    for repo, s in card["by_source"].items():
        lines.append(
            f"| {repo} | {commits.get(repo, '') or '-'} | {s['attempts']} | {s['programs']} | "
            f"{_inline(s['per_level'])} | {_inline(s['per_label'])} | {s['unusable_labels']} | "
            f"{_inline(s['gpus'])} | {_inline(s['reference_differs'])} |"
        )
    lines += ["", "Models:", ""]
    for repo, s in card["by_source"].items():
        lines.append(f"- {repo}: {_inline(s['per_model'])}")
    lines += ["", "Unusable labels:", ""]
    for repo, s in card["by_source"].items():
        for why, n in s["unusable_reasons"].items():
            lines.append(f"- {repo}: {n} ({why})")
    lines += [
        "",
        "Extractor (`maxcode.llm.extract`) on the raw responses, against the source's code:",
        "",
        "| source | raw responses | agree | kinds |",
        "|---|---|---|---|",
    ]
    for repo, s in card["by_source"].items():
        e = s["extraction"]
        if e["raw_responses"]:
            lines.append(
                f"| {repo} | {e['raw_responses']} | {e['agree']} | {_inline(e['kinds'])} |"
            )
    return "\n".join(lines) + "\n"


def _inline(counts: dict) -> str:
    return ", ".join(f"{k} {v}" for k, v in counts.items())
