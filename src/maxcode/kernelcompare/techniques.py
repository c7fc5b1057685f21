"""Which optimization techniques a kernel uses, read from its parse tree.

A pair's description names the techniques whose features differ between the slow
and the fast kernel, so the label is measured from the code, not written by hand.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import tree_sitter

from maxcode.kernelcompare.cudaparse import parse

TECHNIQUES = (
    "coalescing",
    "shared_memory",
    "tiling",
    "unrolling",
    "texture_memory",
    "constant_memory",
    "read_only_cache",
    "register_blocking",
    "thread_organization",
    "warp_primitives",
    "fast_math",
)
DESCRIPTIONS = {
    "coalescing": "coalesced global memory access (fewer thread-strided loads/stores)",
    "shared_memory": "shared memory staging",
    "tiling": "tiling through shared memory with block-wide synchronization in the loop",
    "unrolling": "loop unrolling",
    "texture_memory": "texture memory reads",
    "constant_memory": "constant memory",
    "read_only_cache": "read-only data cache loads (__ldg)",
    "register_blocking": "register blocking (per-thread local arrays)",
    "thread_organization": "a different thread/block organization",
    "warp_primitives": "warp-level primitives (shuffles, votes)",
    "fast_math": "fast-math intrinsics",
}
_TEXTURE_CALLS = {
    "tex1Dfetch",
    "tex1D",
    "tex2D",
    "tex3D",
    "tex1DLayered",
    "tex2DLayered",
    "texCubemap",
}
_WARP_PREFIXES = ("__shfl", "__ballot", "__any", "__all", "__activemask", "__reduce_")
_FAST_MATH = {"__expf", "__logf", "__sinf", "__cosf", "__tanf", "__powf", "__fdividef", "__exp10f"}
_LOOPS = ("for_statement", "while_statement", "do_statement")
_BUILTIN_INDEX = ("threadIdx", "blockIdx", "blockDim", "gridDim")


@dataclass
class Features:
    """Counts per technique; ``organization`` is the set of thread-layout features used."""

    shared_decls: int = 0
    tiled_syncs: int = 0  # __syncthreads() inside a loop of a kernel with shared memory
    unroll_pragmas: int = 0
    texture_uses: int = 0
    constant_decls: int = 0
    ldg_calls: int = 0
    local_arrays: int = 0
    strided_accesses: int = 0  # subscripts whose index multiplies threadIdx.x
    warp_calls: int = 0
    fast_math_calls: int = 0
    organization: set[str] = field(default_factory=set)

    def uses(self) -> set[str]:
        """Techniques present in this kernel (coalescing is relative, see ``differing``)."""
        present = {
            "shared_memory": self.shared_decls > 0,
            "tiling": self.tiled_syncs > 0,
            "unrolling": self.unroll_pragmas > 0,
            "texture_memory": self.texture_uses > 0,
            "constant_memory": self.constant_decls > 0,
            "read_only_cache": self.ldg_calls > 0,
            "register_blocking": self.local_arrays > 0,
            "warp_primitives": self.warp_calls > 0,
            "fast_math": self.fast_math_calls > 0,
        }
        return {name for name, on in present.items() if on}


def _text(node: tree_sitter.Node) -> str:
    return node.text.decode(errors="replace")


def _has_qualifier(node: tree_sitter.Node, qualifier: str) -> bool:
    return any(_text(c) == qualifier for c in node.children if c.type == "type_qualifier")


def _inside(node: tree_sitter.Node, types: tuple[str, ...]) -> bool:
    parent = node.parent
    while parent is not None:
        if parent.type in types:
            return True
        if parent.type == "function_definition":
            return False
        parent = parent.parent
    return False


def _ancestor_is_function(node: tree_sitter.Node) -> bool:
    parent = node.parent
    while parent is not None:
        if parent.type == "function_definition":
            return True
        parent = parent.parent
    return False


def _mentions_thread_x(node: tree_sitter.Node) -> bool:
    if node.type == "field_expression":
        arg, fld = node.child_by_field_name("argument"), node.child_by_field_name("field")
        if arg is not None and fld is not None and _text(arg) == "threadIdx" and _text(fld) == "x":
            return True
    return any(_mentions_thread_x(c) for c in node.children)


def _strided(index: tree_sitter.Node, strided_vars: set[str]) -> bool:
    """An index like ``threadIdx.x * n`` (directly or through a local variable):
    neighbouring threads touch addresses n apart."""
    stack = [index]
    while stack:
        node = stack.pop()
        if node.type == "identifier" and _text(node) in strided_vars:
            return True
        if node.type == "binary_expression" and node.child_by_field_name("operator") is not None:
            op = _text(node.child_by_field_name("operator"))
            if op == "*" and any(
                _mentions_thread_x(node.child_by_field_name(side)) for side in ("left", "right")
            ):
                return True
        stack.extend(node.children)
    return False


def _strided_variables(root: tree_sitter.Node) -> set[str]:
    """Locals initialised from a thread-strided expression, e.g. ``int base = threadIdx.x * 4``."""
    names: set[str] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        stack.extend(node.children)
        if node.type == "init_declarator":
            target, value = (
                node.child_by_field_name("declarator"),
                node.child_by_field_name("value"),
            )
            if target is not None and value is not None and _strided(value, set()):
                names.add(_text(target))
    return names


def features(code: str) -> Features:
    """Measure the technique features of a kernel listing."""
    tree = parse(code)
    found = Features()
    strided_vars = _strided_variables(tree.root_node)
    stack = [tree.root_node]
    while stack:
        node = stack.pop()
        stack.extend(node.children)
        kind = node.type
        if kind == "declaration":
            if _has_qualifier(node, "__shared__"):
                found.shared_decls += 1
            elif _has_qualifier(node, "__constant__"):
                found.constant_decls += 1
            elif _ancestor_is_function(node):
                found.local_arrays += sum(
                    1 for c in node.named_children if c.type == "array_declarator"
                )
            type_node = node.child_by_field_name("type")
            if type_node is not None and type_node.type == "template_type":
                name = type_node.child_by_field_name("name")
                if name is not None and _text(name) in ("texture", "surface"):
                    found.texture_uses += 1
        elif kind == "preproc_call":
            directive = node.child_by_field_name("directive")
            argument = node.child_by_field_name("argument")
            if (
                directive is not None
                and _text(directive) == "#pragma"
                and argument is not None
                and _text(argument).strip().startswith("unroll")
            ):
                found.unroll_pragmas += 1
        elif kind == "call_expression":
            fn = node.child_by_field_name("function")
            name = _text(fn) if fn is not None else ""
            if name in _TEXTURE_CALLS:
                found.texture_uses += 1
            elif name == "__ldg":
                found.ldg_calls += 1
            elif name.startswith(_WARP_PREFIXES):
                found.warp_calls += 1
            elif name in _FAST_MATH:
                found.fast_math_calls += 1
            elif name == "__syncthreads" and _inside(node, _LOOPS):
                found.tiled_syncs += 1
        elif kind == "subscript_expression":
            indices = node.child_by_field_name("indices")
            if indices is not None and _strided(indices, strided_vars):
                found.strided_accesses += 1
        elif kind == "field_expression":
            arg, fld = node.child_by_field_name("argument"), node.child_by_field_name("field")
            if arg is not None and fld is not None and _text(arg) in _BUILTIN_INDEX:
                dim = f"{_text(arg)}.{_text(fld)}"
                if dim.endswith((".y", ".z")) or dim.startswith("gridDim"):
                    found.organization.add(dim)
        elif kind == "launch_bounds":
            found.organization.add("__launch_bounds__")
    if found.shared_decls == 0:
        found.tiled_syncs = 0
    return found


def differing(slow: Features, fast: Features) -> list[str]:
    """Techniques in which the fast kernel differs from the slow one, in a fixed order."""
    changed = slow.uses() ^ fast.uses()
    if fast.strided_accesses < slow.strided_accesses:
        changed.add("coalescing")
    if slow.organization != fast.organization:
        changed.add("thread_organization")
    for name, slow_n, fast_n in (
        ("unrolling", slow.unroll_pragmas, fast.unroll_pragmas),
        ("shared_memory", slow.shared_decls, fast.shared_decls),
        ("register_blocking", slow.local_arrays, fast.local_arrays),
    ):
        if fast_n > slow_n:
            changed.add(name)
    return [t for t in TECHNIQUES if t in changed]


def describe(techniques: list[str]) -> str:
    """One sentence for the record's description."""
    if not techniques:
        return "Restructured kernel code (no listed technique differs)."
    return "Optimizations: " + "; ".join(DESCRIPTIONS[t] for t in techniques) + "."
