"""List length, passes and a seed; nodes are linked in a random order."""

import random

SIZES = [(100000, 3), (130000, 3), (160000, 3), (200000, 3), (250000, 3)]


def generate(index: int, rng: random.Random) -> str:
    n, rounds = SIZES[index % len(SIZES)]
    return f"{n} {rounds} {rng.randint(1, 2**63 - 1)}\n"
