"""The environment record a result carries: device properties from torch in the candidate's
process, clocks, driver and bus width from the evaluator (nvidia-smi and NVML do not run inside
the sandbox: on the H100 every sandboxed result lost its driver, clocks and roofline peaks)."""

from __future__ import annotations

from types import SimpleNamespace

from maxcode.evaluate.cuda.figures import environment_from

H100 = SimpleNamespace(
    name="NVIDIA H100 80GB HBM3",
    major=9,
    minor=0,
    multi_processor_count=132,
    L2_cache_size=50 * 2**20,
    total_memory=80 * 2**30,
)
FACTS = {
    "driver_version": "580.159.04",
    "clocks.sm": "1980",
    "clocks.max.sm": "1980",
    "clocks.mem": "2619",
    "clocks.max.mem": "2619",
    "memory_bus_bits": 5120,
}


def test_peaks_come_from_the_facts_the_evaluator_read():
    env = environment_from(H100, FACTS, "2.11.0", "13.0")
    assert env["driver"] == "580.159.04" and env["sm_clock_mhz"] == 1980.0
    assert env["peak_bandwidth_gbs"] == 3352.3  # 2619 MHz x 2 x 5120 bit / 8
    assert env["peak_fp32_tflops"] == 66.9  # 132 SMs x 128 lanes x 2 x 1.98 GHz


def test_without_facts_the_peaks_are_unknown_not_guessed():
    env = environment_from(H100, {}, "2.11.0", "13.0")
    assert env["driver"] is None and env["peak_bandwidth_gbs"] is None
    assert env["gpu"] == "NVIDIA H100 80GB HBM3" and env["sm_count"] == 132
