"""Capture a KernelBench task's ``Model`` as a small graph of tensor ops with shapes.

The policy writes kernels for what the reference computes, so it first needs the
computation as data: torch.fx symbolic tracing (torch.export where tracing fails),
shapes and dtypes propagated on meta tensors (no memory, no RNG draws), and each node
normalized to one op kind whatever spelling the model used (``x + y``,
``torch.add``, ``x.add``, ``aten.add.Tensor``).
"""

from __future__ import annotations

import ast
import builtins
import inspect
import math
import operator
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import torch
import torch.nn as nn
from torch import fx


class UnsupportedOp(Exception):
    """The task uses an op (or an op in a position) no template covers; the message names it."""


class CaptureError(Exception):
    """The task file could not be read as a KernelBench problem; the message says what is missing."""


@dataclass(frozen=True)
class Ref:
    """An operand that is another node's value."""

    name: str


@dataclass
class OpNode:
    name: str
    kind: str  # "input" | "param" | an op kind from ELEMENTWISE / REDUCTIONS / MATMULS / ...
    args: tuple[Any, ...] = ()
    attrs: dict[str, Any] = field(default_factory=dict)
    shape: tuple[int, ...] = ()
    dtype: str = "float32"
    origin: str = ""  # what the model wrote, e.g. "torch.relu" or "aten.conv2d (nn.Conv2d)"
    param: str | None = None  # dotted attribute path of a parameter, e.g. "linear.weight"
    index: int | None = None  # position of a forward input

    def refs(self) -> list[str]:
        return [a.name for a in self.args if isinstance(a, Ref)]


@dataclass
class OpGraph:
    nodes: dict[str, OpNode]  # in topological order
    inputs: list[str]  # forward inputs, in order
    input_names: list[str]  # the reference forward's parameter names
    output: str
    scalar_attrs: dict[str, float]  # the model's scalar attributes (runtime values for kernels)
    init_signature: str  # "(self, in_features, out_features)"
    init_body: str  # the reference __init__ body: parameters are created identically
    capture: str  # "fx" | "export"
    prelude: str = ""  # module-level statements the init body reads (sizes, constants)

    def ops(self) -> list[OpNode]:
        return [n for n in self.nodes.values() if n.kind not in ("input", "param")]


ELEMENTWISE = frozenset(
    [
        "add",
        "sub",
        "mul",
        "div",
        "neg",
        "pow",
        "relu",
        "sigmoid",
        "tanh",
        "gelu",
        "clamp",
        "minimum",
        "maximum",
        "exp",
        "log",
        "sqrt",
        "rsqrt",
        "abs",
        "silu",
        "leaky_relu",
        "identity",
        "hardswish",
        "hardsigmoid",
        "mish",
        "softplus",
        "elu",
        "log1p",
        "expm1",
        "erf",
        "reciprocal",
        "sin",
        "cos",
    ]
)
REDUCTIONS = frozenset(["sum", "mean", "amax", "amin", "logsumexp"])
ROW_OPS = frozenset(["softmax", "log_softmax", "layer_norm"])
MATMULS = frozenset(["matmul", "bmm", "mm", "linear"])

