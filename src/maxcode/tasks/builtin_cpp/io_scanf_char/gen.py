"""Lines of random words; the slow program calls scanf once per character."""

import random

SIZES = [200000, 400000, 600000, 800000, 1200000]  # characters, roughly


def generate(index: int, rng: random.Random) -> str:
    target = SIZES[index % len(SIZES)]
    lines, size = [], 0
    while size < target:
        words = [
            "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(1, 9)))
            for _ in range(rng.randint(0, 12))
        ]
        line = " ".join(words)
        lines.append(line)
        size += len(line) + 1
    return "\n".join(lines) + "\n"
