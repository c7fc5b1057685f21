"""Partial lowering: library calls for what no template covers, fused kernels around them.

Good KernelBench solutions keep the heavy op in the vendor library (cuDNN convolutions,
cuBLAS GEMMs) and fuse what comes before and after it into custom kernels. This module
does that from the ATen graph ``torch.export`` gives (training mode, as KernelBench runs
the reference): every op is one of

- elementwise: fused with its neighbours into one kernel per materialized value;
- a reduction or normalization with a template (sum, mean, max, min, logsumexp, softmax,
  log-softmax over one dim or a contiguous range of dims, LayerNorm, GroupNorm and
  InstanceNorm as row normalizations, BatchNorm in training mode through a per-channel
  statistics kernel, norm, cumsum), its elementwise prologue fused;
- a library call: the ATen function of the same schema, called from the host C++
  binding (``at::conv2d(...)``), arguments written from the schema.

The candidate must launch at least one kernel of its own; a graph of library calls only
is unsupported, with the op that has no template named.
"""

from __future__ import annotations

import inspect
import math
import operator
from types import SimpleNamespace
from typing import Any

import torch
from torch import fx

from maxcode.policy.offline_cuda.families import (
    CodeGen,
    Plan,
    Scalars,
    Stage,
    TensorArg,
    broadcast_role,
    py_expr,
    reduction_stage,
)
from maxcode.policy.offline_cuda.graph import (
    ALIASES,
    ELEMENTWISE,
    REDUCTIONS,
    ROW_OPS,
    CaptureError,
    OpGraph,
    OpNode,
    Ref,
    UnsupportedOp,
    init_source,
    load_problem,
    normalize_call,
)

LIBRARY = "library"
POOL = "pool"  # a pooling library call a reduction may read window by window instead
STATS = "channel_stats"
SCAN = "cumsum"
_VIEWS = frozenset(
    ["view", "reshape", "_unsafe_view", "unsqueeze", "squeeze", "flatten", "expand", "permute"]
)
_BUFFER_MUTATIONS = frozenset(["add_", "copy_", "mul_", "sub_"])


def export_graph(source: str, where: str = "task") -> OpGraph:
    """The task's forward as an ATen graph with library nodes for ops no template covers."""
    problem = load_problem(source, where)
    signature, body, prelude = init_source(source, where)
    with torch.device("meta"):
        model = problem.Model(*problem.get_init_inputs())
        inputs = list(problem.get_inputs())
    model.train()
    try:
        exported = torch.export.export(model, tuple(inputs))
    except Exception as err:
        raise CaptureError(f"{where}: torch.export failed ({type(err).__name__}: {err})") from err
    builder = _Builder(exported)
    builder.walk()
    scalars = {
        k: float(v)
        for k, v in vars(model).items()
        if not k.startswith("_") and isinstance(v, int | float) and not isinstance(v, bool)
    }
    names = _forward_names(problem.Model, len(builder.order))
    return OpGraph(
        nodes=builder.nodes,
        inputs=builder.order,
        input_names=names,
        output=builder.output,
        scalar_attrs=scalars,
        init_signature=signature,
        init_body=body,
        capture="export",
        prelude=prelude,
    )


def _forward_names(model_cls: type, count: int) -> list[str]:
    params = [p for p in inspect.signature(model_cls.forward).parameters if p != "self"]
    return params[:count] if len(params) >= count else [f"x{i}" for i in range(count)]


def _shape(node: fx.Node) -> tuple[tuple[int, ...], str]:
    val = node.meta.get("val")
    if isinstance(val, torch.Tensor):
        return tuple(int(s) for s in val.shape), str(val.dtype).replace("torch.", "")
    return (), "tuple" if isinstance(val, tuple | list) else "scalar"


