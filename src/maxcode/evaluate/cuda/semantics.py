"""Which KernelBench harness the evaluator reproduces: one row per KernelBench version.

A verdict is only comparable with KernelBench's when both build the models the same way,
seed the same points and use the same tolerances. Each row names the KernelBench commit
whose ``eval.py`` it mirrors, so a result says which harness it agrees with.
"""

from __future__ import annotations

from dataclasses import dataclass

PRECISIONS = ("fp32", "fp16", "bf16")


@dataclass(frozen=True)
class Semantics:
    """How one KernelBench version builds, seeds and compares (its ``eval.py``)."""

    name: str
    kernelbench_commit: str  # ScalingIntelligence/KernelBench commit whose eval.py this mirrors
    eval_path: str  # the file at that commit
    train_mode: bool  # Model and ModelNew stay in nn.Module's default training mode
    casts_to_precision: bool  # floating inputs .to(dtype) and models .to(device, dtype)
    tolerances: dict[str, float]  # precision -> atol = rtol (torch.allclose)
    equal_nan: bool  # torch.allclose's default: a NaN in both outputs is a mismatch
    inputs_on_cpu: bool  # get_inputs() runs on the CPU generator, then .cuda()

    def tolerance(self, precision: str) -> float:
        return self.tolerances[precision]


SEMANTICS: dict[str, Semantics] = {
    s.name: s
    for s in (
        # v0.1 merge (PR #56, 2025-07-21); eval.py unchanged since 48642c5 (2025-01-13):
        # set_seed(42) before get_init_inputs, before Model(...) and before ModelNew(...);
        # trial seeds from torch.manual_seed(42) + torch.randint(0, 2**32 - 1); set_seed(trial)
        # before get_inputs and before moving each model; allclose(atol=rtol=1e-2); fp32 only.
        Semantics(
            name="kernelbench-v0.1",
            kernelbench_commit="88df56b",
            eval_path="src/eval.py",
            train_mode=True,
            casts_to_precision=False,
            tolerances={"fp32": 1e-2},
            equal_nan=False,
            inputs_on_cpu=True,
        ),
        # HEAD (2026-03-05): the same seeding points; inputs and weights cast to `precision`
        # (_process_input_tensor, .to(device, dtype=precision)); get_tolerance_for_precision:
        # 1e-4 at fp32 (torchbench), 1e-2 at fp16/bf16.
        Semantics(
            name="kernelbench-head",
            kernelbench_commit="423217d",
            eval_path="src/kernelbench/eval.py",
            train_mode=True,
            casts_to_precision=True,
            tolerances={"fp32": 1e-4, "fp16": 1e-2, "bf16": 1e-2},
            equal_nan=False,
            inputs_on_cpu=True,
        ),
    )
}


def check_semantics(name: str, precision: str, origin: str = "CudaEvalConfig") -> Semantics:
    """The row for ``name``; a ValueError that says what to set when the pair is not valid."""
    if name not in SEMANTICS:
        raise ValueError(
            f"{origin}.semantics = {name!r} is unknown; choose one of {sorted(SEMANTICS)}"
        )
    row = SEMANTICS[name]
    if precision not in PRECISIONS:
        raise ValueError(
            f"{origin}.precision = {precision!r} is unknown; choose one of {list(PRECISIONS)}"
        )
    if precision not in row.tolerances:
        raise ValueError(
            f"{origin}.precision = {precision!r}: {name} (KernelBench {row.kernelbench_commit}) "
            f"evaluates at {', '.join(row.tolerances)} only; set precision: fp32, or semantics: "
            "kernelbench-head for fp16/bf16"
        )
    return row
