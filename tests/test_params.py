"""params.yaml -> typed Params, once: every field settable, every error naming its key path,
and a schema generated from the same dataclasses that agrees with them field by field."""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path

import jsonschema
import pytest
import yaml

from maxcode.errors import ConfigError
from maxcode.evaluate.cpp import CppEvalConfig
from maxcode.evaluate.cuda.config import CudaEvalConfig
from maxcode.params import SCHEMA_PATH, Params, json_schema, load_params
from maxcode.search.config import MethodConfig

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def raw() -> dict:
    return yaml.safe_load((REPO / "params.yaml").read_text())


def other_value(f: dataclasses.Field, current):
    """A valid value for ``f`` that differs from ``current``."""
    if isinstance(current, bool):
        return not current
    if isinstance(current, int):
        return current + 1
    if isinstance(current, float):
        return current * 2 if current else 1.0
    if isinstance(current, str):
        return {"timing": "wall", "compiler": "clang++"}.get(f.name, current + "x")
    if isinstance(current, tuple):
        return ["-O2"] if f.name == "flags" else ["/opt/hidden"]
    raise AssertionError(f"no test value for {f.name}")


def test_every_cpp_evaluator_field_is_settable_from_params(raw):
    defaults = CppEvalConfig()
    for f in dataclasses.fields(CppEvalConfig):
        value = other_value(f, getattr(defaults, f.name))
        params = copy.deepcopy(raw)
        params["evaluation"]["cpp"] = {f.name: value}
        loaded = getattr(Params.from_dict(params).evaluation.cpp, f.name)
        assert loaded == (tuple(value) if isinstance(value, list) else value), f.name
        jsonschema.validate(params, json_schema())  # the schema lets it through too


def test_workers_zero_means_all_cpus_and_is_allowed(raw):
    raw["evaluation"]["cpp"]["workers"] = 0
    assert Params.from_dict(raw).evaluation.cpp.workers == 0
    jsonschema.validate(raw, json_schema())
    raw["evaluation"]["cpp"]["workers"] = -1
    with pytest.raises(ConfigError, match=r"evaluation\.cpp\.workers: must be >= 0, got -1"):
        Params.from_dict(raw)


def test_cuda_block_is_typed(raw):
    raw["evaluation"]["cuda"] = {"timing_trials": 7, "profile": True}
    cuda = Params.from_dict(raw).evaluation.cuda
    assert isinstance(cuda, CudaEvalConfig) and cuda.timing_trials == 7 and cuda.profile
    raw["evaluation"]["cuda"] = {"timing_trials": "many"}
    with pytest.raises(ConfigError, match=r"evaluation\.cuda\.timing_trials: expected an integer"):
        Params.from_dict(raw)


def test_a_bad_method_key_names_its_path(raw):
    raw["methods"]["cuda-llm"]["trajectry"] = "last"
    with pytest.raises(
        ConfigError,
        match=r"params\.yaml: methods\.cuda-llm: unknown key\(s\) 'trajectry' "
        r"\(did you mean 'trajectory'\?\)",
    ):
        Params.from_dict(raw)


def test_a_method_read_back_by_a_rollout_job_is_checked_strictly():
    with pytest.raises(ConfigError, match=r"methods\.m: unknown key\(s\) 'dept'"):
        MethodConfig.from_dict({"name": "m", "dept": 3})
    with pytest.raises(ConfigError, match=r"methods\.m\.gamma: must be > 0"):
        MethodConfig.from_dict({"name": "m", "gamma": 0})


def test_search_defaults_reach_each_method_and_budgets_merge(raw):
    raw["search"]["depth"] = 6
    raw["search"]["budget"]["max_evaluations"] = 9
    raw["methods"]["best-of-n"]["budget"] = {"max_wall_s": 5}
    methods = Params.from_dict(raw).methods
    assert methods["cuda-llm"].depth == 6 and methods["best-of-n"].depth == 1
    assert methods["best-of-n"].budget.max_evaluations == 9
    assert methods["best-of-n"].budget.max_wall_s == 5.0


def test_missing_params_file_is_an_error(tmp_path):
    with pytest.raises(ConfigError, match=r"nope\.yaml: parameter file not found"):
        load_params(tmp_path / "nope.yaml")


def test_the_committed_schema_is_the_generated_one():
    """`maxcode schema` regenerates it; a field added to a dataclass must show here."""
    assert yaml.safe_load(SCHEMA_PATH.read_text()) == json_schema()


def _leaves(schema: dict, path: str = ""):
    """(key path, property schema) of every scalar field in the schema's object blocks."""
    for name, prop in schema.get("properties", {}).items():
        if prop.get("type") == "object" and "properties" in prop:
            yield from _leaves(prop, f"{path}{name}.")
        else:
            yield f"{path}{name}", prop


def _set(params: dict, dotted: str, value) -> None:
    *head, last = dotted.split(".")
    node = params
    for key in head:
        node = node.setdefault(key, {})
    node[last] = value


@pytest.mark.parametrize("block", ["evaluation", "search", "tables"])
def test_schema_and_loader_agree_on_types_and_bounds_field_by_field(raw, block):
    """Past every bound the schema states, and for a wrong type, both refuse the value."""
    validator = jsonschema.Draft202012Validator(json_schema())
    schema = json_schema()["properties"][block]
    checked = 0
    for key, prop in _leaves(schema, f"{block}."):
        types_ = prop.get("type", [])
        types_ = [types_] if isinstance(types_, str) else types_
        bad_values = []
        if "minimum" in prop:
            bad_values.append(prop["minimum"] - 1)
        if "exclusiveMinimum" in prop:
            bad_values.append(prop["exclusiveMinimum"])
        if "maximum" in prop:
            bad_values.append(prop["maximum"] + 1)
        if types_ and "string" not in types_:
            bad_values.append("not-a-" + types_[0])
        for bad in bad_values:
            params = copy.deepcopy(raw)
            _set(params, key, bad)
            assert not validator.is_valid(params), (key, bad)
            with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
                Params.from_dict(params)
            checked += 1
    assert checked > 5


def test_a_kernelbench_suite_keeps_only_the_named_problems(tmp_path):
    from maxcode.params import KernelBenchSuite
    from tests.runs.public_layouts import write_checkout

    root = str(write_checkout(tmp_path))
    suite = KernelBenchSuite(root=root, levels=(2,), problems=("3_Relu3.py", "1_Relu1.py"))
    tasks = suite.tasks("kb")
    assert sorted(t.metadata["file_name"] for t in tasks) == ["1_Relu1.py", "3_Relu3.py"]
    assert {t.metadata["level"] for t in tasks} == {2}
    assert len(KernelBenchSuite(root=root, levels=(2,)).tasks("kb")) == 3


def test_an_unknown_kernelbench_problem_names_the_field_and_a_valid_name(tmp_path):
    from maxcode.params import KernelBenchSuite
    from tests.runs.public_layouts import write_checkout

    root = str(write_checkout(tmp_path))
    with pytest.raises(ConfigError, match=r"suites\.kb\.problems: \['9_Relu9\.py'\] not among"):
        KernelBenchSuite(root=root, problems=("9_Relu9.py",)).task_ids("kb")
