import torch
import torch.nn as nn


class Model(nn.Module):
    """Linear layer, ReLU, then an extra learned bias: a fusable epilogue chain."""

    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.bias = nn.Parameter(torch.randn(out_features) * 0.02)

    def forward(self, x):
        return torch.relu(self.linear(x)) + self.bias


batch_size = 512
in_features = 1024
out_features = 1024


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
