"""Only PyTorch ops, no kernel of its own: expected REJECTED no_custom_kernel (static)."""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, alpha):
        super().__init__()
        self.alpha = alpha

    def forward(self, a, b):
        return torch.add(b, a, alpha=self.alpha)
