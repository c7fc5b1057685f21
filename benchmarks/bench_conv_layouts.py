"""A KernelBench problem's convolution, timed the ways a candidate can call cuDNN, beside the
whole reference forward in eager mode and under ``torch.compile``: how much of
``torch.compile``'s lead on convolution problems a kernel of our own could never close.

For each problem the first convolution module (``nn.Conv2d/3d``, ``nn.ConvTranspose2d/3d``)
is found and its input captured from one forward; then, each timed with CUDA events (median
of ``--trials`` after warm-up; every variant checked against the module's own output first):

* ``eager`` and ``compiled``: the whole reference forward, and ``torch.compile(model)``'s;
* ``conv``: the convolution with its bias, as ATen runs it (cuDNN, then the bias in one more pass);
* ``conv_nobias``: without the bias (what the offline policy calls, the bias peeled off);
* ``cl_converted``: channels-last input and weight converted in the call, the output
  converted back to contiguous (the policy's channels-last choice);
* ``cl_kept``: input and weight already channels-last, the output left channels-last (what
  a layout kept through the graph costs);
* ``cl_kept_benchmark``: the same with ``torch.backends.cudnn.benchmark`` on.

Prints per problem each time in ms and ``compiled / variant`` (above 1.0: the variant alone is
faster than the compiled forward); writes JSON (``--json``).

    python benchmarks/bench_conv_layouts.py --kernelbench $KB/KernelBench \\
        --problems level2/5_ConvTranspose2d_Subtract_Tanh.py level2/54_Conv2d_Multiply_LeakyReLU_GELU.py

``--device cpu`` runs the checks and a rough timing without a GPU (no compile, no cuDNN).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F
from result_json import add_json_argument, headline, json_path, write_result

from maxcode.policy.offline_cuda.graph import load_problem

CONVS = (nn.Conv2d, nn.Conv3d, nn.ConvTranspose2d, nn.ConvTranspose3d)
VARIANTS = ("conv", "conv_nobias", "cl_converted", "cl_kept", "cl_kept_benchmark")


def first_conv(model: nn.Module, inputs: list) -> tuple[nn.Module, torch.Tensor] | None:
    """The model's first convolution module and the input it gets in one forward."""
    seen: list[tuple[nn.Module, torch.Tensor]] = []
    hooks = [
        m.register_forward_pre_hook(lambda mod, args: seen.append((mod, args[0].detach())))
        for m in model.modules()
        if isinstance(m, CONVS)
    ]
    try:
        with torch.no_grad():
            model(*inputs)
    finally:
        for h in hooks:
            h.remove()
    return seen[0] if seen else None


def conv_call(m: nn.Module, x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None):
    if isinstance(m, nn.Conv2d | nn.Conv3d):
        return m._conv_forward(x, w, bias)
    op = F.conv_transpose2d if isinstance(m, nn.ConvTranspose2d) else F.conv_transpose3d
    return op(x, w, bias, m.stride, m.padding, m.output_padding, m.groups, m.dilation)


def variants(m: nn.Module, x: torch.Tensor) -> dict[str, Callable[[], torch.Tensor]]:
    layout = torch.channels_last if x.dim() == 4 else torch.channels_last_3d
    w, b = m.weight.detach(), m.bias.detach() if m.bias is not None else None
    x_cl, w_cl = x.contiguous(memory_format=layout), w.contiguous(memory_format=layout)
    return {
        "conv": lambda: conv_call(m, x, w, b),
        "conv_nobias": lambda: conv_call(m, x, w, None),
        "cl_converted": lambda: conv_call(
            m, x.contiguous(memory_format=layout), w.contiguous(memory_format=layout), None
        ).contiguous(),
        "cl_kept": lambda: conv_call(m, x_cl, w_cl, None),
        "cl_kept_benchmark": lambda: conv_call(m, x_cl, w_cl, None),
    }


