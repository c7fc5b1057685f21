"""The offline policy's rewrites of quadratic patterns: the same output, and only
where the rewrite keeps the program's meaning."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from maxcode.policy import cpp_transforms as ct

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")

CONCAT = """#include <iostream>
#include <string>
using namespace std;
int main() {
    int n;
    cin >> n;
    string s, w;
    for (int i = 0; i < n; i++) {
        cin >> w;
        s = s + w + ',' + '|';
    }
    cout << s.size() << " " << s.substr(0, 40) << endl;
}
"""
QUEUE = """#include <iostream>
#include <vector>
using namespace std;
int main() {
    int n;
    cin >> n;
    vector<long long> q;
    for (int i = 0; i < n; i++) { long long x; cin >> x; q.push_back(x); }
    q.insert(q.begin(), 5);
    long long paid = 0;
    while (!q.empty()) {
        long long x = q[0];
        q.erase(q.begin());
        paid += x * (long long)q.size();
        if (x % 2 == 0 && x > 0) q.push_back(x / 2);
    }
    for (auto v : q) paid += v;
    cout << paid << endl;
}
"""


def run(tmp_path: Path, source: str, stdin: str, name: str) -> str:
    """The program's output on ``stdin``, built with g++ -O1."""
    src, exe = tmp_path / f"{name}.cpp", tmp_path / name
    src.write_text(source)
    subprocess.run(["g++", "-O1", "-std=c++17", "-o", str(exe), str(src)], check=True)
    proc = subprocess.run([str(exe)], input=stdin, capture_output=True, text=True, check=True)
    return proc.stdout


def test_string_append_keeps_the_output_and_appends_in_place(tmp_path):
    rewritten = ct.string_append(CONCAT)
    assert "(s += w) += ',') += '|'" in rewritten and "s = s +" not in rewritten
    stdin = "300\n" + " ".join(f"w{i}" for i in range(300)) + "\n"
    assert run(tmp_path, rewritten, stdin, "new") == run(tmp_path, CONCAT, stdin, "old")


@pytest.mark.parametrize(
    "source",
    [
        '#include <string>\nint main() { std::string s = "a"; s = s + s; }\n',  # reads itself
        "#include <string>\nint main() { std::string s, w; s = w + s; }\n",  # a prepend
        "int main() { int s = 0, w = 1; s = s + w; }\n",  # not a string
    ],
)
def test_string_append_leaves_other_assignments_alone(source):
    assert ct.string_append(source) is None


def test_front_erase_to_deque_keeps_the_output(tmp_path):
    rewritten = ct.front_erase_to_deque(QUEUE)
    assert "deque<long long> q" in rewritten and "#include <deque>" in rewritten
    assert "q.pop_front()" in rewritten and "q.push_front(5)" in rewritten
    stdin = "500\n" + " ".join(str(i * 7 % 4096) for i in range(500)) + "\n"
    assert run(tmp_path, rewritten, stdin, "new") == run(tmp_path, QUEUE, stdin, "old")


@pytest.mark.parametrize(
    "use",
    [
        "int *p = &q[0];",  # pointer arithmetic needs contiguous storage
        "q.reserve(10);",  # a member a deque lacks
        "f(q);",  # passed to a function expecting a vector
    ],
)
def test_front_erase_to_deque_keeps_vectors_that_need_to_stay_vectors(use):
    source = (
        "#include <vector>\nusing namespace std;\nvoid f(vector<long long>& v) {}\n"
        f"int main() {{ vector<long long> q(3); {use} q.erase(q.begin()); }}\n"
    )
    assert ct.front_erase_to_deque(source) is None


def test_the_policy_reaches_the_rewrites_through_the_registry():
    for name in ("string_append", "front_erase_to_deque"):
        assert "algorithm" in ct.TRANSFORMS[name].targets
    assert ct.apply_transforms(CONCAT, ["string_append"])[1] == ["string_append"]
