"""Long ranges over an array: each query re-sums what a prefix array would cache."""

import random

SIZES = [(50000, 1500), (80000, 2000), (100000, 2500), (120000, 3000), (150000, 3500)]


def generate(index: int, rng: random.Random) -> str:
    n, q = SIZES[index % len(SIZES)]
    values = " ".join(str(rng.randint(-(10**9), 10**9)) for _ in range(n))
    queries = []
    for _ in range(q):
        l = rng.randint(0, n // 4)
        r = rng.randint(n // 2, n - 1)
        queries.append(f"{l} {r}")
    return f"{n} {q}\n{values}\n" + "\n".join(queries) + "\n"
