"""One lowercase word; the slow program calls strlen on every loop iteration."""

import random

SIZES = [20000, 30000, 40000, 50000, 60000]


def generate(index: int, rng: random.Random) -> str:
    n = SIZES[index % len(SIZES)]
    return "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(n)) + "\n"
