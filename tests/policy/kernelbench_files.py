"""Problem files written the way KernelBench writes them, for the offline policy's tests."""

from __future__ import annotations


def kb_problem(
    init_args: str, init: str, forward: str, sizes: str, inputs: str, init_inputs: str | None = None
) -> str:
    """A problem file in KernelBench's own style: sizes at module level, ``super(Model, self)``;
    ``get_init_inputs`` returns ``init_inputs`` (default: the constructor's arguments)."""
    return f'''import torch
import torch.nn as nn

class Model(nn.Module):
    """A KernelBench-style problem."""
    def __init__(self, {init_args}):
        super(Model, self).__init__()
{init}

    def forward(self, x):
{forward}

{sizes}

def get_inputs():
    return [{inputs}]

def get_init_inputs():
    return [{init_args if init_inputs is None else init_inputs}]
'''
