"""Which template family covers an op graph, and the plan that fills its template.

Three families: a fused elementwise chain (one kernel), a reduction along one dim
with an elementwise prologue and epilogue (sum, mean, max, min, softmax, log-softmax,
LayerNorm; normalizations such as RMSNorm fall out as reduce + full-shape epilogue),
and a GEMM (matmul, bmm, linear) with an elementwise epilogue, optionally followed by
a reduction stage on its result (e.g. softmax of attention scores). Elementwise math
becomes C statements over named values, so every family shares one code generator.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from maxcode.policy.offline_cuda.graph import (
    ELEMENTWISE,
    MATMULS,
    REDUCTIONS,
    ROW_OPS,
    OpGraph,
    OpNode,
    Ref,
    UnsupportedOp,
)


@dataclass
class TensorArg:
    """A tensor the kernel reads: a forward input or a parameter, with how it is indexed."""

    node: str
    py: str  # Python expression in ModelNew.forward, e.g. "x" or "self.linear.weight"
    shape: tuple[int, ...]
    role: str  # "full" | "scalar" | "block" | "block2" (elementwise) | "axis" (reduction) | "col" (gemm)
    block: tuple[int, ...] = (
        0,
        0,
    )  # output dims [first, last] of each run it spans ("block", "block2")
    # "pool" (a reduction's prologue reads a pooling window of this tensor): op ("avg" /
    # "max"), kernel and stride per pooled (trailing) dim
    pool: dict = field(default_factory=dict)


@dataclass
class Scalars:
    """Scalar constants become kernel arguments; ones equal to a model attribute are read
    from that attribute at run time, so ModelNew honours its own init arguments."""

    attrs: dict[str, float]
    py: list[str] = field(default_factory=list)

    def use(self, value: float) -> str:
        expr = next((f"self.{k}" for k, v in self.attrs.items() if v == value), None)
        expr = expr or repr(float(value))
        if expr not in self.py:
            self.py.append(expr)
        return f"s{self.py.index(expr)}"


class CodeGen:
    """Emits one ``const float`` statement per op node, each node once, in dependency order."""

    def __init__(self, graph: OpGraph, scalars: Scalars, leaves: dict[str, str]):
        self.graph = graph
        self.scalars = scalars
        self.vars: dict[str, str] = dict(leaves)
        self.lines: list[str] = []

    def operand(self, value: object) -> str:
        if isinstance(value, Ref):
            return self.var(value.name)
        if isinstance(value, float):
            return self.scalars.use(value)
        raise UnsupportedOp(f"unsupported by the offline policy: operand {value!r}")

    def var(self, name: str) -> str:
        if name in self.vars:
            return self.vars[name]
        node = self.graph.nodes[name]
        if node.kind not in ELEMENTWISE:
            raise UnsupportedOp(
                f"unsupported by the offline policy: {node.origin} at node '{name}' inside a fused "
                "elementwise expression"
            )
        expr = self._expr(node)
        var = f"v_{name}"
        self.lines.append(f"const float {var} = {expr};")
        self.vars[name] = var
        return var

    def _expr(self, node: OpNode) -> str:
        k = node.kind
        x = self.operand(node.args[0])
        if k in ("add", "sub"):
            y = self.operand(node.args[1])
            alpha = node.attrs.get("alpha", 1.0)
            if alpha != 1.0:
                y = f"{self.scalars.use(alpha)} * {y}"
            return f"{x} {'+' if k == 'add' else '-'} {y}"
        if k in ("mul", "div"):
            return f"{x} {'*' if k == 'mul' else '/'} {self.operand(node.args[1])}"
        if k in ("minimum", "maximum"):
            return f"{'fminf' if k == 'minimum' else 'fmaxf'}({x}, {self.operand(node.args[1])})"
        if k == "pow":
            e = node.args[1]
            if e == 2.0:
                return f"{x} * {x}"
            if e == 0.5:
                return f"sqrtf({x})"
            return f"powf({x}, {self.operand(e)})"
        if k == "clamp":
            lo, hi = node.attrs.get("min"), node.attrs.get("max")
            if lo is not None:
                x = f"fmaxf({x}, {self.operand(lo)})"
            if hi is not None:
                x = f"fminf({x}, {self.operand(hi)})"
            return x
        if k == "gelu":
            if node.attrs.get("approximate") == "tanh":
                return f"0.5f * {x} * (1.f + tanhf(0.7978845608028654f * ({x} + 0.044715f * {x} * {x} * {x})))"
            return f"0.5f * {x} * (1.f + erff({x} * 0.7071067811865476f))"
        if k == "elu":
            alpha, scale, in_scale = (
                self.scalars.use(float(node.attrs[key]))
                for key in ("alpha", "scale", "input_scale")
            )
            return (
                f"({x} > 0.f ? {scale} * {x} : {scale} * {alpha} * (expf({in_scale} * {x}) - 1.f))"
            )
        if k == "softplus":
            beta = self.scalars.use(float(node.attrs["beta"]))
            threshold = self.scalars.use(float(node.attrs["threshold"]))
            return f"({beta} * {x} > {threshold} ? {x} : log1pf(expf({beta} * {x})) / {beta})"
        if k == "leaky_relu":
            slope = self.scalars.use(float(node.attrs["negative_slope"]))
            return f"({x} > 0.f ? {x} : {slope} * {x})"
        simple = {
            "neg": f"-{x}",
            "relu": f"fmaxf({x}, 0.f)",
            "sigmoid": f"1.f / (1.f + expf(-{x}))",
            "tanh": f"tanhf({x})",
            "exp": f"expf({x})",
            "log": f"logf({x})",
            "sqrt": f"sqrtf({x})",
            "rsqrt": f"rsqrtf({x})",
            "abs": f"fabsf({x})",
            "silu": f"{x} / (1.f + expf(-{x}))",
            "identity": x,
            "hardswish": f"{x} * fminf(fmaxf({x} + 3.f, 0.f), 6.f) / 6.f",
            "hardsigmoid": f"fminf(fmaxf({x} + 3.f, 0.f), 6.f) / 6.f",
            "mish": f"{x} * tanhf({x} > 20.f ? {x} : log1pf(expf({x})))",
            "log1p": f"log1pf({x})",
            "expm1": f"expm1f({x})",
            "erf": f"erff({x})",
            "reciprocal": f"1.f / {x}",
            "sin": f"sinf({x})",
            "cos": f"cosf({x})",
        }
        return simple[k]


@dataclass
class Stage:
    """One kernel of a candidate: its family, what it reads and the C code the template inlines."""

    family: str
    tensors: list[TensorArg]
    out_shape: tuple[int, ...]
    body: list[str]  # statements computing ``out_var`` (per element / per row result)
    out_var: str
    extra: dict = field(default_factory=dict)  # family-specific fields (see each builder)


@dataclass
class Plan:
    family: str
    stages: list[Stage]
    scalars: list[str]  # Python expressions of kernel scalars s0, s1, ...
    graph: OpGraph
    inputs: list[str]  # ModelNew.forward parameter names
    # Fusion boundaries of the partial lowering: name -> fused (one kernel) or split (two).
    boundaries: dict[str, bool] = field(default_factory=dict)

    def describe(self) -> str:
        split = sorted(b for b, fused in self.boundaries.items() if not fused)
        return f"{self.family} ({' + '.join(s.family for s in self.stages)})" + (
            f" split at {', '.join(split)}" if split else ""
        )


def _check_dtypes(graph: OpGraph) -> None:
    for n in graph.nodes.values():
        if n.dtype not in ("float32", "scalar"):
            raise UnsupportedOp(
                f"unsupported by the offline policy: {n.dtype} tensor at node '{n.name}'; the templates compute in float32"
            )


def py_expr(graph: OpGraph, name: str) -> str:
    node = graph.nodes[name]
    if node.kind == "input":
        return graph.input_names[node.index or 0]
    return f"self.{node.param}"


def plan_for(graph: OpGraph) -> Plan:
    """The family and stages for a captured graph; UnsupportedOp names the op that blocks it."""
    _check_dtypes(graph)
    ops = graph.ops()
    if not ops:
        raise UnsupportedOp(
            "unsupported by the offline policy: forward computes nothing (returns an input)"
        )
    for n in ops:
        if n.kind not in ELEMENTWISE | REDUCTIONS | ROW_OPS | MATMULS | {"transpose"}:
            raise UnsupportedOp(f"unsupported by the offline policy: {n.origin} at node '{n.name}'")
    scalars = Scalars(graph.scalar_attrs)
    matmuls = [n for n in ops if n.kind in MATMULS]
    rows = [n for n in ops if n.kind in REDUCTIONS | ROW_OPS]
    if len(matmuls) > 1:
        raise UnsupportedOp(
            f"unsupported by the offline policy: {len(matmuls)} matmuls ({', '.join(n.name for n in matmuls)}); "
            "the GEMM template takes one"
        )
    if matmuls:
        stages = _gemm_stages(graph, matmuls[0], rows, scalars)
        family = "gemm"
    elif rows:
        if len(rows) > 1:
            raise UnsupportedOp(
                f"unsupported by the offline policy: {rows[1].origin} at node '{rows[1].name}' after "
                f"another reduction ('{rows[0].name}'); the reduction template takes one"
            )
        stages = [reduction_stage(graph, rows[0], graph.output, scalars, {})]
        family = "reduction"
    else:
        stages = [_elementwise_stage(graph, scalars)]
        family = "elementwise"
    return Plan(family, stages, scalars.py, graph, graph.input_names)


def _leaves(graph: OpGraph) -> list[OpNode]:
    return [n for n in graph.nodes.values() if n.kind in ("input", "param")]


def used_nodes(graph: OpGraph, target: str, stop: set[str] | None = None) -> set[str]:
    """Names of the nodes ``target`` depends on (itself included), not looking past ``stop``."""
    seen: set[str] = set()
    todo = [target]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        if stop and name in stop:
            continue
        todo.extend(graph.nodes[name].refs())
    return seen


def broadcast_role(
    shape: tuple[int, ...], out: tuple[int, ...], name: str
) -> tuple[str, tuple[int, ...]]:
    """How a tensor broadcasts to the output: full, one scalar, or one or two runs of dims."""
    if shape == out:
        return "full", (0, 0)
    if math.prod(shape) == 1:
        return "scalar", (0, 0)
    if len(shape) > len(out):
        raise UnsupportedOp(
            f"unsupported by the offline policy: '{name}' has more dims than the output"
        )
    padded = (1,) * (len(out) - len(shape)) + tuple(shape)
    if any(p not in (1, o) for p, o in zip(padded, out, strict=True)):
        raise UnsupportedOp(
            f"unsupported by the offline policy: '{name}' of shape {shape} does not broadcast to {out}"
        )
    real = [i for i, s in enumerate(padded) if s != 1]
    groups: list[list[int]] = []  # runs of consecutive dims the tensor spans
    for i in real:
        if groups and groups[-1][-1] == i - 1:
            groups[-1].append(i)
        else:
            groups.append([i])
    if len(groups) == 1:
        return "block", (groups[0][0], groups[0][-1])
    if len(groups) == 2:  # e.g. (N, 1, H, W) against (N, C, H, W): two runs around a gap
        return "block2", (groups[0][0], groups[0][-1], groups[1][0], groups[1][-1])
    raise UnsupportedOp(
        f"unsupported by the offline policy: '{name}' of shape {shape} broadcasts to {out} in a "
        "pattern the elementwise template does not index (more than two runs of dims)"
    )


def _elementwise_stage(graph: OpGraph, scalars: Scalars) -> Stage:
    out = graph.nodes[graph.output]
    used = used_nodes(graph, graph.output)
    tensors: list[TensorArg] = []
    leaves: dict[str, str] = {}
    for leaf in _leaves(graph):
        if leaf.name not in used:
            continue
        role, block = broadcast_role(leaf.shape, out.shape, leaf.name)
        leaves[leaf.name] = f"x{len(tensors)}"
        tensors.append(TensorArg(leaf.name, py_expr(graph, leaf.name), leaf.shape, role, block))
    if not any(t.role == "full" for t in tensors):
        raise UnsupportedOp(
            f"unsupported by the offline policy: no input has the output's shape {out.shape}; "
            "the elementwise template sizes its output from one full-shape input"
        )
    gen = CodeGen(graph, scalars, leaves)
    out_var = gen.var(graph.output)
    return Stage("elementwise", tensors, out.shape, gen.lines, out_var)


def reduction_stage(
    graph: OpGraph, red: OpNode, output: str, scalars: Scalars, given: dict[str, str]
) -> Stage:
    """A reduction (or softmax / LayerNorm) along one dim of ``red``'s input.

    ``given``: nodes already computed by an earlier stage (read as full-shape tensors).
    ``extra``: kind, dim, outer/reduce/inner layout dims, pre/post statements.
    """
    src = graph.nodes[red.args[0].name] if isinstance(red.args[0], Ref) else None
    if src is None:
        raise UnsupportedOp(
            f"unsupported by the offline policy: reduction of a constant at '{red.name}'"
        )
    full_shape = src.shape
    dim = red.attrs.get("dim", len(full_shape) - 1)
    last = red.attrs.get("dim_end", dim)  # a contiguous range of dims [dim, last] is reduced
    # GroupNorm / InstanceNorm: rows of the (N * groups, C / groups * S) view, read in place.
    groups = int(red.attrs.get("groups", 1))
    if red.kind == "layer_norm" and "dim_end" not in red.attrs:  # nn.LayerNorm(last dim)
        dim = last = len(full_shape) - 1
    out_node = graph.nodes[output]
    reduced_out = out_node.shape != full_shape
    tensors: list[TensorArg] = []
    leaves: dict[str, str] = {}
    pools = {n for n, node in graph.nodes.items() if node.kind == "pool" and n not in given}
    pre_nodes = used_nodes(graph, src.name, stop=set(given) | pools)
    post_nodes = used_nodes(graph, output, stop={red.name, *given})

    def add_tensor(name: str, role: str) -> str:
        for i, t in enumerate(tensors):
            if t.node == name:
                return f"x{i}"
        py = given.get(name) or py_expr(graph, name)
        shape = graph.nodes[name].shape
        tensors.append(TensorArg(name, py, shape, role))
        return f"x{len(tensors) - 1}"

    for name in sorted(pre_nodes | post_nodes, key=list(graph.nodes).index):
        node = graph.nodes[name]
        if name in pools and name in pre_nodes:  # read window by window from its input
            (operand,) = node.refs()
            if operand not in given and graph.nodes[operand].kind not in ("input", "param"):
                raise UnsupportedOp(
                    f"unsupported by the offline policy: {node.origin} of an unmaterialized value"
                )
            py = given.get(operand) or py_expr(graph, operand)
            window = {k: node.attrs[k] for k in ("op", "kernel", "stride")}
            tensors.append(TensorArg(operand, py, graph.nodes[operand].shape, "pool", pool=window))
            leaves[name] = f"x{len(tensors) - 1}"
            continue
        if name == red.name or not (node.kind in ("input", "param") or name in given):
            continue
        if node.shape == full_shape:
            leaves[name] = add_tensor(name, "full")
        elif _broadcast_block(node.shape, full_shape):
            # e.g. a per-channel scale or BatchNorm's statistics, indexed from the flat offset
            leaves[name] = add_tensor(name, "block")
            tensors[-1].block = broadcast_role(node.shape, full_shape, name)[1]
        elif node.shape == red.shape and red.kind in REDUCTIONS:
            raise UnsupportedOp(
                f"unsupported by the offline policy: '{name}' of the reduced shape is combined with the "
                "reduction's result; the template reads only full-shape tensors"
            )
        elif math.prod(node.shape) == 1:
            leaves[name] = add_tensor(name, "scalar")
        else:
            raise UnsupportedOp(
                f"unsupported by the offline policy: '{name}' of shape {node.shape} broadcasts into a "
                f"reduction over {full_shape}"
            )
    if red.kind == "layer_norm":
        for operand in red.args[1:]:
            if isinstance(operand, Ref):
                node = graph.nodes[operand.name]
                if node.shape != (math.prod(full_shape[dim : last + 1]),):
                    raise UnsupportedOp(
                        f"unsupported by the offline policy: LayerNorm affine '{operand.name}' of shape {node.shape}"
                    )
                add_tensor(operand.name, "axis")
    if not any(t.role in ("full", "pool") for t in tensors):
        raise UnsupportedOp(
            f"unsupported by the offline policy: the reduction at '{red.name}' reads no full-shape tensor"
        )
    # Element scope: the reduced value v of the source, then (full output) the epilogue.
    pre = CodeGen(graph, scalars, leaves)
    v = pre.var(src.name)
    affine = {
        "weight": _axis_var(tensors, red.args[1] if len(red.args) > 1 else None),
        "bias": _axis_var(tensors, red.args[2] if len(red.args) > 2 else None),
    }
    stat_leaf = {
        "sum": "stat1",
        "mean": "stat1",
        "amax": "stat1",
        "amin": "stat1",
        "logsumexp": "(stat1 + stat2)",
        "softmax": f"(expf({v} - stat1) * stat2)",
        "log_softmax": f"({v} - stat1 - stat2)",
        "layer_norm": f"(({v} - stat1) * stat2{' * ' + affine['weight'] if affine['weight'] else ''}"
        f"{' + ' + affine['bias'] if affine['bias'] else ''})",
    }[red.kind]
    if reduced_out:
        if red.kind not in REDUCTIONS:
            raise UnsupportedOp(
                f"unsupported by the offline policy: {red.origin} result reduced again at '{output}'"
            )
        post = CodeGen(graph, scalars, {red.name: stat_leaf})
    else:
        post = CodeGen(graph, scalars, {**leaves, red.name: stat_leaf})
        post.vars.update(pre.vars)
        post.lines = list(pre.lines)
    out_var = post.var(output)
    if reduced_out:
        bad = [n for n in post_nodes if n != red.name and graph.nodes[n].shape == full_shape]
        if bad:
            raise UnsupportedOp(
                f"unsupported by the offline policy: full-shape '{bad[0]}' combined after the reduction '{red.name}'"
            )
    outer = math.prod(full_shape[:dim]) * groups
    inner = math.prod(full_shape[last + 1 :])
    keep = tuple(1 if dim <= i <= last else s for i, s in enumerate(full_shape))
    if reduced_out and out_node.shape not in (keep, full_shape[:dim] + full_shape[last + 1 :]):
        raise UnsupportedOp(
            f"unsupported by the offline policy: output shape {out_node.shape} of the reduction at '{red.name}'"
        )
    return Stage(
        "reduction",
        tensors,
        out_node.shape,
        post.lines,
        out_var,
        extra={
            "kind": red.kind,
            "op": "max"
            if red.kind in ("amax", "logsumexp")
            else "min"
            if red.kind == "amin"
            else "sum",
            "dim": dim,
            "dim_end": last,
            "full_shape": full_shape,
            "layout": "row" if inner == 1 else "strided",
            "reduced_out": reduced_out,
            "keepdim": reduced_out and len(out_node.shape) == len(full_shape),
            "pre": pre.lines,
            "v": v,
            "eps": scalars.use(float(red.attrs["eps"])) if red.kind == "layer_norm" else None,
            "sizes": (outer, math.prod(full_shape[dim : last + 1]) // groups, inner),
            "groups": groups,
        },
    )


def _broadcast_block(shape: tuple[int, ...], full: tuple[int, ...]) -> bool:
    """A tensor that broadcasts to ``full`` over one run of dims (read at ``(off / inner) % mid``)."""
    if shape == full or math.prod(shape) <= 1:
        return False
    try:
        return broadcast_role(shape, full, "")[0] == "block"
    except UnsupportedOp:
        return False


def _axis_var(tensors: list[TensorArg], operand: object) -> str | None:
    if not isinstance(operand, Ref):
        return None
    return next(f"x{i}" for i, t in enumerate(tensors) if t.node == operand.name)


def _gemm_stages(graph: OpGraph, mm: OpNode, rows: list[OpNode], scalars: Scalars) -> list[Stage]:
    """GEMM with its elementwise epilogue; then, if the graph goes on into a reduction, a
    reduction stage that reads the GEMM stage's result."""
    a_ref, b_ref = mm.args[0], mm.args[1]
    if not isinstance(a_ref, Ref) or not isinstance(b_ref, Ref):
        raise UnsupportedOp(
            f"unsupported by the offline policy: matmul of a constant at '{mm.name}'"
        )
    operands = []
    for ref in (a_ref, b_ref):
        node = graph.nodes[ref.name]
        trans = False
        if node.kind == "transpose":
            trans = True
            node = graph.nodes[node.args[0].name]
        if node.kind not in ("input", "param"):
            raise UnsupportedOp(
                f"unsupported by the offline policy: {node.origin} at node '{node.name}' before a "
                "matmul; the GEMM template reads inputs or parameters directly"
            )
        operands.append((node, trans))
    (a, trans_a), (b, trans_b) = operands
    if mm.kind == "linear":
        trans_b = not trans_b  # weight is (out, in)
    if len(a.shape) < 2 or len(b.shape) < 2:
        raise UnsupportedOp(
            f"unsupported by the offline policy: matmul of a 1-D operand at '{mm.name}'"
        )
    if len(b.shape) > 2 and a.shape[:-2] != b.shape[:-2]:
        raise UnsupportedOp(
            f"unsupported by the offline policy: broadcast batch dims {a.shape} @ {b.shape} at '{mm.name}'"
        )
    if len(b.shape) == 2 and trans_a and len(a.shape) > 2:
        raise UnsupportedOp(
            f"unsupported by the offline policy: transposed batched A with shared B at '{mm.name}'"
        )
    # The epilogue: elementwise nodes after the matmul, up to the output or the reduction.
    row = rows[0] if rows else None
    if len(rows) > 1:
        raise UnsupportedOp(
            f"unsupported by the offline policy: {rows[1].origin} at node '{rows[1].name}' after another reduction"
        )
    end = graph.output
    if row is not None:
        end = row.args[0].name
        if mm.name not in used_nodes(graph, end):
            raise UnsupportedOp(
                f"unsupported by the offline policy: {row.origin} at '{row.name}' does not follow the matmul"
            )
    used = used_nodes(graph, end, stop={mm.name})
    tensors: list[TensorArg] = []
    leaves = {mm.name: "acc"}
    out_shape = mm.shape
    bias = mm.args[2] if mm.kind == "linear" and len(mm.args) > 2 else None
    if isinstance(bias, Ref):  # nn.Linear's bias: a per-column add folded into the epilogue
        tensors.append(
            TensorArg(bias.name, py_expr(graph, bias.name), graph.nodes[bias.name].shape, "col")
        )
        leaves[mm.name] = "(acc + x0)"
    for name in sorted(used, key=list(graph.nodes).index):
        node = graph.nodes[name]
        if name == mm.name or node.kind not in ("input", "param"):
            continue
        if node.shape == out_shape:
            role = "full"
        elif node.shape in ((out_shape[-1],), (1, out_shape[-1])):
            role = "col"
        elif math.prod(node.shape) == 1:
            role = "scalar"
        else:
            raise UnsupportedOp(
                f"unsupported by the offline policy: '{name}' of shape {node.shape} in the epilogue of "
                f"a matmul of shape {out_shape} (the GEMM template adds full, per-column or scalar tensors)"
            )
        leaves[name] = f"x{len(tensors)}"
        tensors.append(TensorArg(name, py_expr(graph, name), node.shape, role))
    if graph.nodes[end].shape != out_shape:
        raise UnsupportedOp(
            f"unsupported by the offline policy: the matmul epilogue changes the shape at '{end}'"
        )
    gen = CodeGen(graph, scalars, leaves)
    out_var = gen.var(end)
    gemm = Stage(
        "gemm",
        tensors,
        out_shape,
        gen.lines,
        out_var,
        extra={
            "a": py_expr(graph, a.name),
            "b": py_expr(graph, b.name),
            "a_shape": a.shape,
            "b_shape": b.shape,
            "trans_a": trans_a,
            "trans_b": trans_b,
            "fold": len(b.shape) == 2,  # B shared: fold A's leading dims into M
        },
    )
    if row is None:
        return [gemm]
    given = {end: "__gemm_out"}
    return [gemm, reduction_stage(graph, row, graph.output, scalars, given)]
