import torch
import torch.nn as nn


class Model(nn.Module):
    """Batched matrix product of (b, m, k) and (b, k, n) tensors."""

    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return torch.bmm(A, B)


batch_size = 32
m = 256
k = 512
n = 384


def get_inputs():
    return [torch.randn(batch_size, m, k), torch.randn(batch_size, k, n)]


def get_init_inputs():
    return []
