"""Subset-sum counting: items, capacity and a modulus chosen at run time (< 2^31)."""

import random

SIZES = [(300, 20000), (400, 25000), (500, 30000), (600, 35000), (700, 40000)]
MODULI = [998244353, 1000000007, 1000000009, 2147483647, 754974721]


def generate(index: int, rng: random.Random) -> str:
    n, capacity = SIZES[index % len(SIZES)]
    weights = " ".join(str(rng.randint(1, 200)) for _ in range(n))
    return f"{n} {capacity} {MODULI[index % len(MODULI)]}\n{weights}\n"