# Spellings of each kind: Python operators, torch / Tensor / functional names, aten packets.
ALIASES = {
    "add": "add",
    "iadd": "add",
    "sub": "sub",
    "isub": "sub",
    "rsub": "rsub",
    "mul": "mul",
    "imul": "mul",
    "truediv": "div",
    "div": "div",
    "divide": "div",
    "true_divide": "div",
    "neg": "neg",
    "negative": "neg",
    "pow": "pow",
    "relu": "relu",
    "sigmoid": "sigmoid",
    "tanh": "tanh",
    "gelu": "gelu",
    "clamp": "clamp",
    "clip": "clamp",
    "minimum": "minimum",
    "maximum": "maximum",
    "exp": "exp",
    "log": "log",
    "sqrt": "sqrt",
    "rsqrt": "rsqrt",
    "abs": "abs",
    "silu": "silu",
    "leaky_relu": "leaky_relu",
    "hardtanh": "clamp",
    "hardswish": "hardswish",
    "hardsigmoid": "hardsigmoid",
    "mish": "mish",
    "softplus": "softplus",
    "elu": "elu",
    "selu": "elu",
    "log1p": "log1p",
    "expm1": "expm1",
    "erf": "erf",
    "reciprocal": "reciprocal",
    "sin": "sin",
    "cos": "cos",
    "detach": "identity",
    "contiguous": "identity",
    "clone": "identity",
    "dropout": "identity",
    "alias": "identity",
    "sum": "sum",
    "mean": "mean",
    "amax": "amax",
    "amin": "amin",
    "softmax": "softmax",
    "_softmax": "softmax",
    "log_softmax": "log_softmax",
    "_log_softmax": "log_softmax",
    "layer_norm": "layer_norm",
    "matmul": "matmul",
    "bmm": "bmm",
    "mm": "mm",
    "linear": "linear",
    "transpose": "transpose",
    "t": "t",
}
# Modules: kind plus how to read their arguments.
_MODULE_KINDS: dict[type, str] = {
    nn.Linear: "linear",
    nn.LayerNorm: "layer_norm",
    nn.ReLU: "relu",
    nn.Sigmoid: "sigmoid",
    nn.Tanh: "tanh",
    nn.GELU: "gelu",
    nn.SiLU: "silu",
    nn.Softmax: "softmax",
    nn.LogSoftmax: "log_softmax",
    nn.Identity: "identity",
    nn.Dropout: "identity",
    nn.LeakyReLU: "leaky_relu",
}
# aten names of common modules the templates do not cover, for the "unsupported" reason.
_MODULE_ATEN = {
    "Conv1d": "aten.conv1d",
    "Conv2d": "aten.conv2d",
    "Conv3d": "aten.conv3d",
    "ConvTranspose1d": "aten.conv_transpose1d",
    "ConvTranspose2d": "aten.conv_transpose2d",
    "ConvTranspose3d": "aten.conv_transpose3d",
    "BatchNorm1d": "aten.batch_norm",
    "BatchNorm2d": "aten.batch_norm",
    "BatchNorm3d": "aten.batch_norm",
    "GroupNorm": "aten.group_norm",
    "InstanceNorm2d": "aten.instance_norm",
    "MaxPool1d": "aten.max_pool1d",
    "MaxPool2d": "aten.max_pool2d",
    "MaxPool3d": "aten.max_pool3d",
    "AvgPool2d": "aten.avg_pool2d",
    "Embedding": "aten.embedding",
    "LSTM": "aten.lstm",
    "GRU": "aten.gru",
}
_MODULES = {"torch", "nn", "F", "math"}  # what the candidate file imports
_BUILTINS = frozenset(dir(builtins))


def load_problem(source: str, where: str = "task") -> ModuleType:
    """Execute a task file in a fresh namespace (a module object, so classes have a home)."""
    module = ModuleType("maxcode_offline_cuda_problem")
    try:
        exec(compile(source, where, "exec"), module.__dict__)
    except Exception as err:
        raise CaptureError(f"{where}: executing the task source failed: {err!r}") from err
    for name in ("Model", "get_inputs", "get_init_inputs"):
        if not hasattr(module, name):
            raise CaptureError(
                f"{where}: no {name} defined; a KernelBench task needs Model, get_inputs and get_init_inputs"
            )
    return module


def capture(source: str, where: str = "task") -> OpGraph:
    """The op graph of the task's ``Model`` with shapes for ``get_inputs()``."""
    problem = load_problem(source, where)
    init_args = list(problem.get_init_inputs())
    with torch.device("meta"):
        model = problem.Model(*init_args)
        inputs = list(problem.get_inputs())
    # Training mode, as KernelBench runs the reference: BatchNorm uses batch statistics.
    model.train()
    signature, body, prelude = init_source(source, where)
    forward_params = [p for p in inspect.signature(problem.Model.forward).parameters if p != "self"]
    scalars = {
        k: float(v)
        for k, v in vars(model).items()
        if not k.startswith("_") and isinstance(v, int | float) and not isinstance(v, bool)
    }
    try:
        gm = fx.symbolic_trace(model)
        nodes, order, output = _from_fx(gm, inputs)
        how = "fx"
    except UnsupportedOp:
        raise
    except Exception as fx_err:  # tracing failed (control flow, unsupported Python): try export
        try:
            exported = torch.export.export(model, tuple(inputs))
        except Exception as export_err:
            raise CaptureError(
                f"{where}: torch.fx tracing failed ({fx_err!r}) and torch.export failed ({export_err!r})"
            ) from export_err
        nodes, order, output = _from_export(exported)
        how = "export"
    return OpGraph(
        nodes=nodes,
        inputs=order,
        input_names=forward_params[: len(order)] or [f"x{i}" for i in range(len(order))],
        output=output,
        scalar_attrs=scalars,
        init_signature=signature,
        init_body=body,
        capture=how,
        prelude=prelude,
    )


