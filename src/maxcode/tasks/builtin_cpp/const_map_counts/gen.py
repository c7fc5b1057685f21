"""Insert and query counts and a seed; keys are drawn from [0, 2e6)."""

import random

SIZES = [(20000, 20000), (30000, 30000), (40000, 40000), (50000, 50000), (60000, 60000)]


def generate(index: int, rng: random.Random) -> str:
    n, q = SIZES[index % len(SIZES)]
    return f"{n} {q} {rng.randint(1, 2**63 - 1)}\n"
