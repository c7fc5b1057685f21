"""A small header standing in for torch's in the precompiled-header sets: tests of what builds
the headers, when and at what priority, without a minute of g++ per set on two cores.

``from tests.fakes.small_pch import small_pch_headers  # noqa: F401`` in a conftest, or
import it into the test module."""

from __future__ import annotations

import pytest


@pytest.fixture
def small_pch_headers(monkeypatch):
    """Every header set (core, whole) is ``#include <vector>``, under a name of its own."""
    from maxcode.evaluate.cuda import build as build_module

    monkeypatch.setattr(
        build_module, "_pch_header", lambda headers: (f"{len(headers)}.h", "#include <vector>\n")
    )
