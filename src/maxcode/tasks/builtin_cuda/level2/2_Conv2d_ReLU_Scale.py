import torch
import torch.nn as nn


class Model(nn.Module):
    """Convolution followed by ReLU and a per-channel learned scale."""

    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.scale = nn.Parameter(torch.rand(out_channels, 1, 1) + 0.5)

    def forward(self, x):
        return torch.relu(self.conv(x)) * self.scale


batch_size = 16
in_channels = 16
out_channels = 32
height = width = 64
kernel_size = 3


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