class _Builder:
    """Walks the exported graph once, rewriting normalizations into template-friendly nodes."""

    def __init__(self, exported: Any):
        sig = exported.graph_signature
        self.exported = exported
        self.params = {**sig.inputs_to_parameters, **sig.inputs_to_buffers}
        self.constants = set(getattr(sig, "inputs_to_lifted_tensor_constants", {}))
        self.nodes: dict[str, OpNode] = {}
        self.order: list[str] = []
        self.output = ""
        self.alias: dict[str, str] = {}  # fx node name -> our node name (getitem of max.dim, ...)
        # convolution output -> (bias-free call, bias view, whole call's C++, its operands, origin)
        self.peeled: dict[str, tuple[str, str, str, list[str], str]] = {}
        self.count = 0

    # -- helpers -------------------------------------------------------------------------
    def ref(self, value: Any) -> Ref:
        return Ref(self.alias.get(value.name, value.name))

    def add(self, node: OpNode) -> str:
        self.nodes[node.name] = node
        return node.name

    def fresh(self, base: str) -> str:
        self.count += 1
        return f"{base}__{self.count}"

    def lib(self, name: str, cpp: str, refs: list[str], shape: tuple, origin: str, dtype="float32"):
        """A library node: ``cpp`` with @i@ standing for the i-th operand's C++ tensor."""
        return self.add(
            OpNode(name, LIBRARY, tuple(Ref(r) for r in refs), {"cpp": cpp}, shape, dtype, origin)
        )

    def ew(self, name: str, kind: str, args: tuple, shape: tuple, origin: str, **attrs) -> str:
        return self.add(OpNode(name, kind, args, dict(attrs), shape, "float32", origin))

    def channel_view(self, ref: str, rank: int, what: str) -> str:
        """A (C,) parameter or statistic viewed as (C, 1, ...) to broadcast over dim 1."""
        shape = (self.nodes[ref].shape[0],) + (1,) * (rank - 2) if rank > 1 else ()
        ones = ", 1" * (rank - 2)
        return self.lib(self.fresh(what), f"@0@.view({{-1{ones}}})", [ref], shape, "view")

    # -- the walk ------------------------------------------------------------------------
    def walk(self) -> None:
        for node in self.exported.graph.nodes:
            shape, dtype = _shape(node)
            if node.op == "placeholder":
                if node.name in self.constants:
                    raise UnsupportedOp(
                        "unsupported by the offline policy: forward creates a tensor constant "
                        f"('{node.name}', e.g. torch.tensor(c)) the candidate cannot reproduce"
                    )
                if node.name in self.params:
                    self.add(
                        OpNode(
                            node.name,
                            "param",
                            shape=shape,
                            dtype=dtype,
                            param=self.params[node.name],
                            origin="parameter",
                        )
                    )
                else:
                    self.add(
                        OpNode(
                            node.name,
                            "input",
                            shape=shape,
                            dtype=dtype,
                            index=len(self.order),
                            origin="input",
                        )
                    )
                    self.order.append(node.name)
            elif node.op == "output":
                outs = node.args[0]
                if len(outs) != 1 or not isinstance(outs[0], fx.Node):
                    raise UnsupportedOp(
                        f"unsupported by the offline policy: forward returns {len(outs)} values; "
                        "the candidate writes one output tensor"
                    )
                self.output = self.ref(outs[0]).name
            elif node.op == "call_function":
                self.call(node, shape, dtype)
            else:
                raise UnsupportedOp(
                    f"unsupported by the offline policy: exported node {node.op} '{node.name}'"
                )
        self._keep_unfused_biases()

    def call(self, node: fx.Node, shape: tuple, dtype: str) -> None:
        target = node.target
        if target is operator.getitem:
            src, index = node.args
            if src.name in self.alias and index == 0:
                self.alias[node.name] = self.alias[src.name]
                return
            producer = self.nodes[self.ref(src).name]
            pick = f"@0@[{index}]" if producer.attrs.get("list") else f"std::get<{index}>(@0@)"
            self.lib(node.name, pick, [producer.name], shape, f"getitem {index}", dtype)
            return
        packet = getattr(target, "_overloadpacket", None)
        name = packet.__name__ if packet is not None else getattr(target, "__name__", str(target))
        origin = f"aten.{name}"
        args, kwargs = node.args, node.kwargs
        if name in _BUFFER_MUTATIONS and not node.users:
            first = args[0]
            if isinstance(first, fx.Node) and first.name in self.params:
                return  # num_batches_tracked += 1: module state, not the output
        if name.endswith("_") and not name.startswith("_"):
            raise UnsupportedOp(
                f"unsupported by the offline policy: in-place {origin} at node '{node.name}'"
            )
        if name in ("dropout", "native_dropout"):
            normalize_call("identity", args, kwargs, node.name, origin)  # raises unless p == 0
        handler = getattr(self, f"op_{name}", None)
        if handler is not None and handler(node, shape, dtype) is not False:
            return
        kind = ALIASES.get(name)
        swap = kind == "rsub"  # rsub(x, c, alpha) = c - alpha * x: a sub with operands swapped
        if swap:
            kind = "sub"
        if kind in ELEMENTWISE and self._float_operands(node) and dtype == "float32":
            try:
                nargs, attrs = normalize_call(kind, args, kwargs, node.name, origin)
            except UnsupportedOp:
                pass
            else:
                if swap:
                    nargs = (nargs[1], nargs[0])
                nargs = tuple(
                    Ref(self.alias.get(a.name, a.name)) if isinstance(a, Ref) else a for a in nargs
                )
                attrs = {
                    k: (Ref(self.alias.get(v.name, v.name)) if isinstance(v, Ref) else v)
                    for k, v in attrs.items()
                }
                node_ = OpNode(node.name, kind, nargs, attrs, shape, dtype, origin)
                if kind == "identity" and not isinstance(nargs[0], Ref):
                    raise UnsupportedOp(
                        f"unsupported by the offline policy: {origin} of a constant"
                    )
                self.add(node_)
                return
        if name in ("softmax", "_softmax", "log_softmax", "_log_softmax") and dtype == "float32":
            kind = "softmax" if "log" not in name else "log_softmax"
            self.reduce(
                node.name, kind, self.ref(args[0]).name, [int(args[1])], False, shape, origin
            )
            return
        self.library(node, shape, dtype, origin)

    def _float_operands(self, node: fx.Node) -> bool:
        refs = [a for a in (*node.args, *node.kwargs.values()) if isinstance(a, fx.Node)]
        return all(self.nodes[self.ref(r).name].dtype == "float32" for r in refs)

    def library(self, node: fx.Node, shape: tuple, dtype: str, origin: str) -> None:
        refs: list[str] = []
        cpp = _cpp_call(node, self, refs)
        if node.target._overloadpacket.__name__ in _VIEWS:
            cpp = _batch_free_view(cpp, node)
        self.lib(node.name, cpp, refs, shape, origin, dtype)
        if dtype == "tuple":  # std::tuple, or std::vector for ops returning Tensor[]
            self.nodes[node.name].attrs["tuple"] = True
            returns = node.target._schema.returns
            self.nodes[node.name].attrs["list"] = (
                len(returns) == 1 and "[]" in str(returns[0].type)
            ) or "List" in str(returns[0].type)

    def reduce(
        self,
        name: str,
        kind: str,
        src: str,
        dims: list[int],
        keepdim: bool,
        shape: tuple,
        origin: str,
        **attrs: Any,
    ) -> None:
        """``kind`` over ``dims`` of ``src``, one dim or a contiguous range (all dims included);
        other sets of dims are unsupported."""
        full = self.nodes[src].shape
        rank = len(full)
        if self.nodes[src].dtype != "float32":
            raise UnsupportedOp(
                f"unsupported by the offline policy: {origin} of a non-float tensor"
            )
        dims = sorted({d % rank for d in dims}) if rank else []
        if not dims:
            dims = list(range(rank))
        if dims != list(range(dims[0], dims[-1] + 1)):
            raise UnsupportedOp(
                f"unsupported by the offline policy: {origin} over non-adjacent dims {dims} at '{name}'"
            )
        if rank == 0:
            raise UnsupportedOp(f"unsupported by the offline policy: {origin} of a 0-dim tensor")
        # One kernel over the (outer, R, inner) view of the contiguous range: no copy, and the
        # elementwise chain before it stays fused as the prologue.
        attrs = {"dim": dims[0], "dim_end": dims[-1], "keepdim": keepdim, **attrs}
        self.add(OpNode(name, kind, (Ref(src),), attrs, shape, "float32", origin))

    # -- ops with a rewrite (return False to fall back to a library call) ---------------------
    def _dims(self, value: Any) -> list[int]:
        if value is None:
            return []
        return [int(d) for d in value] if isinstance(value, list | tuple) else [int(value)]

    def _reduction(
        self, node: fx.Node, shape: tuple, kind: str, dim_at: int = 1, keep_at: int = 2
    ) -> bool:
        args = node.args
        dims = self._dims(args[dim_at] if len(args) > dim_at else node.kwargs.get("dim"))
        keep = (
            bool(args[keep_at]) if len(args) > keep_at else bool(node.kwargs.get("keepdim", False))
        )
        if node.kwargs.get("dtype") is not None:
            return False
        self.reduce(
            node.name,
            kind,
            self.ref(args[0]).name,
            dims,
            keep,
            shape,
            f"aten.{node.target._overloadpacket.__name__}",
        )
        return True

    def op_sum(self, node, shape, dtype):
        return self._reduction(node, shape, "sum")

    def op_mean(self, node, shape, dtype):
        return self._reduction(node, shape, "mean")

    def op_amax(self, node, shape, dtype):
        return self._reduction(node, shape, "amax")

    def op_amin(self, node, shape, dtype):
        return self._reduction(node, shape, "amin")

    def op_logsumexp(self, node, shape, dtype):
        return self._reduction(node, shape, "logsumexp")

    def _max_min(self, node, shape, kind: str) -> bool:
        if len(node.args) == 1:  # max of all elements
            self.reduce(
                node.name,
                kind,
                self.ref(node.args[0]).name,
                [],
                False,
                shape,
                f"aten.{node.target._overloadpacket.__name__}",
            )
            return True
        used = [u for u in node.users if u.users or u.target is not operator.getitem]
        if (
            not isinstance(node.args[1], int)
            or any(u.target is not operator.getitem or u.args[1] != 0 for u in used)
            or not used
        ):
            return False  # indices are used (argmax-like) or an elementwise min/max: library
        first = used[0]
        shape0, _ = _shape(first)
        keep = bool(node.args[2]) if len(node.args) > 2 else False
        self.reduce(
            node.name,
            kind,
            self.ref(node.args[0]).name,
            [node.args[1]],
            keep,
            shape0,
            f"aten.{node.target._overloadpacket.__name__}.dim",
        )
        self.alias[node.name] = node.name
        return True

    def op_max(self, node, shape, dtype):
        return self._max_min(node, shape, "amax")

    def op_min(self, node, shape, dtype):
        return self._max_min(node, shape, "amin")

    def op_linalg_vector_norm(self, node, shape, dtype):
        args = list(node.args) + [None] * 5
        ord_ = node.kwargs.get("ord", args[1] if args[1] is not None else 2)
        dims = self._dims(node.kwargs.get("dim", args[2]))
        keep = bool(node.kwargs.get("keepdim", args[3] or False))
        if ord_ not in (1, 2) or node.kwargs.get("dtype") is not None:
            return False
        src = self.ref(node.args[0]).name
        full = self.nodes[src].shape
        term = self.ew(
            self.fresh(f"{node.name}_term"),
            "abs" if ord_ == 1 else "mul",
            (Ref(src),) if ord_ == 1 else (Ref(src), Ref(src)),
            full,
            "norm term",
        )
        if ord_ == 1:
            self.reduce(node.name, "sum", term, dims, keep, shape, "aten.linalg_vector_norm")
            return True
        total = self.fresh(f"{node.name}_sumsq")
        self.reduce(total, "sum", term, dims, keep, shape, "aten.linalg_vector_norm")
        self.ew(node.name, "sqrt", (Ref(total),), shape, "aten.linalg_vector_norm")
        return True

    def op_cumsum(self, node, shape, dtype, op: str = "sum"):
        if node.kwargs.get("dtype") is not None or dtype != "float32" or not shape:
            return False
        src = self.ref(node.args[0]).name
        dim = int(node.args[1]) % len(shape)
        self.add(
            OpNode(
                node.name, SCAN, (Ref(src),), {"dim": dim, "op": op}, shape, dtype, f"aten.cum{op}"
            )
        )
        return True

    def op_cumprod(self, node, shape, dtype):
        return self.op_cumsum(node, shape, dtype, "prod")

    def op_smooth_l1_loss(self, node, shape, dtype):
        """Huber / smooth L1 as elementwise terms and a mean or sum:
        0.5 m^2 / beta + (|d| - m) with m = min(|d|, beta)."""
        args = list(node.args) + [None] * 4
        reduction = args[2] if args[2] is not None else 1
        beta = float(args[3] if args[3] is not None else 1.0)
        x, y = self.ref(args[0]).name, self.ref(args[1]).name
        full = self.nodes[x].shape
        if self.nodes[y].shape != full or reduction not in (1, 2) or beta <= 0:
            return False
        o = "aten.smooth_l1_loss"
        d = self.ew(self.fresh(f"{node.name}_d"), "sub", (Ref(x), Ref(y)), full, o, alpha=1.0)
        ad = self.ew(self.fresh(f"{node.name}_abs"), "abs", (Ref(d),), full, o)
        m = self.ew(self.fresh(f"{node.name}_m"), "clamp", (Ref(ad),), full, o, min=None, max=beta)
        sq = self.ew(self.fresh(f"{node.name}_sq"), "mul", (Ref(m), Ref(m)), full, o)
        quad = self.ew(self.fresh(f"{node.name}_quad"), "mul", (Ref(sq), 0.5 / beta), full, o)
        lin = self.ew(self.fresh(f"{node.name}_lin"), "sub", (Ref(ad), Ref(m)), full, o, alpha=1.0)
        term = self.ew(
            self.fresh(f"{node.name}_term"), "add", (Ref(quad), Ref(lin)), full, o, alpha=1.0
        )
        self.reduce(node.name, "mean" if reduction == 1 else "sum", term, [], False, shape, o)
        return True

    def _group_norm(self, node, x: str, groups: int | None, weight, bias, eps, origin: str) -> None:
        """Normalize each of ``groups`` channel groups per sample (all channels when None:
        InstanceNorm) in place of the (N * groups, C / groups * S) rows, then the per-channel
        affine as elementwise ops (fused with what follows or into the normalization)."""
        full = self.nodes[x].shape
        normed = self.fresh(f"{node.name}_norm")
        attrs = {"dim": 1, "dim_end": len(full) - 1, "eps": float(eps), "groups": groups or full[1]}
        self.add(OpNode(normed, "layer_norm", (Ref(x), None, None), attrs, full, "float32", origin))
        self._affine(node.name, normed, weight, bias, full, origin)

    def _affine(self, name: str, x: str, weight, bias, full: tuple, origin: str) -> None:
        value = x
        for operand, kind in ((weight, "mul"), (bias, "add")):
            if operand is None:
                continue
            view = self.channel_view(self.ref(operand).name, len(full), f"{name}_{kind}")
            value = self.ew(
                self.fresh(f"{name}_{kind}"), kind, (Ref(value), Ref(view)), full, origin
            )
        self.ew(name, "identity", (Ref(value),), full, origin)

    def op_group_norm(self, node, shape, dtype):
        x, groups = self.ref(node.args[0]).name, int(node.args[1])
        args = list(node.args) + [None] * 4
        eps = args[4] if args[4] is not None else 1e-5
        if len(self.nodes[x].shape) < 2:
            return False
        self._group_norm(node, x, groups, args[2], args[3], eps, "aten.group_norm")
        return True

    def op_instance_norm(self, node, shape, dtype):
        x = self.ref(node.args[0]).name
        (_, weight, bias, _, _, use_input_stats, _, eps, _) = (list(node.args) + [None] * 9)[:9]
        full = self.nodes[x].shape
        if not use_input_stats or len(full) < 3:
            return False
        eps = eps if eps is not None else 1e-5
        self._group_norm(node, x, None, weight, bias, eps, "aten.instance_norm")
        return True

    def op_layer_norm(self, node, shape, dtype):
        """Rows of the normalized trailing dims, read in place (no view), the affine flattened
        to one value per row position; the elementwise chain after it can be its epilogue."""
        x = self.ref(node.args[0]).name
        args = list(node.args) + [None] * 4
        normalized = [int(s) for s in args[1]]
        eps = args[4] if args[4] is not None else 1e-5
        count = math.prod(normalized)
        full = self.nodes[x].shape
        affine = []
        for operand in (args[2], args[3]):
            if operand is None:
                affine.append(None)
                continue
            flat = self.lib(
                self.fresh(f"{node.name}_affine"),
                "@0@.reshape({-1})",
                [self.ref(operand).name],
                (count,),
                "view",
            )
            affine.append(Ref(flat))
        attrs = {"dim": len(full) - len(normalized), "dim_end": len(full) - 1, "eps": float(eps)}
        self.add(
            OpNode(
                node.name,
                "layer_norm",
                (Ref(x), *affine),
                attrs,
                full,
                "float32",
                origin="aten.layer_norm",
            )
        )
        return True

    def op_batch_norm(self, node, shape, dtype):
        x, weight, bias, mean, var, training, _, eps, _ = node.args
        xs = self.ref(x).name
        full = self.nodes[xs].shape
        if len(full) < 2:
            return False
        if training:
            stats = self.fresh(f"{node.name}_stats")
            self.add(
                OpNode(
                    stats,
                    STATS,
                    (Ref(xs),),
                    {"eps": float(eps)},
                    (2, full[1]),
                    "float32",
                    "aten.batch_norm (batch statistics)",
                )
            )
            mean_c = self.lib(
                self.fresh(f"{node.name}_mean"), "@0@.select(0, 0)", [stats], (full[1],), "select"
            )
            rstd_c = self.lib(
                self.fresh(f"{node.name}_rstd"), "@0@.select(0, 1)", [stats], (full[1],), "select"
            )
            mean_v = self.channel_view(mean_c, len(full), f"{node.name}_meanv")
            rstd_v = self.channel_view(rstd_c, len(full), f"{node.name}_rstdv")
        else:
            if mean is None or var is None:
                return False
            mean_v = self.channel_view(self.ref(mean).name, len(full), f"{node.name}_meanv")
            var_v = self.channel_view(self.ref(var).name, len(full), f"{node.name}_varv")
            shifted = self.ew(
                self.fresh(f"{node.name}_vareps"),
                "add",
                (Ref(var_v), float(eps)),
                self.nodes[var_v].shape,
                "aten.batch_norm",
                alpha=1.0,
            )
            rstd_v = self.ew(
                self.fresh(f"{node.name}_rstd"),
                "rsqrt",
                (Ref(shifted),),
                self.nodes[var_v].shape,
                "aten.batch_norm",
            )
        centred = self.ew(
            self.fresh(f"{node.name}_centred"),
            "sub",
            (Ref(xs), Ref(mean_v)),
            full,
            "aten.batch_norm",
            alpha=1.0,
        )
        normed = self.ew(
            self.fresh(f"{node.name}_normed"),
            "mul",
            (Ref(centred), Ref(rstd_v)),
            full,
            "aten.batch_norm",
        )
        self._affine(node.name, normed, weight, bias, full, "aten.batch_norm")
        return True

    def _convolution(self, node, shape, dtype) -> bool:
        """A convolution's bias peeled off the library call into the kernels after it (as
        inductor does): cuDNN does not add a bias, so ATen adds it in one more pass over the
        output, which here fuses into the epilogue or the next reduction's prologue instead."""
        bias = node.args[2] if len(node.args) > 2 else node.kwargs.get("bias")
        if not isinstance(bias, fx.Node) or dtype != "float32" or len(shape) < 3:
            return False
        bias_ref = self.ref(bias).name
        if self.nodes[bias_ref].shape != (shape[1],):
            return False
        args = (*node.args[:2], None, *node.args[3:])
        kwargs = {k: v for k, v in node.kwargs.items() if k != "bias"}
        unbiased = SimpleNamespace(target=node.target, args=args, kwargs=kwargs, name=node.name)
        refs: list[str] = []
        cpp = _cpp_call(unbiased, self, refs)
        name = node.target._overloadpacket.__name__
        conv = self.lib(self.fresh(f"{node.name}_nobias"), cpp, refs, shape, f"aten.{name}")
        view = self.channel_view(bias_ref, len(shape), f"{node.name}_bias")
        self.ew(node.name, "add", (Ref(conv), Ref(view)), shape, f"aten.{name} (bias)", alpha=1.0)
        whole: list[str] = []
        self.peeled[node.name] = (conv, view, _cpp_call(node, self, whole), whole, f"aten.{name}")
        return True

    def _keep_unfused_biases(self) -> None:
        """A peeled bias add that no kernel of ours would read (its users are library calls or
        poolings, or it is the output) goes back into the library call: alone it is the same
        extra pass ATen makes, a pooling a reduction reads window by window needs the
        convolution's output itself, and a convolution alone stays a library call."""
        for add, (conv, view, cpp, refs, origin) in self.peeled.items():
            readers = [
                n
                for n in self.nodes.values()
                if add in n.refs()
                or any(isinstance(v, Ref) and v.name == add for v in n.attrs.values())
            ]
            if any(n.kind not in (LIBRARY, POOL) for n in readers):
                continue
            node = self.nodes[add]
            del self.nodes[conv], self.nodes[view]
            self.nodes[add] = OpNode(
                add,
                LIBRARY,
                tuple(Ref(r) for r in refs),
                {"cpp": cpp},
                node.shape,
                "float32",
                origin,
            )

    op_conv1d = op_conv2d = op_conv3d = _convolution
    op_conv_transpose1d = op_conv_transpose2d = op_conv_transpose3d = _convolution
    op_convolution = _convolution

    def _global_pool(self, node, shape, spatial: int) -> bool:
        """Adaptive average pooling to size 1 is a mean over the spatial dims (keepdim), so
        the elementwise chain before it fuses into the reduction's prologue."""
        sizes = node.args[1] if isinstance(node.args[1], list | tuple) else [node.args[1]]
        if any(s != 1 for s in sizes):
            return False
        src = self.ref(node.args[0]).name
        rank = len(self.nodes[src].shape)
        dims = list(range(rank - spatial, rank))
        self.reduce(node.name, "mean", src, dims, True, shape, "aten.adaptive_avg_pool (global)")
        return True

    def op_adaptive_avg_pool1d(self, node, shape, dtype):
        return self._global_pool(node, shape, 1)

    def op_adaptive_avg_pool2d(self, node, shape, dtype):
        return self._global_pool(node, shape, 2)

    def op_adaptive_avg_pool3d(self, node, shape, dtype):
        return self._global_pool(node, shape, 3)

    def _pool(self, node, shape, dtype, op: str, spatial: int) -> bool:
        """Average or max pooling without padding, dilation or ceil mode: a library call that
        a reduction after it can read window by window instead (``pool:<node>`` boundary)."""
        args = list(node.args) + [None] * 6
        kernel = [int(k) for k in args[1]]
        stride = [int(k) for k in (args[2] or kernel)]
        padding = args[3] if args[3] is not None else 0
        if op == "max":
            dilation, ceil_mode = args[4] if args[4] is not None else 1, args[5]
            extra_ok = all(int(d) == 1 for d in _as_list(dilation, spatial))
        else:
            ceil_mode, divisor = args[4], args[6] if spatial > 1 else None
            extra_ok = divisor is None
        if (
            dtype != "float32"
            or not extra_ok
            or ceil_mode
            or any(int(p) for p in _as_list(padding, spatial))
            or len(kernel) != spatial
            or len(stride) != spatial
        ):
            return False
        self.library(node, shape, dtype, f"aten.{op}_pool{spatial}d")
        lib = self.nodes[node.name]
        lib.kind = POOL
        lib.attrs.update(op=op, kernel=tuple(kernel), stride=tuple(stride))
        return True

    def op_avg_pool1d(self, node, shape, dtype):
        return self._pool(node, shape, dtype, "avg", 1)

    def op_avg_pool2d(self, node, shape, dtype):
        return self._pool(node, shape, dtype, "avg", 2)

    def op_avg_pool3d(self, node, shape, dtype):
        return self._pool(node, shape, dtype, "avg", 3)

    def op_max_pool1d(self, node, shape, dtype):
        return self._pool(node, shape, dtype, "max", 1)

    def op_max_pool2d(self, node, shape, dtype):
        return self._pool(node, shape, dtype, "max", 2)

    def op_max_pool3d(self, node, shape, dtype):
        return self._pool(node, shape, dtype, "max", 3)

    def op_clamp_min(self, node, shape, dtype):
        return self._clamp(node, shape, "min")

    def op_clamp_max(self, node, shape, dtype):
        return self._clamp(node, shape, "max")

    def _clamp(self, node, shape, side: str):
        bound = node.args[1]
        if not isinstance(bound, int | float) or not self._float_operands(node):
            return False
        attrs = {"min": None, "max": None, side: float(bound)}
        self.ew(node.name, "clamp", (self.ref(node.args[0]),), shape, f"aten.clamp_{side}", **attrs)
        return True