def init_source(source: str, where: str) -> tuple[str, str, str]:
    """``Model.__init__``'s signature, body and the module-level statements it reads.

    The candidate repeats the body (``Model`` renamed ``ModelNew``, so ``super(Model,
    self)`` works) after the module-level assignments it reads, so that seeding before
    construction gives it the reference's parameter values in the same order.
    """
    tree = ast.parse(source)
    cls = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Model"), None)
    init = (
        next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
        if cls
        else None
    )
    if init is None:
        raise CaptureError(f"{where}: class Model has no __init__ written in the task file")
    init = _RenameModel().visit(init)
    assignments = [n for n in tree.body if isinstance(n, ast.Assign | ast.AnnAssign)]
    defined = {name for stmt in assignments for name in _targets(stmt)}
    local = _targets_in(init) | {a.arg for a in ast.walk(init.args) if isinstance(a, ast.arg)}
    needed = _free_names(init) - local
    chosen: list[ast.stmt] = []
    todo = sorted(needed & defined)
    seen: set[str] = set()
    while todo:  # the assignments to each needed name, and what their values read
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for stmt in assignments:
            if name in _targets(stmt) and stmt not in chosen:
                chosen.append(stmt)
                todo.extend(sorted((_free_names(stmt) & defined) - seen))
    unknown = sorted(
        {n for stmt in [init, *chosen] for n in _free_names(stmt)}
        - local
        - defined
        - _MODULES
        - _BUILTINS
        - {"ModelNew"}
    )
    if unknown:
        raise UnsupportedOp(
            f"unsupported by the offline policy: Model.__init__ reads module-level names {unknown} "
            "that are not simple assignments (functions, classes or imports the candidate would "
            "have to copy); it could not create its parameters identically"
        )
    prelude = "\n".join(ast.unparse(s) for s in sorted(chosen, key=lambda s: s.lineno))
    signature = "(" + ast.unparse(init.args) + ")"
    body = "\n".join(ast.unparse(stmt) for stmt in init.body if not _is_docstring(stmt))
    return signature, body, prelude


class _RenameModel(ast.NodeTransformer):
    """``Model`` -> ``ModelNew`` inside the copied ``__init__`` (``super(Model, self)``)."""

    def visit_Name(self, node: ast.Name) -> ast.Name:
        return ast.Name("ModelNew", node.ctx) if node.id == "Model" else node


def _targets(stmt: ast.stmt) -> set[str]:
    targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]  # type: ignore[attr-defined]
    return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}


def _targets_in(tree: ast.AST) -> set[str]:
    names = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            names.add(n.id)
        elif isinstance(n, ast.FunctionDef | ast.Lambda | ast.comprehension):
            names |= {a.arg for a in ast.walk(n) if isinstance(a, ast.arg)}
    return names


