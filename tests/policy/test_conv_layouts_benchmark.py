"""benchmarks/bench_conv_layouts.py on the CPU: the variants it times are the same convolution."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.policy.kernelbench_files import kb_problem

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_conv_layouts.py"


def _run(kb: Path, *problems: str, out: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            *(sys.executable, str(BENCH), "--kernelbench", str(kb), "--problems", *problems),
            *("--device", "cpu", "--trials", "2", "--json", str(out)),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_each_layout_variant_of_the_first_convolution_is_checked_and_timed(tmp_path):
    level = tmp_path / "level2"
    level.mkdir()
    (level / "1_Scale_ConvTranspose2d_Tanh.py").write_text(
        kb_problem(
            "cin, cout",
            "        self.conv = nn.ConvTranspose2d(cin, cout, 3, stride=2, padding=1, "
            "output_padding=1)\n        self.conv2 = nn.Conv2d(cout, cout, 1)",
            "        return self.conv2(torch.tanh(self.conv(x * 2.0)))",
            "cin = 3\ncout = 8",
            "torch.randn(2, cin, 16, 16)",
            "cin, cout",
        )
    )
    (level / "2_Conv3d_ReLU.py").write_text(
        kb_problem(
            "cin, cout",
            "        self.conv = nn.Conv3d(cin, cout, 3, bias=False)",
            "        return torch.relu(self.conv(x))",
            "cin = 3\ncout = 4",
            "torch.randn(2, cin, 6, 8, 8)",
            "cin, cout",
        )
    )
    done = _run(
        tmp_path,
        "level2/1_Scale_ConvTranspose2d_Tanh.py",
        "level2/2_Conv3d_ReLU.py",
        out=tmp_path / "r.json",
    )
    assert done.returncode == 0, done.stderr[-2000:]
    first, second = json.loads((tmp_path / "r.json").read_text())["data"]["rows"]
    assert (first["conv"], first["input"]) == ("ConvTranspose2d", [2, 3, 16, 16])  # not conv2
    assert (second["conv"], second["input"]) == ("Conv3d", [2, 3, 6, 8, 8])
    for row in (first, second):
        assert all(row[f"{v}_ms"] > 0 for v in ("conv", "conv_nobias", "cl_converted", "cl_kept"))
        assert "compiled_ms" not in row  # no torch.compile timing on the CPU


def test_a_problem_without_a_convolution_is_named_with_exit_code_2(tmp_path):
    level = tmp_path / "level1"
    level.mkdir()
    (level / "1_Relu.py").write_text(
        kb_problem("", "        pass", "        return torch.relu(x)", "", "torch.randn(4, 8)", "")
    )
    done = _run(tmp_path, "level1/1_Relu.py", out=tmp_path / "r.json")
    assert done.returncode == 2
    assert "1_Relu.py: no nn.Conv2d/3d" in done.stderr.strip().splitlines()[-1]
