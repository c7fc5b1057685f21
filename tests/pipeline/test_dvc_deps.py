"""Each DVC stage lists every piece of maxcode code its jobs import (nothing missing),
and the exact params keys it reads."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
SRC = REPO / "src"
# The code a stage's jobs run: its rules' scripts, plus the plan every Snakemake run builds.
PLAN = ["workflow/rules/common.smk"]
STAGE_ENTRIES = {
    "suites": ["workflow/scripts/build_suite.py"],
    "rollouts": ["workflow/scripts/run_rollout.py"],
    "r2g": [
        "workflow/scripts/build_r2g_dataset.py",
        "workflow/scripts/train_r2g.py",
        "workflow/scripts/evaluate_r2g.py",
    ],
    "reranked": ["workflow/scripts/run_rollout.py"],
    "kernelcompare": [
        "workflow/scripts/kernelcompare.py",
        "src/maxcode/stages/kernelcompare_cli.py",
    ],
    "tables": ["workflow/scripts/make_tables.py"],
}


def module_file(name: str) -> Path | None:
    base = SRC / Path(*name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def imported(path: Path) -> set[str]:
    text = path.read_text()
    if path.suffix == ".smk":  # the import statements of a rules file
        text = "\n".join(re.findall(r"^(?:from|import) [^\n(]*(?:\([^)]*\))?", text, re.M))
    names = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
    return {n for n in names if n.split(".")[0] == "maxcode" and module_file(n)}


def closure(entries: list[str]) -> set[Path]:
    """Every maxcode source file the entries import, directly or not (function bodies too)."""
    seen: set[Path] = set()
    todo = [REPO / e for e in entries]
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        for name in imported(path):
            parts = name.split(".")
            for i in range(2, len(parts) + 1):  # a package's __init__ runs too
                file = module_file(".".join(parts[:i]))
                if file is not None and file not in seen:
                    todo.append(file)
    return {p for p in seen if SRC in p.parents}


def covered(path: Path, deps: list[str]) -> bool:
    rel = path.relative_to(REPO).as_posix()
    return any(rel == d or rel.startswith(d.rstrip("/") + "/") for d in deps)


STAGES = yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]


@pytest.mark.parametrize("stage", sorted(STAGE_ENTRIES))
def test_each_stage_depends_on_every_module_its_jobs_import(stage):
    deps = [d for d in STAGES[stage]["deps"] if isinstance(d, str)]
    code = closure(STAGE_ENTRIES[stage] + PLAN)
    missing = sorted(p.relative_to(REPO).as_posix() for p in code if not covered(p, deps))
    assert not missing, f"dvc.yaml stage {stage}: deps miss {missing}"
    for entry in [*STAGE_ENTRIES[stage], *PLAN, "Snakefile"]:
        assert covered(REPO / entry, deps), f"dvc.yaml stage {stage}: deps miss {entry}"


def test_prompt_templates_are_a_dep_of_the_stages_that_render_them():
    for stage in ("rollouts", "reranked"):
        assert "src/maxcode/prompts" in STAGES[stage]["deps"], stage


def test_the_checker_sees_function_local_imports():
    files = {p.name for p in closure(["workflow/scripts/evaluate_r2g.py"])}
    assert "evaluate.py" in files  # r2g.evaluate is imported inside pipeline.evaluate_r2g


def test_each_stage_lists_exactly_the_params_keys_the_plan_says_it_reads():
    """dvc.yaml's `params:` are the plan's (PipelinePlan.dvc_params), stage by stage, so a
    rule that starts reading another key cannot leave DVC blind to it."""
    from maxcode.pipeline import PipelinePlan

    raw = yaml.safe_load((REPO / "params.yaml").read_text())
    wanted = PipelinePlan.from_config(raw).dvc_params(raw)
    listed = {name: stage.get("params", []) for name, stage in STAGES.items()}
    assert listed == wanted


# The rules file whose jobs each stage's Snakemake target runs.
STAGE_RULES = {
    "suites": "suites.smk",
    "rollouts": "rollouts.smk",
    "r2g": "r2g.smk",
    "reranked": "rollouts.smk",
    "kernelcompare": "kernelcompare.smk",
    "tables": "tables.smk",
}
# config["a"]["b"], config["a"].get("b", ...) and PLAN.params.a.b: the keys a rule reads.
LOOKUP = re.compile(r'\[\s*"([^"]+)"\s*\]|\.get\(\s*"([^"]+)"[^)]*\)')


def _config_reads(text: str) -> set[str]:
    """The params key paths ``text`` reads; ``a.*`` where it picks a child of ``a`` by a
    computed name (``config["suites"][wildcards.suite]``). ``PipelinePlan.from_config(config)``
    (the whole config, for the job lists) and membership tests are not reads of a value."""
    reads = set()
    for match in re.finditer(r"(?<![\w.])config(?=[\[.])|PLAN\.params((?:\.\w+)+)", text):
        if match.group(1):
            reads.add(match.group(1)[1:])
            continue
        keys, at = [], match.end()
        while step := LOOKUP.match(text, at):
            keys.append(step.group(1) or step.group(2))
            at = step.end()
        if keys:
            reads.add(".".join(keys) + (".*" if text.startswith("[", at) else ""))
    return reads


def _rule_text(name: str) -> str:
    """A rules file with the bodies of the common.smk functions it calls (transitively)."""
    common = (REPO / "workflow/rules/common.smk").read_text()
    bodies = {
        m.group(1): m.group(0)
        for m in re.finditer(r"^def (\w+)\(.*?(?=^\S|\Z)", common, re.M | re.S)
    }
    text, seen = (REPO / "workflow/rules" / name).read_text(), set()
    while called := {f for f in bodies if f not in seen and re.search(rf"\b{f}\b", text)}:
        seen |= called
        text += "".join(bodies[f] for f in sorted(called))
    return text


def _covered(read: str, keys: list[str], presets: list[dict]) -> bool:
    """A listed key is ``read`` or above it; or ``read`` is a block whose every child (in
    every preset) is covered, as DVC sees it."""
    base = read.removesuffix(".*")
    if any(base == k or base.startswith(k + ".") for k in keys):
        return True
    children = set()
    for raw in presets:
        node = raw
        for part in base.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        if not isinstance(node, dict) or not node:
            return False
        children |= set(node)
    return all(_covered(f"{base}.{c}", keys, presets) for c in children)


def test_the_dvc_params_cover_every_key_the_rules_read():
    """A rule's values are what Snakemake reruns its jobs on, and dvc_params what DVC
    reruns the stage on: a key a rule reads (in its own file or a common.smk helper it
    calls) that the stage does not list would leave `dvc repro` blind to it. The
    KernelCompare table once read `preset`, `suites` and `tables.reference` unlisted."""
    presets = [yaml.safe_load(p.read_text()) for p in sorted((REPO / "presets").glob("*.yaml"))]
    listed = {name: stage.get("params", []) for name, stage in STAGES.items()}
    blind = {
        stage: sorted(
            r for r in _config_reads(_rule_text(rules)) if not _covered(r, listed[stage], presets)
        )
        for stage, rules in STAGE_RULES.items()
    }
    assert blind == {stage: [] for stage in STAGE_RULES}


def test_the_rule_reader_finds_the_forms_the_rules_use():
    text = """
        params:
            a=config["kernelcompare"]["sources"]["suite"],
            b=config["llm"].get("generator"),
            c={r: config["llm"][r] for r in ROLES},
            d=config["tables"].get("reference", None),
            e=kernelcompare_suite_dir(PLAN.params.kernelcompare),
            f=PipelinePlan.from_config(config),
            g="kernelcompare" in config,
            h=snakemake.config,
    """
    assert _config_reads(text) == {
        "kernelcompare.sources.suite",
        "llm.generator",
        "llm.*",
        "tables.reference",
        "kernelcompare",
    }


@pytest.mark.parametrize("preset", ["offline", "gpu", "paper"])
def test_every_preset_holds_every_key_dvc_yaml_lists(preset):
    """`cp presets/<p>.yaml params.yaml` then `dvc repro`: DVC refuses a stage whose
    params key the file lacks, and tracks nothing below a key it does not list."""
    from maxcode.pipeline import _held_keys

    raw = yaml.safe_load((REPO / "presets" / f"{preset}.yaml").read_text())
    for name, stage in STAGES.items():
        for key in stage.get("params", []):
            assert _held_keys([key], raw) == [key], f"{preset}: stage {name} lists {key}"


def test_the_tables_stage_lists_what_its_labels_read():
    """Budget labels come from the methods (and the search defaults they inherit), model
    labels from the LLM roles: a change there must rebuild the tables."""
    assert {"methods", "search", "llm.generator", "llm.critic"} <= set(STAGES["tables"]["params"])
    assert {"r2g.dataset.test_fraction", "r2g.dataset.seed"} <= set(STAGES["reranked"]["params"])


def _paths(entries: list) -> list[str]:
    """dvc.yaml's path entries: a string, or a one-key mapping (``path: {persist: true}``)."""
    return [e if isinstance(e, str) else next(iter(e)) for e in entries]


