"""End to end: best.cpp is written only when its gain holds by wall clock on larger inputs
with the user's flags; a string-building program that the offline policy cannot fix ends
with no meaningful gain, one it can fix is made linear."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

MAXCODE = [sys.executable, "-m", "maxcode"]
PROGRAM = """#include <iostream>
#include <string>
using namespace std;
int main() {
    int n;
    cin >> n;
    string s, w;
    for (int i = 0; i < n; i++) {
        cin >> w;
        s = %s;
    }
    unsigned long long h = 0;
    for (char c : s) h = h * 131 + (unsigned char)c;
    cout << s.size() << " " << h << endl;
}
"""


def run(tmp_path: Path, build: str) -> tuple[subprocess.CompletedProcess, Path]:
    src = tmp_path / "words.cpp"
    src.write_text(PROGRAM % build)
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    rng = random.Random(0)
    for i, n in enumerate([300, 600, 1200]):
        words = ["".join(rng.choice("abc") for _ in range(rng.randint(2, 6))) for _ in range(n)]
        (inputs / f"input.{i}.txt").write_text(f"{n}\n{' '.join(words)}\n")
    out = tmp_path / "out"
    args = [str(src), "--tests", str(inputs), "--make-tests", "3", "--out", str(out)]
    args += ["--depth", "2", "--k", "2", "--cxxflags", "-std=c++17 -O2"]
    proc = subprocess.run(
        [*MAXCODE, "optimize", *args], capture_output=True, text=True, timeout=900
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc, out


@pytest.mark.slow
def test_a_prepend_loop_the_policy_cannot_fix_writes_no_best(tmp_path):
    proc, out = run(tmp_path, 'w + "," + s')  # quadratic, and no offline rewrite for it
    assert "No meaningful gain was found" in proc.stdout, proc.stdout
    assert not (out / "best.cpp").exists()
    html = (out / "report.html").read_text()
    assert "Winning change" not in html and "g++ -std=c++17 -O2" in html


@pytest.mark.slow
def test_an_append_loop_is_made_linear_and_confirmed(tmp_path):
    proc, out = run(tmp_path, 's + w + ","')
    assert "confirmed" in proc.stdout and (out / "best.cpp").exists(), proc.stdout
    assert "s = s +" not in (out / "best.cpp").read_text()
    confirmation = json.loads((out / "confirmation.json").read_text())
    assert "scaled x" in confirmation["how"] and confirmation["low"] > 2
    assert "-std=c++17 -O2" in proc.stderr.splitlines()[0]
