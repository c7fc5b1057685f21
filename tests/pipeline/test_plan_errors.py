"""A plan with several unreadable suites names every one of them in one message."""

from __future__ import annotations

import pytest

from maxcode.errors import ConfigError
from maxcode.pipeline import PipelinePlan
from tests.workflow_copy import tiny_params


def test_every_missing_suite_path_is_named_at_once(tmp_path):
    params = tiny_params()
    params["suites"]["kb"] = {"kind": "kernelbench", "root": str(tmp_path / "no-kernelbench")}
    params["suites"]["pie"] = {
        "kind": "pie",
        "records": str(tmp_path / "no-pie.jsonl"),
        "tests_root": str(tmp_path / "no-tests"),
    }
    with pytest.raises(ConfigError) as err:
        PipelinePlan.from_config(params)
    message = str(err.value)
    assert "2 input(s) cannot be read" in message
    assert "suites.kb.root" in message and "suites.pie.records" in message


def test_errors_name_the_file_the_params_came_from():
    params = tiny_params()
    params["search"]["depht"] = 3
    with pytest.raises(ConfigError, match=r"^presets/mine.yaml: search"):
        PipelinePlan.from_config(params, source="presets/mine.yaml")
