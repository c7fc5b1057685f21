"""Presets are whole params files: each validates, and Snakemake plans each one when it
replaces params.yaml (paper: once its checkout paths exist; until then, the missing
path is named)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import yaml

from maxcode.errors import ConfigError
from maxcode.params import load_params, load_suite
from maxcode.pipeline import PipelinePlan, build_suite
from maxcode.tasks.model import read_tasks_jsonl
from tests.workflow_copy import REPO, make_workdir, snakemake

PRESETS = REPO / "presets"
BUILTIN_CUDA = REPO / "src" / "maxcode" / "tasks" / "builtin_cuda"


def preset(name: str) -> dict:
    return yaml.safe_load((PRESETS / f"{name}.yaml").read_text())


def plan(workdir: Path, preset_file: Path, *extra: str):
    """`snakemake -n` with the preset replacing params.yaml, as the README says."""
    args = ["-n", "--configfile", str(preset_file), "--replace-workflow-config", *extra]
    return snakemake(workdir, *args, timeout=300)


def job_counts(stdout: str) -> dict[str, int]:
    table = stdout[stdout.index("Job stats:") :]
    return {m[1]: int(m[2]) for m in re.finditer(r"^(\w+)\s+(\d+)$", table, re.M)}


def fake_checkouts(root: Path) -> dict[str, str]:
    """The smallest trees that stand where the paper preset's checkouts go."""
    kb = root / "KernelBench" / "KernelBench"
    shutil.copytree(BUILTIN_CUDA, kb)
    tests = root / "pie" / "public_test_cases"
    for pid in ("p00001", "p00002"):
        (tests / pid).mkdir(parents=True)
        (tests / pid / "input.0.txt").write_text("1\n")
        (tests / pid / "output.0.txt").write_text("1\n")
    records = root / "pie" / "test.jsonl"
    records.write_text(
        "".join(
            f'{{"problem_id": "{pid}", "src_code": "int main(){{}}", "tgt_code": "int main(){{}}"}}\n'
            for pid in ("p00001", "p00002")
        )
    )
    model = root / "DeepSeek-R1-Distill-Qwen-7B"
    model.mkdir()
    fixtures = REPO / "tests" / "kernelcompare" / "fixtures"
    return {
        "kb": str(kb),
        "records": str(records),
        "tests": str(tests),
        "model": str(model),
        "parboil": str(fixtures / "parboil"),
        "rodinia": str(fixtures / "rodinia"),
    }


def paper_with(paths: dict[str, str]) -> dict:
    params = preset("paper")
    params["suites"]["kernelbench_l1"]["root"] = paths["kb"]
    params["suites"]["kernelbench_l2"]["root"] = paths["kb"]
    params["suites"]["pie"].update(records=paths["records"], tests_root=paths["tests"])
    params["kernelcompare"]["sources"].update(parboil=paths["parboil"], rodinia=paths["rodinia"])
    params["kernelcompare"]["model"]["name_or_path"] = paths["model"]
    return params


def test_offline_preset_is_the_default_params_file():
    assert (PRESETS / "offline.yaml").read_bytes() == (REPO / "params.yaml").read_bytes()


def test_every_preset_names_itself_and_validates_where_it_needs_nothing_external():
    for name in ("offline", "gpu", "paper", "real-candidates"):
        assert preset(name)["preset"] == name
    for name in ("offline", "gpu"):
        load_params(PRESETS / f"{name}.yaml")


def test_gpu_preset_plans_cuda_rollouts_on_one_gpu_each(tmp_path):
    workdir = make_workdir(tmp_path / "w", yaml.safe_load((REPO / "params.yaml").read_text()))
    shutil.copytree(PRESETS, workdir / "presets")
    proc = plan(workdir, workdir / "presets" / "gpu.yaml")
    assert proc.returncode == 0, proc.stderr[-3000:]
    params = preset("gpu")
    p = PipelinePlan.from_config(params)
    assert p.tasks.keys() == {"cuda_l1", "cuda_l2"}
    assert len(p.tasks["cuda_l1"]) == 10 and len(p.tasks["cuda_l2"]) == 6
    counts = job_counts(proc.stdout)
    assert counts["rollout"] == len(p.all_rollouts())
    assert "results/rollouts/cpp_builtin" not in proc.stdout  # params.yaml's suite is gone
    assert "results/rollouts/cuda_l2/cuda-llm+maxcode/cuda_l2-L2-1/seed2.jsonl" in proc.stdout
    assert all(p.gpus(s) == 1 for s in p.tasks)
    # every KernelCompare rule, the table's included, gets the preset's values, not a file
    kc = plan(workdir, workdir / "presets" / "gpu.yaml", "kernelcompare")
    assert "kernelcompare_table" in kc.stdout and "--params" not in kc.stdout