def _free_names(tree: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _is_docstring(stmt: ast.stmt) -> bool:
    return (
        isinstance(stmt, ast.Expr)
        and isinstance(stmt.value, ast.Constant)
        and isinstance(stmt.value.value, str)
    )


def _shape_dtype(value: Any) -> tuple[tuple[int, ...], str]:
    if isinstance(value, torch.Tensor):
        return tuple(int(s) for s in value.shape), str(value.dtype).replace("torch.", "")
    return (), "scalar"


def _from_fx(gm: fx.GraphModule, inputs: list[Any]) -> tuple[dict[str, OpNode], list[str], str]:
    from torch.fx.passes.shape_prop import ShapeProp

    ShapeProp(gm).propagate(*inputs)
    nodes: dict[str, OpNode] = {}
    order: list[str] = []
    output = ""
    for node in gm.graph.nodes:
        meta = node.meta.get("tensor_meta")
        shape = tuple(int(s) for s in meta.shape) if hasattr(meta, "shape") else ()
        dtype = str(meta.dtype).replace("torch.", "") if hasattr(meta, "dtype") else "scalar"
        if node.op == "placeholder":
            nodes[node.name] = OpNode(
                node.name, "input", shape=shape, dtype=dtype, index=len(order), origin="input"
            )
            order.append(node.name)
        elif node.op == "get_attr":
            value = _attr(gm, node.target)
            s, d = _shape_dtype(value)
            nodes[node.name] = OpNode(
                node.name, "param", shape=s, dtype=d, param=str(node.target), origin="parameter"
            )
        elif node.op == "output":
            result = node.args[0]
            if not isinstance(result, fx.Node):
                raise UnsupportedOp(
                    "unsupported by the offline policy: forward returns "
                    f"{type(result).__name__} of several tensors; the templates write one output"
                )
            output = result.name
        elif node.op == "call_module":
            nodes.update(_module_node(gm, node, shape, dtype, nodes))
        else:
            name = (
                node.target
                if node.op == "call_method"
                else getattr(node.target, "__name__", str(node.target))
            )
            prefix = "Tensor." if node.op == "call_method" else _qualifier(node.target)
            kind = ALIASES.get(str(name))
            if node.target is getattr and node.args[1] in ("T", "mT"):  # A.T: a transpose
                kind, node.args = "t", node.args[:1]
            elif name == "einsum":
                node.args = _einsum_as_matmul(node)
                kind = "matmul"
            origin = f"{prefix}{name}"
            if kind is None:
                raise UnsupportedOp(
                    f"unsupported by the offline policy: aten.{name} ({origin}) at node '{node.name}'"
                )
            args, attrs = normalize_call(kind, node.args, node.kwargs, node.name, origin)
            nodes[node.name] = _finish(
                OpNode(node.name, kind, args, attrs, shape, dtype, origin), nodes
            )
    return nodes, order, output


def _einsum_as_matmul(node: fx.Node) -> tuple:
    """``torch.einsum("...l,lk->...k", A, B)``: a matmul with B shared (the simple form)."""
    equation, *operands = node.args
    if len(operands) == 1 and isinstance(operands[0], list | tuple):
        operands = list(operands[0])
    lhs, _, out = str(equation).replace(" ", "").partition("->")
    parts = lhs.split(",")
    if len(parts) == 2 and len(operands) == 2 and "." not in lhs:
        a, b = parts
        if (
            len(b) == 2
            and a[-1] == b[0]
            and out == a[:-1] + b[1]
            and len(set(a + b[1])) == len(a) + 1
        ):
            return tuple(operands)
    raise UnsupportedOp(
        f"unsupported by the offline policy: torch.einsum('{equation}') at node '{node.name}'; "
        "only the matmul form '...l,lk->...k' is lowered"
    )


def _qualifier(target: Any) -> str:
    if target in (operator.add, operator.sub, operator.mul, operator.truediv, operator.neg):
        return "operator."
    module = getattr(target, "__module__", "") or ""
    if module.startswith("torch.nn.functional"):
        return "F."
    return "torch."


def _attr(gm: fx.GraphModule, target: str) -> Any:
    obj: Any = gm
    for part in str(target).split("."):
        obj = getattr(obj, part)
    return obj


def _module_node(
    gm: fx.GraphModule, node: fx.Node, shape: tuple[int, ...], dtype: str, nodes: dict
) -> dict[str, OpNode]:
    """A call_module node as an op node, its parameters as param nodes."""
    module = gm.get_submodule(str(node.target))
    cls = type(module).__name__
    kind = next((k for t, k in _MODULE_KINDS.items() if type(module) is t), None)
    if isinstance(module, nn.Dropout) and module.training and module.p > 0:
        raise UnsupportedOp(
            f"unsupported by the offline policy: aten.dropout with p={module.p} in training mode "
            f"(nn.Dropout) at node '{node.name}'; its random mask cannot be reproduced"
        )
    if kind is None:
        aten = _MODULE_ATEN.get(cls, f"aten.{cls.lower()}")
        raise UnsupportedOp(
            f"unsupported by the offline policy: {aten} (nn.{cls}) at node '{node.name}'"
        )
    origin = f"nn.{cls}"
    out: dict[str, OpNode] = {}

    def param(attr: str) -> Ref | None:
        value = getattr(module, attr, None)
        if value is None:
            return None
        pname = f"{node.name}__{attr}"
        s, d = _shape_dtype(value)
        out[pname] = OpNode(
            pname, "param", shape=s, dtype=d, param=f"{node.target}.{attr}", origin="parameter"
        )
        return Ref(pname)

    x = Ref(node.args[0].name)
    attrs: dict[str, Any] = {}
    if kind == "linear":
        args: tuple = (x, param("weight"), param("bias"))
    elif kind == "layer_norm":
        if len(module.normalized_shape) != 1:
            raise UnsupportedOp(
                f"unsupported by the offline policy: aten.layer_norm over {len(module.normalized_shape)} "
                f"dims (nn.LayerNorm) at node '{node.name}'; the template normalizes the last dim only"
            )
        args = (x, param("weight"), param("bias"))
        attrs = {"eps": float(module.eps)}
    elif kind in ("softmax", "log_softmax"):
        args, attrs = (x,), {"dim": module.dim if module.dim is not None else -1}
    elif kind == "gelu":
        args, attrs = (x,), {"approximate": module.approximate}
    elif kind == "leaky_relu":
        args, attrs = (x,), {"negative_slope": float(module.negative_slope)}
    else:
        args = (x,)
    out[node.name] = _finish(OpNode(node.name, kind, args, attrs, shape, dtype, origin), nodes)
    return out


def _arg(args: tuple, kwargs: dict, i: int, name: str, default: Any = None) -> Any:
    if name in kwargs:
        return kwargs[name]
    return args[i] if len(args) > i else default


def _operand(value: Any) -> Any:
    if isinstance(value, fx.Node):
        return Ref(value.name)
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, list | tuple):
        return tuple(_operand(v) for v in value)
    if isinstance(value, torch.dtype | torch.device | torch.memory_format):
        return None
    raise UnsupportedOp(
        f"unsupported by the offline policy: operand of type {type(value).__name__}"
    )


