"""Large inputs, tiny output: reading through synchronised cin dominates."""

import random

SIZES = [40000, 80000, 120000, 160000, 200000]


def generate(index: int, rng: random.Random) -> str:
    n = SIZES[index % len(SIZES)]
    values = (str(rng.randint(-(10**12), 10**12)) for _ in range(n))
    return f"{n}\n{' '.join(values)}\n"