def test_a_preset_merged_into_params_yaml_is_refused(tmp_path):
    workdir = make_workdir(tmp_path / "w", yaml.safe_load((REPO / "params.yaml").read_text()))
    proc = snakemake(workdir, "-n", "--configfile", str(PRESETS / "gpu.yaml"), timeout=300)
    assert proc.returncode != 0
    assert "add --replace-workflow-config" in proc.stdout + proc.stderr


def test_paper_preset_names_the_checkout_it_needs(tmp_path):
    workdir = make_workdir(tmp_path / "w", yaml.safe_load((REPO / "params.yaml").read_text()))
    proc = plan(workdir, PRESETS / "paper.yaml")
    assert proc.returncode != 0
    assert "kernelcompare.model.name_or_path: checkouts/DeepSeek-R1-Distill-Qwen-7B" in (
        proc.stdout + proc.stderr
    )
    params = paper_with(fake_checkouts(tmp_path / "co"))
    params["suites"]["kernelbench_l2"]["root"] = str(tmp_path / "nowhere")
    with pytest.raises(ConfigError, match=r"suites\.kernelbench_l2\.root: .*nowhere"):
        PipelinePlan.from_config(params)


def test_paper_preset_plans_on_checkouts(tmp_path):
    paths = fake_checkouts(tmp_path / "co")
    params = paper_with(paths)
    workdir = make_workdir(tmp_path / "w", yaml.safe_load((REPO / "params.yaml").read_text()))
    (workdir / "paper.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    proc = plan(workdir, workdir / "paper.yaml")
    assert proc.returncode == 0, proc.stderr[-3000:]
    p = PipelinePlan.from_config(params)
    assert p.tasks["pie"] == ["p00001", "p00002"]
    assert job_counts(proc.stdout)["rollout"] == len(p.all_rollouts())
    assert (
        p.methods["cuda-llm"].depth == 8 and p.methods["cuda-llm"].k == 8 and p.seeds == [0, 1, 2]
    )
    assert params["llm"]["critic"]["thinking_budget"] > 0
    assert params["r2g"]["kind"] == "generative"
    assert params["r2g"]["generative"] == {"preset": "paper"}  # Qwen2.5-7B-Instruct + LoRA
    # KernelBench levels split into the paper's two columns
    built = build_suite(
        "kernelbench_l2",
        load_suite("kernelbench_l2", params["suites"]["kernelbench_l2"]),
        tmp_path / "s",
    )
    assert {t.metadata["level"] for t in built} == {2}
    assert [t.task_id for t in read_tasks_jsonl(tmp_path / "s" / "tasks.jsonl")] == p.tasks[
        "kernelbench_l2"
    ]


def test_cuda_suite_keys_are_checked(tmp_path):
    params = preset("gpu")
    params["suites"]["cuda_l1"]["problems"] = ["x"]
    with pytest.raises(ConfigError, match=r"suites\.cuda_l1: unknown key\(s\) 'problems'"):
        PipelinePlan.from_config(params)
    params = preset("gpu")
    params["suites"]["cuda_l1"] = {"kind": "kernelbench", "root": str(tmp_path)}
    with pytest.raises(ConfigError, match=r"suites\.cuda_l1\.root: .* no level1/ or level2/"):
        PipelinePlan.from_config(params)
    params = preset("gpu")
    params["evaluation"]["cuda"] = {"timing_trails": 3}
    with pytest.raises(
        ConfigError,
        match=r"evaluation\.cuda: unknown key.*timing_trails.*did you mean 'timing_trials'",
    ):
        PipelinePlan.from_config(params)