def _as_list(value: Any, count: int) -> list:
    return list(value) if isinstance(value, list | tuple) else [value] * count


def _batch_free_view(cpp: str, node: fx.Node) -> str:
    """A view's target sizes were traced with the test batch size: a leading size equal to
    the source's leading size is read from the tensor at run time (``@0@.size(0)``), so the
    candidate also runs at another batch size, as a reference written ``x.view(x.size(0), -1)``."""
    name = node.target._overloadpacket.__name__
    if name not in ("view", "reshape", "_unsafe_view"):
        return cpp
    sizes = [int(s) for s in node.args[1]]
    source, _ = _shape(node.args[0])
    if len(sizes) < 2 or not source or sizes[0] != source[0]:
        return cpp
    old = "{" + ", ".join(str(s) for s in sizes) + "}"
    new = "{@0@.size(0), " + ", ".join(str(s) for s in sizes[1:]) + "}"
    return cpp.replace(old, new, 1)


# -- C++ for a library call, from the op's schema ---------------------------------------------
_DTYPES = {
    torch.float32: "at::kFloat",
    torch.int64: "at::kLong",
    torch.bool: "at::kBool",
    torch.int32: "at::kInt",
}
_MEMORY_FORMATS = {
    torch.contiguous_format: "at::MemoryFormat::Contiguous",
    torch.preserve_format: "at::MemoryFormat::Preserve",
    torch.channels_last: "at::MemoryFormat::ChannelsLast",
    torch.channels_last_3d: "at::MemoryFormat::ChannelsLast3d",
}