def _plan_paths() -> dict[str, dict[str, list[str]]]:
    """The data each DVC stage reads and writes, from the plan's path templates: what
    dvc.yaml must list, stage by stage (code deps are the test above's business)."""
    from maxcode.pipeline import (
        KC_ADAPTER,
        KC_HELDOUT,
        KC_PAIRS,
        KC_PAIRS_CARD,
        KC_PAIRS_STATS,
        KC_SPLIT,
        KC_TABLES,
        R2G_DATA,
        R2G_MODEL,
        R2G_RANKING,
        STAGE_DIR,
        SUITE_DIR,
        PipelinePlan,
    )

    plan = PipelinePlan.from_config(yaml.safe_load((REPO / "params.yaml").read_text()))
    suites = str(Path(SUITE_DIR).parent)
    rollouts, reranked = (STAGE_DIR.format(stage=s) for s in ("rollouts", "reranked"))
    r2g_results = str(Path(R2G_RANKING).parent)
    kc_written = [KC_PAIRS, KC_PAIRS_STATS, KC_PAIRS_CARD, KC_SPLIT, KC_ADAPTER, KC_HELDOUT]
    kc_folders = list(dict.fromkeys(str(Path(p).parent) for p in kc_written))
    return {
        "suites": {"deps": [], "outs": [suites]},
        "rollouts": {"deps": [suites], "outs": [rollouts]},
        "r2g": {"deps": [suites, rollouts], "outs": [R2G_DATA, R2G_MODEL, r2g_results]},
        "reranked": {"deps": [suites, R2G_MODEL], "outs": [reranked]},
        "kernelcompare": {
            "deps": [suites, plan.params.tables.reference],
            "outs": kc_folders + KC_TABLES,
        },
        "tables": {
            "deps": [
                rollouts,
                reranked,
                r2g_results,
                f"{R2G_DATA}/card.json",
                plan.params.tables.reference,
            ],
            "outs": sorted(plan.table_outputs()),  # outs, metrics and plots
        },
    }


def _data_deps(deps: list) -> list[str]:
    """A stage's data deps: not its code, not the user's checkouts named by params."""
    code = ("Snakefile", "workflow/", "src/")
    return [d for d in _paths(deps) if not d.startswith(code) and not d.startswith("${")]


@pytest.mark.parametrize("stage", sorted(STAGE_ENTRIES))
def test_dvc_yaml_paths_are_the_plans(stage):
    """dvc.yaml's data deps and outs are the paths the rules and the CLI take from
    maxcode.pipeline: a path edited in one place only fails here."""
    dvc = STAGES[stage]
    outs = _paths(dvc["outs"])
    if stage == "tables":
        outs = sorted(outs + _paths(dvc["metrics"]) + _paths(dvc["plots"]))
    listed = {"deps": _data_deps(dvc["deps"]), "outs": outs}
    assert listed == _plan_paths()[stage], f"dvc.yaml stage {stage}"
