"""The wall-clock confirmation: which inputs it scales, when a gain counts, what the summary
says, and a real confirmation of a quadratic program against its linear rewrite."""

from __future__ import annotations

import shutil

import pytest

from maxcode.evaluate.cpp import CppEvalConfig, CppEvaluator
from maxcode.llm.usage import Usage
from maxcode.optimize.confirm import Confirmation, confirm, scale_input
from maxcode.optimize.run import _summary
from maxcode.search.records import CandidateRecord, RunEnd


def test_a_count_then_records_on_one_line_is_scaled():
    assert scale_input("3\n10 20 30\n", 2) == "6\n10 20 30 10 20 30\n"


def test_records_of_several_values_keep_together():
    assert scale_input("2\n1 2 3 4\n", 2) == "4\n1 2 3 4 1 2 3 4\n"


def test_a_record_per_line_is_scaled_line_by_line():
    assert scale_input("2\nab cd\nef gh\n", 3) == "6\nab cd\nef gh\nab cd\nef gh\nab cd\nef gh\n"


@pytest.mark.parametrize(
    "text",
    [
        "3 4\n1 2 3\n",  # two numbers on the first line: which one counts?
        "3\n1 2\n",  # fewer values than the count says
        "hello\n1\n",  # no count
        "2\n1 2\n3 4\n5 6\n",  # three lines for two records
    ],
)
def test_other_formats_are_not_scaled(text):
    assert scale_input(text, 2) is None


def confirmation(original: list[float], best: list[float], match: bool = True) -> Confirmation:
    return Confirmation(["x"], "test", len(original), original, best, 1.05, match)


def test_a_gain_counts_only_above_the_threshold_over_the_whole_range():
    assert confirmation([2.0, 2.1, 2.2], [1.0, 1.0, 1.1]).meaningful
    noisy = confirmation([1.0, 1.3, 1.1], [1.0, 1.2, 0.9])  # median 1.1x, range down to 0.83x
    assert noisy.speedup > 1.05 and not noisy.meaningful
    assert not confirmation([2.0, 2.0, 2.0], [1.0, 1.0, 1.0], match=False).meaningful


def test_the_summary_says_no_meaningful_gain_and_keeps_plurals(tmp_path):
    end = RunEnd(1.011, "abc", [1.011], [1.011], "depth", Usage(), 1, 1.0)
    best = CandidateRecord(
        step=0,
        proposal_index=0,
        candidate_id="abc",
        parent_id="reference",
        source="x",
        executed=True,
        rerank_score=None,
        rerank_fallback=None,
        evaluation={"timing": {"mode": "instructions"}},
        reward=1.011,
        critique=None,
        observation_text="",
        best_discounted_reward=0.0,
        usage=Usage(),
        prompt_version=None,
        meta={},
    )
    noisy = confirmation([1.0, 1.3, 1.1], [1.0, 1.2, 0.9])
    text = _summary(end, best, tmp_path / "best.cpp", noisy, written=False)
    assert text.startswith("No meaningful gain was found")
    assert "was not written" in text and "--min-speedup" in text
    assert "1 evaluation," in text and "0 LLM calls" in text


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
def test_a_quadratic_program_is_confirmed_much_slower_than_its_linear_rewrite(tmp_path):
    quadratic = (
        "#include <iostream>\n#include <string>\nint main(){int n; std::cin>>n; std::string s,w;"
        " for(int i=0;i<n;i++){std::cin>>w; s = s + w;} std::cout<<s.size()<<'\\n';}\n"
    )
    linear = quadratic.replace("s = s + w", "s += w")
    test = tmp_path / "tests" / "input.0.txt"
    test.parent.mkdir()
    test.write_text("2000\n" + " ".join(["abcdefgh"] * 2000) + "\n")
    evaluator = CppEvaluator(CppEvalConfig(timing="wall", flags=("-O2",)), tmp_path / "cache")
    result = confirm(
        evaluator, quadratic, linear, [test], None, tmp_path / "work", repeats=3, target_s=0.1
    )
    assert "scaled x" in result.how and result.outputs_match
    assert result.meaningful and result.speedup > 3
