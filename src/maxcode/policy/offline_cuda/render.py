"""Fill the Jinja2 templates: a plan plus one parameter set gives a complete candidate file.

The ``.cu`` part includes only CUDA headers (kernels and raw-pointer launchers), so it
compiles quickly; the torch binding (checks, sizes, allocation) lives in ``cpp_sources``,
which the evaluator compiles against its precompiled ``torch/extension.h``.
"""

from __future__ import annotations

import functools
import hashlib
import math
import textwrap
from dataclasses import dataclass

import jinja2

from maxcode.policy.offline_cuda import space
from maxcode.policy.offline_cuda.families import Plan, Stage

_SHORT = {
    "elementwise": "ew",
    "reduction": "red",
    "gemm": "gemm",
    "library": "lib",
    "stats": "stats",
    "scan": "scan",
}
FUNCTION = "offline_forward"


@functools.cache
def environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.PackageLoader("maxcode.policy.offline_cuda", "templates"),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,
    )


@dataclass
class Rendered:
    source: str  # the whole candidate file
    cuda: str  # the .cu text as written (what nvcc compiles, before the evaluator's header)
    cpp: str  # the host binding


def _stage_params(stage: Stage, scalars: list[str]) -> tuple[str, str, str]:
    """(launch function's parameter list, kernels' parameter list, argument list) for tensors,
    block sizes and scalars. The kernels take the sizes they divide by (a broadcast operand's
    extents, a pooling's output sizes) as ``mx_div`` (``divider.cuh.j2``), converted from the
    launch function's ``long`` at the launch."""
    sizes: list[tuple[str, bool]] = []  # (name, divided by in the kernels), in argument order
    for i, t in enumerate(stage.tensors):
        if t.role in ("block", "block2"):
            sizes += [(a, True) for a in _block_args(i, t.role == "block2")]
        if t.role == "pool":
            k = len(t.pool["kernel"])
            pool = _pool_args(i, k)
            sizes += [(a, False) for a in pool[:k]] + [(a, True) for a in pool[k:]]
    pointers = [f"p{i}" for i in range(len(stage.tensors))]
    tensors = [f"const float* __restrict__ {p}" for p in pointers]
    floats = [f"float s{i}" for i in range(len(scalars))]
    launch = [*tensors, *(f"long {a}" for a, _ in sizes), *floats]
    kernel = [*tensors, *(f"{'mx_div' if d else 'long'} {a}" for a, d in sizes), *floats]
    args = [*pointers, *(a for a, _ in sizes), *(f"s{i}" for i in range(len(scalars)))]
    return ", ".join(launch), ", ".join(kernel), ", ".join(args)


def _pool_args(i: int, k: int, si: int | None = None) -> list[str]:
    """Names of a pooled tensor's input and output sizes along its ``k`` pooled dims (in the
    kernel, or, with the stage index ``si``, in the host binding)."""
    at = f"{si}_{i}" if si is not None else f"{i}"
    return [f"pin{at}_{d}" for d in range(k)] + [f"pout{at}_{d}" for d in range(k)]


def _window(ns: str, i: int, pool: dict) -> str:
    """The device function reading tensor ``i``'s pooling window (``window.cuh.j2``)."""
    k = len(pool["kernel"])
    index = f"(o0 * {pool['stride'][0]} + w0)"
    for d in range(1, k):
        index = f"({index}) * in{d} + (o{d} * {pool['stride'][d]} + w{d})"
    return (
        environment()
        .get_template("window.cuh.j2")
        .render(ns=ns, i=i, index=index, count=math.prod(pool["kernel"]), **pool)
    )


def _block_args(i: int, two: bool, bare: bool = False) -> list[str]:
    """Names of a broadcast tensor's index sizes (``bare``: without the tensor's number)."""
    names = ["inner", "mid"] + (["innerb", "midb"] if two else [])
    return names if bare else [f"{n}{i}" for n in names]


def kept_channels_last(stages: list[Stage], params: list[dict]) -> set[str]:
    """Convolution results left channels-last under ``params`` (as ``__stage:i``): each is
    read by elementwise kernels that transpose it in fixed tiles, whose tunables then do
    not apply."""
    return {
        f"__stage:{si}"
        for si, (stage, p) in enumerate(zip(stages, params, strict=True))
        if p.get("channels_last") and stage.extra.get("keep_channels_last")
    }


