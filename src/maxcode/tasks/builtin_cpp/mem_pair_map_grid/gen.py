"""Grids with about 10% blocked cells."""

import random

SIZES = [(150, 150), (180, 200), (200, 250), (250, 250), (300, 300)]


def generate(index: int, rng: random.Random) -> str:
    h, w = SIZES[index % len(SIZES)]
    rows = ["".join("#" if rng.random() < 0.1 else "." for _ in range(w)) for _ in range(h)]
    return f"{h} {w}\n" + "\n".join(rows) + "\n"
