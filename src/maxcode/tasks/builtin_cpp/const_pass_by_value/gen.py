"""Array size, query count and a seed; every query copies the whole array in the slow program."""

import random

SIZES = [(100000, 200), (150000, 250), (200000, 300), (250000, 350), (300000, 400)]


def generate(index: int, rng: random.Random) -> str:
    n, q = SIZES[index % len(SIZES)]
    return f"{n} {q} {rng.randint(1, 2**63 - 1)}\n"
