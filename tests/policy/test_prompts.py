import re

import pytest

from maxcode.evaluate.result import EvalResult, Status
from maxcode.policy.prompts import critique_prompt, generator_prompt, template_version
from maxcode.search.types import Attempt, Critique, Observation
from tests.llm.helpers import CPP_REFERENCE, compile_error, cpp_task, cuda_task, ok_result

BROKEN = "int main() { return 0 }"
FAST = '#include <cstdio>\nint main() { puts("45"); }'


def _attempts():
    a = Attempt(
        0, 0, "aaaa", BROKEN, compile_error(), 0.0, Critique("missing semicolon", "c", False)
    )
    b = Attempt(0, 1, "bbbb", FAST, ok_result(2.5), 2.5, Critique("io bound now", "c", False))
    return a, b


def _obs(task, *, trajectory, best, critique, include_trajectory=True):
    return Observation(
        task=task,
        step=1,
        depth=4,
        trajectory=trajectory,
        best=best,
        best_discounted_reward=2.5 if best else 0.0,
        include_critique=critique,
        method="m",
        include_trajectory=include_trajectory,
    )


def _user(prompt):
    return prompt.messages[1]["content"]


def test_full_observation_shows_every_component():
    a, b = _attempts()
    p = generator_prompt(_obs(cpp_task(), trajectory=[a, b], best=b, critique=True))
    system, user = p.messages[0]["content"], _user(p)
    assert "BEST-PERFORMING" in system and "TRAJECTORY" in system and "CRITIQUES" in system
    assert user.index(CPP_REFERENCE.strip()) < user.index("Best-performing")
    assert BROKEN in user and "missing semicolon" in user and "io bound now" in user
    assert "expected ';' before 'return'" in user  # compiler output reaches the model
    assert "speedup=2.500x" in user and "Best discounted reward so far: 2.500" in user
    assert "same input from stdin" in system  # C++ variant of the seed prompt


def test_disabled_components_are_absent():
    a, b = _attempts()
    no_crit = _user(
        generator_prompt(_obs(cpp_task(), trajectory=[a, b], best=None, critique=False))
    )
    assert (
        BROKEN in no_crit
        and "missing semicolon" not in no_crit
        and "Best-performing" not in no_crit
    )
    first = generator_prompt(_obs(cpp_task(), trajectory=[], best=None, critique=False))
    assert "TRAJECTORY" not in first.messages[0]["content"] and "Attempt" not in _user(first)


def test_critique_only_shows_critiques_without_code():
    a, b = _attempts()
    user = _user(
        generator_prompt(
            _obs(cpp_task(), trajectory=[a, b], best=None, critique=True, include_trajectory=False)
        )
    )
    assert "missing semicolon" in user and "io bound now" in user
    assert BROKEN not in user and FAST not in user
    assert "Critiques of previous attempts" in user


def test_cuda_prompt_is_the_seed_prompt():
    p = generator_prompt(_obs(cuda_task(), trajectory=[], best=None, critique=False))
    system = p.messages[0]["content"]
    assert system.startswith("You write custom CUDA kernels to replace the pytorch operators")
    assert "load_inline" in system and "ModelNew" in system
    assert "```python\nimport torch" in _user(p)
    assert p.version.startswith("generator_cuda/v1+")


def test_critique_prompt_carries_feedback_and_figures():
    result = EvalResult(Status.OK, figures={"achieved_gbps": 812.5, "peak_gbps": 3350.0})
    p = critique_prompt(cuda_task(), "class ModelNew: pass", result)
    assert "1. Diagnose" in p.messages[0]["content"]
    assert "achieved_gbps=812.5" in _user(p) and "class ModelNew: pass" in _user(p)


@pytest.mark.parametrize(
    "name", ["generator_cpp", "generator_cuda", "critique_cpp", "critique_cuda"]
)
def test_every_template_has_a_version(name):
    assert re.fullmatch(rf"{name}/v\d+\+[0-9a-f]{{8}}", template_version(name))


def test_figures_render_the_same_after_a_json_roundtrip():
    figures = {"tests": [{"wall_s": 0.1, "index": 0}], "peak_rss_kb": 3364, "ratio": 0.123456}
    roundtrip = {"ratio": 0.123456, "peak_rss_kb": 3364, "tests": [{"index": 0, "wall_s": 0.1}]}
    first = critique_prompt(cpp_task(), "x", EvalResult(Status.OK, figures=figures))
    again = critique_prompt(cpp_task(), "x", EvalResult(Status.OK, figures=roundtrip))
    assert first.messages == again.messages
    assert "ratio=0.1235" in _user(first)
