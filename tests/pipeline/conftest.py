"""DVC in the pipeline tests' repositories."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True, scope="session")
def _no_dvc_analytics():
    """`dvc init` runs before the project's `.dvc/config` (analytics = false) is copied into a
    test repository, and would leave an analytics report in /tmp on every run."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DVC_NO_ANALYTICS", "1")
        yield