def render(plan: Plan, params: list[dict], policy: str) -> Rendered:
    """The candidate for ``plan`` with one parameter dict per stage."""
    env = environment()
    scalars = plan.scalars
    cuda_parts = ["#include <cuda_runtime.h>", "#include <cstdint>", "#include <cmath>", ""]
    host_stages = []
    host_tensors: list[str] = []  # Python expressions passed to the binding, in order
    kernel_tensors: list[str] = []  # those a kernel of ours reads (float32 checked)
    kept = kept_channels_last(plan.stages, params)
    for si, (stage, p) in enumerate(zip(plan.stages, params, strict=True)):
        ns = f"{_SHORT[stage.family]}{si}"
        kparams, dparams, kargs = _stage_params(stage, scalars)
        ctx = {
            "ns": ns,
            "NS": ns.upper(),
            "p": p,
            "tensors": stage.tensors,
            "body": stage.body,
            "out_var": stage.out_var,
            "scalars": [f"s{i}" for i in range(len(scalars))],
        }
        tvars = []
        for t in stage.tensors:
            if t.py == "__gemm_out":
                tvars.append(f"o{si - 1}")
                continue
            if t.py.startswith("__stage:"):  # an earlier stage's output
                tvars.append(f"o{t.py.split(':')[1]}")
                continue
            if t.py not in host_tensors:
                host_tensors.append(t.py)
            tvars.append(f"t{host_tensors.index(t.py)}")
            if stage.family != "library" and t.py not in kernel_tensors:
                kernel_tensors.append(t.py)
        host = {
            "family": stage.family,
            "ns": ns,
            "out": f"o{si}",
            "split": False,
            "tensors": [
                {"role": t.role, "block": t.block, "py": t.py, "var": v, "pool": t.pool}
                for t, v in zip(stage.tensors, tvars, strict=True)
            ],
        }
        call_ptrs = [f"{v}.data_ptr<float>()" for v in tvars]
        sargs = [f"(float)s{i}" for i in range(len(scalars))]
        if stage.family == "library":
            expr = stage.extra["cpp"]
            layout = "ChannelsLast3d" if stage.extra.get("conv_rank") == 5 else "ChannelsLast"
            for i, v in enumerate(tvars):
                if p.get("channels_last") and i < 2:  # the convolution's input and weight
                    v = f"{v}.contiguous(at::MemoryFormat::{layout})"
                expr = expr.replace(f"@{i}@", v)
            # a kept result is read by our kernels, so made contiguous, in its own layout (a
            # no-op: ATen returns channels-last for channels-last operands)
            keep = f"__stage:{si}" in kept
            host.update(
                expr=expr,
                contiguous=stage.extra["contiguous"],
                memory_format=f"at::MemoryFormat::{layout}" if keep else "",
                origin=stage.extra["origin"],
            )
        elif stage.family in ("stats", "scan"):
            ctx["op"] = stage.extra.get("op", "sum")
            if stage.family == "stats":  # the Welford helpers
                cuda_parts.append(env.get_template("common.cuh.j2").render(ctx))
            cuda_parts.append(
                env.get_template(
                    f"{'channel_stats' if stage.family == 'stats' else 'scan'}.cu.j2"
                ).render(ctx)
            )
            host.update(
                ref=tvars[0],
                dim=stage.extra["dim"],
                eps=stage.extra.get("eps"),
                decl="const float* x, float* out, float* work, long N, long C, long S, float eps"
                if stage.family == "stats"
                else "const float* x, float* out, long outer, long R, long inner",
            )
        elif stage.family == "elementwise":
            full = [i for i, t in enumerate(stage.tensors) if t.role == "full"]
            other = [i for i, t in enumerate(stage.tensors) if t.role != "full"]
            blocks = [i for i, t in enumerate(stage.tensors) if t.role in ("block", "block2")]
            twos = [i for i, t in enumerate(stage.tensors) if t.role == "block2"]
            cl = next((i for i, t in enumerate(stage.tensors) if t.py in kept), None)
            passed = [f"p{i}" for i in other]
            passed += [x for i in blocks for x in _block_args(i, i in twos)]
            passed += ctx["scalars"]
            ctx.update(
                full=full,
                other=other,
                blocks=blocks,
                twos=twos,
                cl=cl,
                # read at the channel the transposing kernel knows (one value per channel)
                per_channel=[
                    i for i in blocks if cl is not None and stage.tensors[i].block == (1, 1)
                ],
                params=kparams,
                kernel_params=dparams,
                args=kargs,
                **{"pass": "".join(f", {a}" for a in passed)},
            )
            cuda_parts.append(env.get_template("elementwise.cu.j2").render(ctx))
            bargs = [f"{x}{si}_{i}" for i in blocks for x in _block_args(i, i in twos, bare=True)]
            host.update(
                ref=tvars[full[0]],
                channels_last=cl is not None,
                decl=f"{kparams}, float* out, long n"
                + (", long C, long S" if cl is not None else ""),
                call=", ".join(call_ptrs + bargs + sargs),
            )
        elif stage.family == "reduction":
            ex = stage.extra
            split = space.variant(stage) == "reduction-split"
            ctx.update(
                params=kparams,
                kernel_params=dparams,
                args=kargs,
                kind=ex["kind"],
                op=ex["op"],
                layout=ex["layout"],
                reduced_out=ex["reduced_out"],
                pre=ex["pre"],
                v=ex["v"],
                eps=ex["eps"],
            )
            cuda_parts.append(env.get_template("common.cuh.j2").render(ctx))
            cuda_parts += [
                _window(ns, i, t.pool) for i, t in enumerate(stage.tensors) if t.role == "pool"
            ]
            template = "reduction_split.cu.j2" if split else "reduction.cu.j2"
            cuda_parts.append(env.get_template(template).render(ctx))
            full = [v for t, v in zip(stage.tensors, tvars, strict=True) if t.role == "full"]
            pooled = next((t for t in stage.tensors if t.role == "pool"), None)
            bargs = []
            for i, t in enumerate(stage.tensors):  # in _stage_params' order
                if t.role == "block":
                    bargs += [f"{x}{si}_{i}" for x in _block_args(i, False, bare=True)]
                elif t.role == "pool":
                    bargs += _pool_args(i, len(t.pool["kernel"]), si)
            host.update(
                groups=ex.get("groups", 1),
                # the sizes come from a full operand, else from a pooling's input
                ref=full[0] if full else tvars[stage.tensors.index(pooled)],
                pooled=None if full else {**pooled.pool, "py": pooled.py},
                dim=ex["dim"],
                dim_end=ex["dim_end"],
                reduced_out=ex["reduced_out"],
                keepdim=ex["keepdim"],
                split=split,
                decl=f"{kparams}, float* out, {'float* work, ' if split else ''}long outer, int R, long inner",
                call=", ".join(call_ptrs + bargs + sargs),
            )
        else:
            ex = stage.extra
            lead = "".join(f", {x}" for x in kparams.split(", ") if x)
            ctx.update(
                params_lead=lead,
                args_lead="".join(f", {a}" for a in kargs.split(", ") if a),
                trans_a=ex["trans_a"],
                trans_b=ex["trans_b"],
            )
            if p.get("tf32x3"):
                if "#include <mma.h>" not in cuda_parts:
                    cuda_parts.insert(3, "#include <mma.h>")
                cuda_parts.append(env.get_template("gemm_3xtf32.cu.j2").render(ctx))
            else:
                cuda_parts.append(env.get_template("gemm.cu.j2").render(ctx))
            for operand in (ex["a"], ex["b"]):
                if operand not in host_tensors:
                    host_tensors.append(operand)
            host.update(
                a=f"t{host_tensors.index(ex['a'])}",
                b=f"t{host_tensors.index(ex['b'])}",
                a_py=ex["a"],
                b_py=ex["b"],
                trans_a=ex["trans_a"],
                trans_b=ex["trans_b"],
                fold=ex["fold"],
                decl=f"const float* A, const float* B{lead}, float* C, long batch, int M, int N, int K, long strideA, long strideB",
                call_lead="".join(f", {a}" for a in call_ptrs + sargs),
            )
        host_stages.append(host)
    digest = hashlib.sha256(
        repr((plan.describe(), [s.body for s in plan.stages], params)).encode()
    ).hexdigest()[:10]
    prefix = f"mx{digest}"
    if any("mx_div" in part for part in cuda_parts):
        cuda_parts.insert(cuda_parts.index("") + 1, env.get_template("divider.cuh.j2").render())
    cuda_parts.append(
        f"const char* {prefix}_error(int code) {{ return cudaGetErrorString((cudaError_t)code); }}\n"
    )
    cuda = "\n".join(cuda_parts)
    signature = ", ".join(
        [f"torch::Tensor t{i}" for i in range(len(host_tensors))]
        + [f"double s{i}" for i in range(len(scalars))]
    )
    cpp = env.get_template("host.cpp.j2").render(
        stages=host_stages,
        prefix=prefix,
        fn=FUNCTION,
        signature=signature,
        host_tensors=[(f"t{i}", py, py in kernel_tensors) for i, py in enumerate(host_tensors)],
    )
    call_args = ", ".join(
        [f"{py}.contiguous()" for py in host_tensors] + [f"float({s})" for s in scalars]
    )
    body = textwrap.indent(plan.graph.init_body or "super().__init__()", " " * 8)
    source = env.get_template("model_new.py.j2").render(
        policy=policy,
        family=plan.describe(),
        params=", ".join(repr(p) for p in params),
        cuda=cuda.strip(),
        cpp=cpp.strip(),
        ext_name=f"offline_{plan.family}_{digest}",
        fn=FUNCTION,
        init_signature=plan.graph.init_signature,
        init_body=body,
        prelude=plan.graph.prelude,
        inputs=", ".join(plan.inputs),
        call_args=call_args,
    )
    return Rendered(source=source, cuda=cuda, cpp=cpp)
