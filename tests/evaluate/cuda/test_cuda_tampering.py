"""Check torch_tampering on the CPU: what a candidate may not change in torch, and that
torch's own lazy patching (dynamo, the profiler) is not mistaken for it."""

from __future__ import annotations

import pytest
import torch

from maxcode.evaluate.cuda.tampering import TorchSnapshot


@pytest.fixture
def snapshot():
    snap = TorchSnapshot.take()
    yield snap
    snap.restore()


def test_untouched_torch_shows_no_change_even_after_compile_and_profiler(snapshot):
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU())
    torch.compile(model, backend="eager")(torch.randn(2, 8))
    from torch.profiler import profile
    from torch.utils.flop_counter import FlopCounterMode

    with profile(), FlopCounterMode(display=False):
        model(torch.randn(2, 8))
    assert snapshot.changes() == []


@pytest.mark.parametrize(
    ("tamper", "named"),
    [
        (lambda: setattr(torch, "relu", lambda x: x), "torch.relu replaced"),
        (
            lambda: setattr(torch.nn.functional, "gelu", lambda x, **k: x),
            "torch.nn.functional.gelu replaced",
        ),
        (lambda: setattr(torch.Tensor, "relu", lambda x: x), "torch.Tensor.relu added"),
        (
            lambda: setattr(torch.nn.ReLU, "forward", lambda s, x: x),
            "torch.nn.ReLU.forward replaced",
        ),
        (
            lambda: setattr(torch.backends.cudnn, "benchmark", True),
            "torch.backends.cudnn.benchmark: False -> True",
        ),
        (
            lambda: setattr(torch.backends.cuda.matmul, "allow_tf32", True),
            "torch.backends.cuda.matmul.allow_tf32: False -> True",
        ),
        (
            lambda: torch.set_float32_matmul_precision("medium"),
            "torch.get_float32_matmul_precision(): 'highest' -> 'medium'",
        ),
        (
            lambda: torch.set_default_dtype(torch.float16),
            "torch.get_default_dtype(): torch.float32 -> torch.float16",
        ),
    ],
)
def test_each_change_is_named_and_restored(snapshot, tamper, named):
    tamper()
    assert named in snapshot.changes()
    snapshot.restore()
    assert snapshot.changes() == []
    assert torch.relu(torch.tensor([-1.0])).item() == 0.0
    assert torch.get_default_dtype() is torch.float32
