"""The offline critic names the quadratic patterns and fits growth against a size that
means something (the first integer of each input), with the fit's quality."""

from __future__ import annotations

from pathlib import Path

import pytest

from maxcode.critique.offline import OfflineCritic, growth_fit
from maxcode.evaluate import result as ev
from maxcode.evaluate.result import EvalResult, Status, Timing
from maxcode.tasks.model import Task

CRITIC = OfflineCritic()

CONCAT = """#include <iostream>
#include <string>
using namespace std;
int main() { int n; cin >> n; string s, w;
  for (int i = 0; i < n; i++) { cin >> w; s = s + w; }
  cout << s.size() << "\\n"; }
"""
FRONT = """#include <iostream>
#include <vector>
using namespace std;
int main() { int n; cin >> n; vector<int> q(n);
  long long t = 0;
  while (!q.empty()) { t += q[0]; q.erase(q.begin()); }
  cout << t << "\\n"; }
"""
SEARCH = """#include <algorithm>
#include <iostream>
#include <vector>
using namespace std;
int main() { int n; cin >> n; vector<int> seen;
  for (int i = 0; i < n; i++) { int x; cin >> x;
    if (find(seen.begin(), seen.end(), x) == seen.end()) seen.push_back(x); }
  cout << seen.size() << "\\n"; }
"""
MAP_DP = """#include <iostream>
#include <map>
using namespace std;
int main() { int n; cin >> n; map<int, long long> dp; dp[0] = 1;
  for (int i = 1; i <= n; i++) dp[i] = dp[i - 1] * 3 % 1000003;
  cout << dp[n] << "\\n"; }
"""


def make_tests_dir(tmp_path: Path, counts: list[int]) -> Path:
    """Inputs whose first integer is n with one small value per record: bytes grow with
    n only through the digits, as in the tiny DP inputs the critic used to misread."""
    d = tmp_path / "tests"
    d.mkdir()
    for i, n in enumerate(counts):
        (d / f"input.{i}.txt").write_text(f"{n}\n7\n")
        (d / f"output.{i}.txt").write_text("0\n")
    return d


def counted(costs: list[float]) -> EvalResult:
    rows = [{"index": i, "instructions": c} for i, c in enumerate(costs)]
    return EvalResult(
        Status.OK,
        tests=[ev.TestVerdict(i, Status.OK, 0.01) for i in range(len(costs))],
        timing=Timing("instructions", "instructions", sum(costs), sum(costs)),
        figures={"tests": rows},
    )


@pytest.mark.parametrize(
    ("source", "words"),
    [
        (CONCAT, "s = s + x copies the whole string"),
        (FRONT, "erase/insert at the front"),
        (SEARCH, "linear search"),
        (MAP_DP, "std::map keyed by integers"),
    ],
)
def test_each_quadratic_pattern_is_named_with_its_fix(source, words):
    task = Task("t", "unit", "cpp", source)
    text = CRITIC.critique(task, source, counted([1e6, 2e6, 4e6])).text
    assert words in text
    if source is not MAP_DP:  # a tree walk per access is a constant factor, not quadratic
        assert "algorithmic inefficiency" in text.splitlines()[0]


def test_growth_is_fitted_against_the_first_integer_with_start_up_cost_absorbed(tmp_path):
    """Quadratic work on top of a fixed start-up cost, on inputs of nearly equal bytes."""
    counts = [100, 200, 400, 800]
    task = Task("t", "unit", "cpp", CONCAT, tests_dir=make_tests_dir(tmp_path, counts))
    fit = growth_fit(task, counted([2e6 + 50 * n * n for n in counts]))
    assert fit is not None and fit.size == "the first integer of each input"
    assert fit.exponent == pytest.approx(2.0, abs=0.1) and fit.r2 > 0.99
    text = CRITIC.critique(task, CONCAT, counted([2e6 + 50 * n * n for n in counts])).text
    assert "n^2.0 (n = the first integer of each input; fit R^2 1.00 over 4 tests)" in text


def test_a_poor_fit_is_shown_but_concludes_nothing(tmp_path):
    source = '#include <cstdio>\nint main() { puts("1"); }\n'
    task = Task(
        "t", "unit", "cpp", source, tests_dir=make_tests_dir(tmp_path, [100, 200, 400, 800])
    )
    result = counted([9e6, 1e6, 8e6, 2e6])  # no relation to n
    text = CRITIC.critique(task, source, result).text
    assert "a poor fit, so no growth is concluded" in text
    assert "algorithmic" not in text.splitlines()[0]