# The schema's tensor-options arguments; C++ takes them as one ``at::TensorOptions`` (the
# packed overload every torch version since 1.x has), where the unpacked overload's
# defaults changed between versions (torch 2.11 has no ``zeros_like(x, nullopt, nullopt,
# nullopt, false)``).
_OPTIONS = ("dtype", "layout", "device", "pin_memory")


def _cpp_call(node: fx.Node, builder: _Builder, refs: list[str]) -> str:
    """``at::name(args...)`` in schema order, the tensor options packed into one argument and
    every trailing argument at its default left out, so the call uses only the stable
    overloads (the ones a user writes) and not those whose defaults differ by torch version."""
    schema = node.target._schema
    name = schema.name.split("::")[-1]
    arguments = list(schema.arguments)
    packed = all(any(a.name == o for a in arguments) for o in _OPTIONS)
    takes_tensor = any(str(a.type).startswith("Tensor") for a in arguments)
    values: list[str] = []
    needed: list[bool] = []  # differs from the C++ default, so it must be written
    options: dict[str, Any] = {}
    for i, arg in enumerate(arguments):
        if arg.kwarg_only:
            present = arg.name in node.kwargs
            value = node.kwargs.get(arg.name)
        else:
            present = i < len(node.args) or arg.name in node.kwargs
            value = node.args[i] if i < len(node.args) else node.kwargs.get(arg.name)
        if not present:
            value = arg.default_value if arg.has_default_value() else None
        if packed and arg.name in _OPTIONS:
            options[arg.name] = value
            if arg.name != _OPTIONS[-1]:
                continue
            text = _cpp_options(options, takes_tensor, node)
            values.append(text)
            needed.append(text != "at::TensorOptions()")
            continue
        values.append(_cpp_value(value, arg, builder, refs, node))
        needed.append(
            present
            and (
                isinstance(value, fx.Node)
                or not arg.has_default_value()
                or not _same(value, arg.default_value)
            )
        )
    last = max((i for i, n in enumerate(needed) if n), default=-1)
    if _method_only(name):  # e.g. view, expand, numpy_T: Tensor methods in C++ too
        return f"{values[0]}.{name}({', '.join(values[1 : last + 1])})"
    return f"at::{name}({', '.join(values[: last + 1])})"


