"""Polynomial degree, evaluation point and a seed for the coefficients."""

import random

SIZES = [200000, 300000, 400000, 500000, 600000]


def generate(index: int, rng: random.Random) -> str:
    n = SIZES[index % len(SIZES)]
    return f"{n} {rng.randint(2, 10**9)} {rng.randint(1, 2**63 - 1)}\n"
