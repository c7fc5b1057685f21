"""Fingerprints stand in for copies of large outputs in the result-reuse bait and the input
snapshots; on real KernelBench level 1 sizes they must index inside the tensor."""

from __future__ import annotations

import pytest
import torch

from maxcode.evaluate.cuda.worker import _fingerprint, _same_fingerprint


@pytest.mark.parametrize("numel", [16 * 64 * 256 * 256, 16 * 64 * 257 * 766, 7, 1])
def test_fingerprint_samples_stay_inside_large_tensors(numel):
    # 67,108,864 and 201,586,688 elements: a float32 linspace to numel - 1 rounds to numel.
    t = torch.zeros(numel, dtype=torch.uint8)
    t[-1] = 1
    fp = _fingerprint(t)
    assert fp[2][-1].item() == 1  # the last element is sampled, and nothing past it
    assert _same_fingerprint(fp, _fingerprint(t.clone()))
    t[-1] = 2
    assert not _same_fingerprint(fp, _fingerprint(t))
