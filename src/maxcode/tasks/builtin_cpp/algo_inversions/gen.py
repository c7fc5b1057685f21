"""Random arrays with repeated values; the slow program is quadratic in n."""

import random

SIZES = [8000, 12000, 16000, 20000, 24000]


def generate(index: int, rng: random.Random) -> str:
    n = SIZES[index % len(SIZES)]
    values = (str(rng.randint(0, 50000)) for _ in range(n))
    return f"{n}\n{' '.join(values)}\n"
