import torch
import torch.nn as nn


class Model(nn.Module):
    """Sum over the last dimension, keeping it (a row reduction)."""

    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return torch.sum(x, dim=self.dim, keepdim=True)


batch_size = 4096
row = 4096
reduce_dim = 1


def get_inputs():
    return [torch.randn(batch_size, row)]


def get_init_inputs():
    return [reduce_dim]
