"""KernelCompare's rules pass their params sections by value: a change reruns exactly
the stages that read it."""

from __future__ import annotations

import pytest
import yaml

from .conftest import make_workdir, snakemake, tiny_params

pytestmark = pytest.mark.slow


def test_a_kernelcompare_param_change_reruns_the_stage_that_reads_it(tmp_path):
    workdir = make_workdir(tmp_path / "w", tiny_params())
    target = "data/kernelcompare/split.json"
    proc = snakemake(workdir, target)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (workdir / target).is_file()

    def plan_after(change) -> str:
        params = tiny_params()
        change(params["kernelcompare"])
        (workdir / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
        dry = snakemake(workdir, "-n", target)
        assert dry.returncode == 0, dry.stderr[-3000:]
        return dry.stdout + dry.stderr

    untouched = plan_after(lambda kc: kc["sft"].update(num_train_epochs=3))
    assert "Nothing to be done" in untouched  # sft's values: not the split's business
    changed = plan_after(lambda kc: kc["split"].update(seed=7))
    assert "rule kernelcompare_split:" in changed
    assert "Params have changed since last execution" in changed