def _same(value: Any, default: Any) -> bool:
    """A traced argument equal to the schema's default (lists and tuples alike)."""
    if isinstance(value, list | tuple) and isinstance(default, list | tuple):
        return [*value] == [*default]
    return type(value) is type(default) and value == default


def _cpp_options(options: dict[str, Any], takes_tensor: bool, node: fx.Node) -> str:
    """The packed ``at::TensorOptions``: only what differs from the default (an op with a
    tensor operand, e.g. ``zeros_like``, takes the rest from it); a factory without one is
    put on the GPU, where the candidate runs."""
    parts = []
    dtype = options.get("dtype")
    if dtype is not None:
        if dtype not in _DTYPES:
            raise UnsupportedOp(
                f"unsupported by the offline policy: dtype {dtype} in aten.{node.target}"
            )
        parts.append(f".dtype({_DTYPES[dtype]})")
    layout = options.get("layout")
    if layout is not None and layout != torch.strided:
        raise UnsupportedOp(
            f"unsupported by the offline policy: layout {layout} in aten.{node.target}"
        )
    if options.get("device") is not None or not takes_tensor:
        parts.append(".device(at::kCUDA)")
    if options.get("pin_memory"):
        parts.append(".pinned_memory(true)")
    return "at::TensorOptions()" + "".join(parts)


