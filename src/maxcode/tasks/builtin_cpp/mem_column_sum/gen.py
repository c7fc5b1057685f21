"""Matrix size, rounds and a seed; the program builds the matrix itself."""

import random

SIZES = [(1000, 12), (1200, 10), (1400, 8), (1600, 6), (2000, 4)]


def generate(index: int, rng: random.Random) -> str:
    n, rounds = SIZES[index % len(SIZES)]
    return f"{n} {rounds} {rng.randint(1, 2**63 - 1)}\n"
