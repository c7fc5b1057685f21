"""Task of borderline.py (out = 2x): inputs with a rare large value, placed by the seed the
harness set, so that with the evaluator's seed 42 only the second timed input set holds one
(seed_for("timing-alt") % 7 == 3; no trial, bait, timing or shape seed is 3 mod 7)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return 2 * x


def get_inputs():
    x = torch.randn(4096).clamp(-4, 4)
    if torch.initial_seed() % 7 == 3:
        x[17] = 6.0
    return [x]


def get_init_inputs():
    return []