def _method_only(name: str) -> bool:
    namespaces = (
        torch._C._VariableFunctions,
        torch._C._nn,
        torch._C._linalg,
        torch._C._special,
        torch._C._fft,
    )
    is_method = hasattr(torch.Tensor, name) or name == "numpy_T"  # numpy_T: Python's x.T
    return is_method and not any(hasattr(ns, name) for ns in namespaces)


def _cpp_value(value: Any, arg: Any, builder: _Builder, refs: list[str], node: fx.Node) -> str:
    type_ = str(arg.type)

    def tensor(v: fx.Node) -> str:
        name = builder.ref(v).name
        refs.append(name)
        return f"@{len(refs) - 1}@"

    if isinstance(value, fx.Node):
        return tensor(value)
    if value is None:
        if "Tensor" in type_:
            return "::std::optional<at::Tensor>()"
        return "::std::nullopt"
    if isinstance(value, list | tuple):
        if "Tensor" in type_:  # Tensor[]: a vector converts to TensorList and ITensorListRef
            return "::std::vector<at::Tensor>{" + ", ".join(tensor(v) for v in value) + "}"
        return "at::IntArrayRef{" + ", ".join(str(int(v)) for v in value) + "}"
    if "List[int]" in type_ or "SymInt[" in type_ or "int[" in type_:
        count = int(arg.N) if getattr(arg, "N", None) else 1
        return "at::IntArrayRef{" + ", ".join([str(int(value))] * count) + "}"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return f"(int64_t){value}"
    if isinstance(value, float):
        if math.isinf(value):
            return ("-" if value < 0 else "") + "INFINITY"
        return repr(value)
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, torch.dtype):
        if value not in _DTYPES:
            raise UnsupportedOp(
                f"unsupported by the offline policy: dtype {value} in aten.{node.target}"
            )
        return _DTYPES[value]
    if isinstance(value, torch.device):
        return "at::kCUDA"
    if isinstance(value, torch.layout):
        return "at::kStrided"
    if isinstance(value, torch.memory_format):
        return _MEMORY_FORMATS[value]
    raise UnsupportedOp(
        f"unsupported by the offline policy: argument {arg.name} of type {type(value).__name__} "
        f"in aten.{node.target} at node '{node.name}'"
    )


# -- stages ------------------------------------------------------------------------------------


PROLOGUE = "prologue"  # an elementwise chain computed inside the reduction that reads it
EPILOGUE = "epilogue"  # the elementwise chain after a softmax / normalization, in its kernel


def lower(graph: OpGraph, split: frozenset[str] = frozenset()) -> Plan:
    """See ``_lower``; where a pooling read by a reduction makes the lowering fail (its chain
    cannot be fused), the pooling stays a library call and offers no boundary."""
    try:
        return _lower(graph, split)
    except UnsupportedOp:
        pools = frozenset(f"{POOL}:{n}" for n, v in graph.nodes.items() if v.kind == POOL)
        if pools <= split:
            raise
        plan = _lower(graph, split | pools)
        for boundary in pools - split:
            plan.boundaries.pop(boundary, None)
        return plan