def normalize_call(
    kind: str, args: tuple, kwargs: dict, name: str, origin: str
) -> tuple[tuple, dict[str, Any]]:
    """(operands, attributes) of one call, whatever the spelling (fx or aten)."""

    def a(i: int, key: str, default: Any = None) -> Any:
        return _operand(_arg(args, kwargs, i, key, default))

    if "dropout" in origin:
        p, train = (
            a(1, "p", 0.5),
            _arg(args, kwargs, 2, "training", _arg(args, kwargs, 2, "train", True)),
        )
        if p and train:
            raise UnsupportedOp(
                f"unsupported by the offline policy: aten.dropout with p={p} in training mode ({origin}) "
                f"at node '{name}'; its random mask cannot be reproduced"
            )
        return (a(0, "input"),), {}
    if kind == "clamp" and "hardtanh" in origin:
        return (a(0, "input"),), {"min": a(1, "min_val", -1.0), "max": a(2, "max_val", 1.0)}
    if kind == "elu":
        if "selu" in origin:
            return (a(0, "input"),), {
                "alpha": 1.6732632423543772848170429916717,
                "scale": 1.0507009873554804934193349852946,
                "input_scale": 1.0,
            }
        return (a(0, "input"),), {
            "alpha": a(1, "alpha", 1.0),
            "scale": a(2, "scale", 1.0),
            "input_scale": a(3, "input_scale", 1.0),
        }
    if kind == "softplus":
        return (a(0, "input"),), {"beta": a(1, "beta", 1.0), "threshold": a(2, "threshold", 20.0)}

    if kind in ("add", "sub", "rsub"):
        alpha = a(2, "alpha", 1.0)
        return (a(0, "input"), a(1, "other")), {"alpha": 1.0 if alpha is None else alpha}
    if kind in ("mul", "div", "minimum", "maximum"):
        if kind == "div" and a(2, "rounding_mode") is not None:
            raise UnsupportedOp(
                f"unsupported by the offline policy: aten.div with rounding_mode ({origin}) at node '{name}'"
            )
        return (a(0, "input"), a(1, "other")), {}
    if kind == "pow":
        return (a(0, "input"), a(1, "exponent")), {}
    if kind == "clamp":
        return (a(0, "input"),), {"min": a(1, "min"), "max": a(2, "max")}
    if kind == "gelu":
        return (a(0, "input"),), {"approximate": a(1, "approximate", "none") or "none"}
    if kind == "leaky_relu":
        return (a(0, "input"),), {"negative_slope": a(1, "negative_slope", 0.01)}
    if kind in REDUCTIONS:
        dim = a(1, "dim")
        if dim is None:
            raise UnsupportedOp(
                f"unsupported by the offline policy: aten.{kind} over all dims ({origin}) at node '{name}'"
            )
        dims = dim if isinstance(dim, tuple) else (dim,)
        if len(dims) != 1:
            raise UnsupportedOp(
                f"unsupported by the offline policy: aten.{kind} over {len(dims)} dims ({origin}) at node '{name}'"
            )
        return (a(0, "input"),), {"dim": int(dims[0]), "keepdim": bool(a(2, "keepdim", False))}
    if kind in ("softmax", "log_softmax"):
        return (a(0, "input"),), {"dim": int(a(1, "dim"))}
    if kind == "layer_norm":
        shape = a(1, "normalized_shape")
        if len(shape) != 1:
            raise UnsupportedOp(
                f"unsupported by the offline policy: aten.layer_norm over {len(shape)} dims ({origin}) at node '{name}'"
            )
        return (a(0, "input"), a(2, "weight"), a(3, "bias")), {"eps": float(a(4, "eps", 1e-5))}
    if kind == "linear":
        return (a(0, "input"), a(1, "weight"), a(2, "bias")), {}
    if kind in ("matmul", "bmm", "mm"):
        return (a(0, "input"), a(1, "other")), {}
    if kind == "transpose":
        return (a(0, "input"),), {"dims": (int(a(1, "dim0")), int(a(2, "dim1")))}
    if kind == "t":
        return (a(0, "input"),), {"dims": (-2, -1)}
    return (a(0, "input"),), {}


