import torch
import torch.nn as nn


class Model(nn.Module):
    """Elementwise out = alpha * a + b over a large flat vector (memory bound)."""

    def __init__(self, alpha):
        super().__init__()
        self.alpha = alpha

    def forward(self, a, b):
        return self.alpha * a + b


batch_size = 16
dim = 1 << 20
alpha = 0.75


def get_inputs():
    return [torch.randn(batch_size, dim), torch.randn(batch_size, dim)]


def get_init_inputs():
    return [alpha]