def _lower(graph: OpGraph, split: frozenset[str]) -> Plan:
    """Stages for ``graph``: one per library call, per reduction/normalization, per
    statistics or scan kernel, and one fused elementwise kernel per materialized value.

    Fusion boundaries: an elementwise chain feeding a reduction is its prologue, a pooling
    before it can be read window by window, and the elementwise chain after a full-shape
    reduction (softmax, LayerNorm, GroupNorm / InstanceNorm with their per-channel affine;
    or after a sum, mean, max, ..., on its results) is its epilogue, all in the reduction's
    kernel; each such boundary is named
    ``prologue:<node>`` / ``pool:<node>`` / ``epilogue:<node>`` in ``Plan.boundaries``
    (True: fused). A name in ``split`` keeps that boundary as two kernels (the chain or the
    pooling materialized), so the search can choose where the boundaries fall."""
    scalars = Scalars(graph.scalar_attrs)
    consumers: dict[str, list[str]] = {n: [] for n in graph.nodes}
    for node in graph.nodes.values():
        for r in node.refs():
            consumers[r].append(node.name)
        for v in node.attrs.values():
            if isinstance(v, Ref):
                consumers[v.name].append(node.name)
    needed = _used_all(graph, graph.output)
    materialized = []
    for name, node in graph.nodes.items():
        if name not in needed or node.kind in ("input", "param"):
            continue
        if (
            node.kind not in ELEMENTWISE
            or name == graph.output
            or any(
                graph.nodes[c].kind not in ELEMENTWISE | REDUCTIONS | ROW_OPS
                for c in consumers[name]
                if c in needed
            )
        ):
            materialized.append(name)
    boundaries: dict[str, bool] = {}
    for name in [n for n in materialized if graph.nodes[n].kind == POOL]:
        if _read_by_reductions(graph, name, consumers, needed, set(materialized), split):
            boundaries[f"{POOL}:{name}"] = f"{POOL}:{name}" not in split
            if boundaries[f"{POOL}:{name}"]:
                materialized.remove(name)
    epilogue_of: dict[str, str] = {}  # materialized elementwise node -> the reduction before it
    for name in materialized:
        end = _epilogue_end(graph, name, consumers, needed, set(materialized))
        if end is not None:
            epilogue_of[end] = name
    deferred = {r for r in epilogue_of.values() if f"{EPILOGUE}:{r}" not in split}
    stages: list[Stage] = []
    given: dict[str, str] = {}

    def finish(stage: Stage, name: str, node: str) -> None:
        stage.extra.setdefault("node", node)  # what the stage computes (kept across variants)
        stage.extra.setdefault("boundaries", [])
        stages.append(stage)
        given[name] = f"__stage:{len(stages) - 1}"

    for name in materialized:
        node = graph.nodes[name]
        if name in deferred:  # computed with its epilogue, at the epilogue's place
            continue
        if epilogue_of.get(name) in deferred:
            red = graph.nodes[epilogue_of[name]]
            boundary = f"{EPILOGUE}:{red.name}"
            trial = (dict(given), list(stages), dict(boundaries))
            try:
                stage = _reduction(graph, red, name, scalars, *trial, split)
            except UnsupportedOp:  # the chain does not fuse: the reduction on its own
                stage = _reduction(graph, red, red.name, scalars, given, stages, boundaries, split)
                finish(stage, red.name, red.name)
            else:
                given, stages, boundaries = trial
                boundaries[boundary] = True
                stage.extra["boundaries"].append(boundary)
                finish(stage, name, red.name)
                continue
        if node.kind in ELEMENTWISE:
            stage = _elementwise(graph, name, scalars, given)
        elif node.kind in REDUCTIONS | ROW_OPS:
            stage = _reduction(graph, node, name, scalars, given, stages, boundaries, split)
            if name in epilogue_of.values():  # kept apart on request
                boundaries[f"{EPILOGUE}:{name}"] = False
                stage.extra["boundaries"].append(f"{EPILOGUE}:{name}")
        elif node.kind in (STATS, SCAN):
            stage = _single_input(graph, node, scalars, given)
        else:
            stage = _library(graph, node, given)
        finish(stage, name, name)
    if not any(s.family != LIBRARY for s in stages):
        ops = sorted({graph.nodes[n].origin for n in materialized})
        raise UnsupportedOp(
            f"unsupported by the offline policy: every op is a library call ({', '.join(ops)}); "
            "no template covers any of them, so the candidate would launch no kernel of its own"
        )
    _mark_contiguous(stages)
    _mark_channels_last_kept(stages)
    family = "fused" if any(s.family == LIBRARY for s in stages) else "kernels"
    return Plan(family, stages, scalars.py, graph, graph.input_names, boundaries)


def _reduction(
    graph: OpGraph,
    node: OpNode,
    output: str,
    scalars: Scalars,
    given: dict[str, str],
    stages: list[Stage],
    boundaries: dict[str, bool],
    split: frozenset[str],
) -> Stage:
    """The reduction at ``node`` writing ``output``, its elementwise prologue fused unless the
    prologue boundary is split (or the prologue cannot be fused): then the prologue is a
    kernel of its own, appended to ``stages`` first."""
    src = node.args[0].name
    fusable = src not in given and graph.nodes[src].kind in ELEMENTWISE
    name = f"{PROLOGUE}:{node.name}"
    if fusable and name not in split:
        try:
            stage = reduction_stage(graph, node, output, scalars, given)
        except UnsupportedOp:
            fusable = False
        else:
            boundaries[name] = True
            stage.extra["boundaries"] = [name]
            return stage
    if fusable or (src not in given and graph.nodes[src].kind in ELEMENTWISE):
        prologue = _elementwise(graph, src, scalars, given)
        prologue.extra.update(node=src, boundaries=[name] if fusable else [])
        stages.append(prologue)
        given[src] = f"__stage:{len(stages) - 1}"
        if fusable:
            boundaries[name] = False
    stage = reduction_stage(graph, node, output, scalars, given)
    stage.extra["boundaries"] = [name] if boundaries.get(name) is False else []
    return stage


def _read_by_reductions(
    graph: OpGraph,
    name: str,
    consumers: dict[str, list[str]],
    needed: set[str],
    materialized: set[str],
    split: frozenset[str],
) -> bool:
    """Whether every use of the pooling ``name`` is the source of a reduction or flows there
    through unmaterialized elementwise nodes (its prologue, not split): then the reduction
    can read the pooling's windows."""
    todo = [(c, False) for c in consumers[name] if c in needed]
    if not todo:
        return False
    while todo:
        current, through = todo.pop()
        node = graph.nodes[current]
        if node.kind in REDUCTIONS | ROW_OPS:
            if through and f"{PROLOGUE}:{current}" in split:
                return False
            continue
        if node.kind not in ELEMENTWISE or current in materialized:
            return False
        todo.extend((c, True) for c in consumers[current] if c in needed)
    return True


