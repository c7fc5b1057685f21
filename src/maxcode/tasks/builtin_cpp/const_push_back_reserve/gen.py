"""Vector length, rounds and a seed; each round grows two vectors from empty."""

import random

SIZES = [(200000, 6), (300000, 6), (400000, 6), (500000, 6), (600000, 6)]


def generate(index: int, rng: random.Random) -> str:
    n, rounds = SIZES[index % len(SIZES)]
    return f"{n} {rounds} {rng.randint(1, 2**63 - 1)}\n"
