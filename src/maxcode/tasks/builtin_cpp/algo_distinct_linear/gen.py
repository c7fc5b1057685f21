"""Values with some repeats; the slow program searches a growing list linearly."""

import random

SIZES = [6000, 9000, 12000, 15000, 18000]


def generate(index: int, rng: random.Random) -> str:
    n = SIZES[index % len(SIZES)]
    values = (str(rng.randint(0, 3 * n)) for _ in range(n))
    return f"{n}\n{' '.join(values)}\n"