def _finish(node: OpNode, nodes: dict[str, OpNode]) -> OpNode:
    """Canonical forms: rsub as sub, t as transpose, negative dims made positive."""
    if node.kind == "rsub":
        node.kind, node.args = "sub", (node.args[1], node.args[0])
    if node.kind == "t":
        node.kind = "transpose"
    if "dim" in node.attrs and isinstance(node.attrs["dim"], int):
        source = nodes[node.args[0].name] if isinstance(node.args[0], Ref) else None
        rank = len(source.shape) if source is not None else 0
        if rank:
            node.attrs["dim"] = node.attrs["dim"] % rank
    if node.kind == "transpose":
        source = nodes[node.args[0].name]
        rank = len(source.shape)
        d0, d1 = sorted(d % rank for d in node.attrs["dims"])
        if rank < 2 or (d0, d1) != (rank - 2, rank - 1):
            raise UnsupportedOp(
                f"unsupported by the offline policy: aten.transpose of dims {node.attrs['dims']} "
                f"({node.origin}) at node '{node.name}'; only the last two dims of a matmul operand"
            )
        node.attrs["dims"] = (d0, d1)
    if node.kind == "identity" and not isinstance(node.args[0], Ref):
        raise UnsupportedOp(
            f"unsupported by the offline policy: {node.origin} at node '{node.name}'"
        )
    if any(isinstance(a, float) and math.isnan(a) for a in node.args):
        raise UnsupportedOp(
            f"unsupported by the offline policy: NaN constant at node '{node.name}'"
        )
    return node


def _from_export(exported: Any) -> tuple[dict[str, OpNode], list[str], str]:
    """Nodes of a torch.export program (aten ops; parameters are lifted placeholders)."""
    sig = exported.graph_signature
    params = {**sig.inputs_to_parameters, **sig.inputs_to_buffers}
    nodes: dict[str, OpNode] = {}
    order: list[str] = []
    output = ""
    for node in exported.graph.nodes:
        s, d = _shape_dtype(node.meta.get("val"))
        if node.op == "placeholder":
            if node.name in params:
                nodes[node.name] = OpNode(
                    node.name,
                    "param",
                    shape=s,
                    dtype=d,
                    param=params[node.name],
                    origin="parameter",
                )
            else:
                nodes[node.name] = OpNode(
                    node.name, "input", shape=s, dtype=d, index=len(order), origin="input"
                )
                order.append(node.name)
        elif node.op == "output":
            outs = node.args[0]
            if len(outs) != 1:
                raise UnsupportedOp(
                    f"unsupported by the offline policy: forward returns {len(outs)} tensors; the templates write one output"
                )
            output = outs[0].name
        elif node.op == "call_function":
            packet = getattr(node.target, "_overloadpacket", None)
            name = packet.__name__ if packet is not None else getattr(node.target, "__name__", "?")
            kind = ALIASES.get(name)
            if kind is None:
                raise UnsupportedOp(
                    f"unsupported by the offline policy: aten.{name} at node '{node.name}'"
                )
            args, attrs = normalize_call(kind, node.args, node.kwargs, node.name, f"aten.{name}")
            nodes[node.name] = _finish(
                OpNode(node.name, kind, args, attrs, s, d, f"aten.{name}"), nodes
            )
        else:
            raise UnsupportedOp(
                f"unsupported by the offline policy: exported node {node.op} '{node.name}'"
            )
    return nodes, order, output