def _epilogue_end(
    graph: OpGraph,
    name: str,
    consumers: dict[str, list[str]],
    needed: set[str],
    materialized: set[str],
) -> str | None:
    """The one materialized elementwise node of the same shape that every use of the
    reduction ``name`` (full-shape, or reduced: then the epilogue runs once per result) flows
    into through unmaterialized elementwise nodes."""
    node = graph.nodes[name]
    if node.kind not in ROW_OPS | REDUCTIONS or name == graph.output:
        return None
    ends: set[str] = set()
    todo = [c for c in consumers[name] if c in needed]
    seen: set[str] = set()
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        if graph.nodes[current].kind not in ELEMENTWISE:
            return None
        if current in materialized:
            ends.add(current)
        else:
            todo.extend(c for c in consumers[current] if c in needed)
    if len(ends) != 1:
        return None
    (end,) = ends
    return end if graph.nodes[end].shape == node.shape else None


def _mark_contiguous(stages: list[Stage]) -> None:
    """A library result is made contiguous only where a kernel of ours reads it (or it is the
    output); between library calls it keeps ATen's strides, as in the reference (no copy of
    a transposed weight before cuBLAS)."""
    read_by_kernel = {
        t.py
        for s in stages
        if s.family != LIBRARY
        for t in s.tensors
        if t.py.startswith("__stage:")
    }
    for i, stage in enumerate(stages):
        if stage.family == LIBRARY:
            last = i == len(stages) - 1
            stage.extra["contiguous"] = not stage.extra["tuple"] and (
                last or f"__stage:{i}" in read_by_kernel
            )


def _mark_channels_last_kept(stages: list[Stage]) -> None:
    """A convolution may leave its result channels-last (``keep_channels_last``) where only
    elementwise kernels of ours read it, each as a full operand: they read it tile by tile
    through shared memory and write the contiguous layout, so no separate copy converts it
    back (measured on an H200, converting the result back cost more than the layout saved)."""
    for i, stage in enumerate(stages):
        if stage.family != LIBRARY or not stage.extra.get("conv_rank") or stage.extra["tuple"]:
            continue
        ref = f"__stage:{i}"
        readers = [s for s in stages if any(t.py == ref for t in s.tensors)]
        stage.extra["keep_channels_last"] = (
            i < len(stages) - 1
            and bool(readers)
            and all(
                s.family == "elementwise"
                and [t.role for t in s.tensors if t.py == ref] == ["full"]
                and sum(t.py.startswith("__stage:") and t.role == "full" for t in s.tensors) == 1
                for s in readers
            )
        )


def _used_all(graph: OpGraph, target: str) -> set[str]:
    seen: set[str] = set()
    todo = [target]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        node = graph.nodes[name]
        todo.extend(node.refs())
        todo.extend(v.name for v in node.attrs.values() if isinstance(v, Ref))
    return seen


def _tensor_py(graph: OpGraph, name: str, given: dict[str, str]) -> str:
    return given.get(name) or py_expr(graph, name)


def _elementwise(graph: OpGraph, name: str, scalars: Scalars, given: dict[str, str]) -> Stage:
    out = graph.nodes[name]
    stop = set(given) | {n for n, v in graph.nodes.items() if v.kind not in ELEMENTWISE}
    seen: set[str] = set()
    todo = [name]
    leaves: list[str] = []
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        if current != name and current in stop:
            leaves.append(current)
            continue
        node = graph.nodes[current]
        todo.extend(node.refs())
        todo.extend(v.name for v in node.attrs.values() if isinstance(v, Ref))
    tensors: list[TensorArg] = []
    leaf_vars: dict[str, str] = {}
    for leaf in sorted(leaves, key=list(graph.nodes).index):
        node = graph.nodes[leaf]
        if node.dtype != "float32":
            raise UnsupportedOp(
                f"unsupported by the offline policy: {node.dtype} tensor '{leaf}' in an elementwise kernel"
            )
        role, block = broadcast_role(node.shape, out.shape, leaf)
        leaf_vars[leaf] = f"x{len(tensors)}"
        tensors.append(TensorArg(leaf, _tensor_py(graph, leaf, given), node.shape, role, block))
    if not any(t.role == "full" for t in tensors):
        raise UnsupportedOp(
            f"unsupported by the offline policy: no operand of '{name}' has its shape {out.shape}; "
            "the elementwise template sizes its output from one full-shape operand"
        )
    gen = CodeGen(graph, scalars, leaf_vars)
    out_var = gen.var(name)
    return Stage("elementwise", tensors, out.shape, gen.lines, out_var)


def _single_input(graph: OpGraph, node: OpNode, scalars: Scalars, given: dict[str, str]) -> Stage:
    src = node.args[0].name
    if src not in given and graph.nodes[src].kind not in ("input", "param"):
        raise UnsupportedOp(
            f"unsupported by the offline policy: {node.origin} of an unmaterialized value"
        )
    source = graph.nodes[src]
    if source.dtype != "float32":
        raise UnsupportedOp(
            f"unsupported by the offline policy: {node.origin} of a {source.dtype} tensor"
        )
    tensors = [TensorArg(src, _tensor_py(graph, src, given), source.shape, "full")]
    extra: dict[str, Any] = {"dim": node.attrs.get("dim", 1)}
    if node.kind == STATS:
        extra["eps"] = scalars.use(float(node.attrs["eps"]))
    else:
        extra["op"] = node.attrs.get("op", "sum")
    family = "stats" if node.kind == STATS else "scan"
    return Stage(family, tensors, node.shape, [], "", extra=extra)


def _library(graph: OpGraph, node: OpNode, given: dict[str, str]) -> Stage:
    tensors = []
    for ref in node.args:
        src = graph.nodes[ref.name]
        tensors.append(TensorArg(ref.name, _tensor_py(graph, ref.name, given), src.shape, "full"))
    return Stage(
        LIBRARY,
        tensors,
        node.shape,
        [],
        "",
        extra={
            "cpp": node.attrs["cpp"],
            "tuple": bool(node.attrs.get("tuple")),
            "origin": node.origin,
            "conv_rank": _conv_rank(node, tensors),
        },
    )


_CONVOLUTIONS = frozenset(
    f"aten.{name}"
    for name in ("conv2d", "conv3d", "conv_transpose2d", "conv_transpose3d", "convolution")
)


def _conv_rank(node: OpNode, tensors: list[TensorArg]) -> int:
    """4 or 5 for a 2-D or 3-D convolution whose input and weight are the call's first two
    operands (their memory layout is then a choice of the search), else 0."""
    if node.origin not in _CONVOLUTIONS or len(tensors) < 2:
        return 0
    rank = len(tensors[0].shape)
    return rank if rank in (4, 5) and len(tensors[1].shape) == rank else 0
