"""KernelCompare's rules pass their params sections by value: a change reruns exactly
the stages that read it. Planned (`snakemake -n`) against a copy of the finished tiny run."""

from __future__ import annotations

import pytest
import yaml

from maxcode.pipeline import KC_SPLIT
from tests.workflow_copy import snakemake, tiny_params

pytestmark = pytest.mark.slow


def test_a_kernelcompare_param_change_reruns_the_stage_that_reads_it(copy_of_finished):
    workdir = copy_of_finished
    target = KC_SPLIT
    assert (workdir / target).is_file()
    done = snakemake(workdir, "-n", target)
    assert "Nothing to be done" in done.stdout + done.stderr  # the copy is as finished

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


def test_a_rollout_reruns_on_its_own_values_only(copy_of_finished):
    """A rollout job gets the LLM roles its method builds and its language's evaluator
    settings: another role's or language's change leaves it done; its own reruns it."""
    workdir = copy_of_finished
    target = "results/rollouts/cpp_builtin/cuda-llm/io_prefix_sums_endl/seed0.jsonl"
    assert (workdir / target).is_file()

    def plan_after(change) -> str:
        params = tiny_params()
        change(params)
        (workdir / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
        dry = snakemake(workdir, "-n", target)
        assert dry.returncode == 0, dry.stderr[-3000:]
        return dry.stdout + dry.stderr

    critic = plan_after(lambda p: p["llm"]["critic"].update(temperature=0.3))
    assert "Nothing to be done" in critic  # cuda-llm shows no critiques
    cuda = plan_after(lambda p: p["evaluation"].update(cuda={"profile_calls": 5}))
    assert "Nothing to be done" in cuda  # a C++ task never builds the CUDA evaluator
    own = plan_after(lambda p: p["evaluation"]["cpp"].update(time_limit_s=9))
    assert "rule rollout:" in own and "Params have changed since last execution" in own