def median_ms(fn: Callable[[], object], trials: int, device: str) -> float:
    for _ in range(3):
        fn()
    times = []
    for _ in range(trials):
        if device == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        else:
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def measure(path: Path, trials: int, device: str) -> dict:
    problem = load_problem(path.read_text(), str(path))
    torch.manual_seed(0)
    model = problem.Model(*problem.get_init_inputs()).to(device)
    inputs = [t.to(device) if isinstance(t, torch.Tensor) else t for t in problem.get_inputs()]
    found = first_conv(model, inputs)
    if found is None:
        raise ValueError(f"{path}: no nn.Conv2d/3d or nn.ConvTranspose2d/3d in the model")
    conv, x = found
    row: dict = {"problem": path.name, "conv": type(conv).__name__, "input": list(x.shape)}
    with torch.no_grad():
        expected = conv(x)
        bias = conv.bias.detach().view(-1, *[1] * (x.dim() - 2)) if conv.bias is not None else 0
        calls = variants(conv, x)
        for name, fn in calls.items():
            got = fn()
            if name != "conv":
                got = got + bias  # the peeled bias, added where a kernel of ours would
            if not torch.allclose(got, expected, rtol=1e-2, atol=1e-2):  # TF32 algorithms differ
                raise RuntimeError(f"{path.name}: variant {name} differs from the module's output")
        row["eager_ms"] = median_ms(lambda: model(*inputs), trials, device)
        if device == "cuda":
            compiled = torch.compile(model)
            try:
                row["compiled_ms"] = median_ms(lambda: compiled(*inputs), trials, device)
            except Exception as err:  # the comparison is then without it, saying why
                row["compiled_error"] = f"{type(err).__name__}: {str(err)[:300]}"
        for name, fn in calls.items():
            before = torch.backends.cudnn.benchmark
            torch.backends.cudnn.benchmark = name.endswith("_benchmark")
            try:
                row[f"{name}_ms"] = median_ms(fn, trials, device)
            finally:
                torch.backends.cudnn.benchmark = before
    if row.get("compiled_ms"):
        row["compiled_over"] = {v: round(row["compiled_ms"] / row[f"{v}_ms"], 3) for v in VARIANTS}
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kernelbench", type=Path, required=True, help="a KernelBench checkout")
    parser.add_argument(
        "--problems", nargs="+", required=True, help="problem files relative to --kernelbench"
    )
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    add_json_argument(parser, "conv-layouts")
    args = parser.parse_args()
    args.json = json_path(args.json, "conv-layouts")
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: no CUDA device here; --device cpu runs the checks only")
    paths = [args.kernelbench / p for p in args.problems]
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        parser.error(f"--problems: no such file: {', '.join(missing)}")
    rows = []
    print(f"{'problem':<58} " + " ".join(f"{v:>12}" for v in ("eager", "compiled", *VARIANTS)))
    for path in paths:
        try:
            row = measure(path, args.trials, args.device)
        except ValueError as err:
            parser.error(f"--problems: {err}")
        rows.append(row)
        cells = [row["eager_ms"], row.get("compiled_ms"), *(row[f"{v}_ms"] for v in VARIANTS)]
        print(
            f"{path.name[:58]:<58} "
            + " ".join(f"{c:12.3f}" if c is not None else f"{'-':>12}" for c in cells),
            flush=True,
        )
        write_result("conv-layouts", {"device": args.device, "rows": rows}, None, args.json)
    headlines = []
    timed = [r for r in rows if r.get("compiled_over")]
    for v in ("conv_nobias", "cl_kept"):
        if timed:
            share = sum(r["compiled_over"][v] >= 1.0 for r in timed) / len(timed)
            headlines.append(
                headline(f"problems whose {v} convolution alone is faster than compiled", share)
            )
    write_result("conv-layouts", {"device": args.device, "rows": rows}, headlines, args.json)


if __name__ == "__main__":
    main()
