"""Many short output lines: endl's flush per line dominates the slow program."""

import random

SIZES = [10000, 20000, 30000, 40000, 50000]


def generate(index: int, rng: random.Random) -> str:
    n = SIZES[index % len(SIZES)]
    values = (str(rng.randint(-(10**9), 10**9)) for _ in range(n))
    return f"{n}\n{' '.join(values)}\n"
