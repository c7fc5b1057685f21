"""Parse CUDA sources with tree-sitter's CUDA grammar and isolate the device-side code.

A parse tree, not regular expressions, decides what is a kernel: ``__global__`` and
``__device__`` functions (templates included), ``__shared__``, ``__constant__`` and
``__device__`` variables, ``texture<>``/``surface<>`` references, plus the macros and
types those units refer to, so an extracted kernel still reads (and compiles) on its own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

import tree_sitter
import tree_sitter_cuda

FUNCTION_QUALIFIERS = ("__global__", "__device__")
VARIABLE_QUALIFIERS = {
    "__shared__": "shared",
    "__constant__": "constant",
    "__device__": "device_var",
    "__managed__": "device_var",
}
TEXTURE_TYPES = ("texture", "surface")
# Containers whose children are still at file scope for our purposes.
_TRANSPARENT = {
    "translation_unit",
    "preproc_if",
    "preproc_ifdef",
    "preproc_else",
    "preproc_elif",
    "preproc_elifdef",
    "linkage_specification",
    "declaration_list",
    "namespace_definition",
}
_TYPE_NODES = ("struct_specifier", "class_specifier", "enum_specifier", "union_specifier")
_WORD = re.compile(r"[A-Za-z_]\w*")
# Only to name a function inside an ERROR node in the message; the tree decides it is broken.
_BROKEN_FUNCTION = re.compile(r"(__global__|__device__)[^;{]*?(\w+)\s*\(")


@cache
def _parser() -> tree_sitter.Parser:
    return tree_sitter.Parser(tree_sitter.Language(tree_sitter_cuda.language()))


def parse(source: str) -> tree_sitter.Tree:
    return _parser().parse(source.encode())


@dataclass(frozen=True)
class Unit:
    """One device-side piece of a file, in source order."""

    kind: str  # global | device | shared | constant | device_var | texture | macro | type
    name: str
    text: str
    line: int  # 1-based
    broken: bool  # the parse tree has ERROR/MISSING nodes inside this unit

    @property
    def is_code(self) -> bool:
        """Device code proper; macros and types are context carried along with it."""
        return self.kind not in ("macro", "type")


@dataclass
class DeviceCode:
    """What ``isolate`` found in one file."""

    units: list[Unit]
    includes: list[str]  # the file's top-level #include lines, for compile checks
    code_chars: int  # non-blank, non-comment characters of the whole file
    device_chars: int  # the same count over device code units

    @property
    def device_fraction(self) -> float:
        return self.device_chars / self.code_chars if self.code_chars else 0.0

    @property
    def kernel_names(self) -> list[str]:
        return [u.name for u in self.units if u.kind == "global"]

    @property
    def has_device_code(self) -> bool:
        return any(u.kind in ("global", "device") for u in self.units)

    @property
    def broken_units(self) -> list[Unit]:
        return [u for u in self.units if u.broken and u.is_code]

    def text(self) -> str:
        """The units joined in source order: a self-contained kernel listing."""
        parts: list[str] = []
        for prev, unit in zip([None, *self.units], self.units, strict=False):
            adjacent_macros = prev is not None and prev.kind == unit.kind == "macro"
            parts.append(("\n" if adjacent_macros else "\n\n") + unit.text.strip())
        return "".join(parts).strip() + "\n"


def _node_text(node: tree_sitter.Node) -> str:
    return node.text.decode(errors="replace")


def _function_of(node: tree_sitter.Node) -> tree_sitter.Node | None:
    if node.type == "function_definition":
        return node
    if node.type == "template_declaration":
        for child in node.named_children:
            found = _function_of(child)
            if found is not None:
                return found
    return None


def _function_kind(fn: tree_sitter.Node) -> str | None:
    kinds = {c.type for c in fn.children}
    if "__global__" in kinds:
        return "global"
    if "__device__" in kinds:
        return "device"
    return None


def _declarator_name(node: tree_sitter.Node) -> str:
    """Innermost identifier of a (function/array/pointer/init) declarator."""
    while node is not None:
        if node.type in ("identifier", "field_identifier", "type_identifier"):
            return _node_text(node)
        if node.type in ("qualified_identifier", "destructor_name", "operator_name"):
            return _node_text(node)
        nxt = node.child_by_field_name("declarator") or node.child_by_field_name("name")
        if nxt is None:
            named = [c for c in node.named_children if c.type != "type_qualifier"]
            nxt = named[0] if named else None
        node = nxt
    return ""


def _variable_kind(decl: tree_sitter.Node) -> str | None:
    for child in decl.children:
        text = _node_text(child) if child.type in ("type_qualifier", "__device__") else ""
        if text in VARIABLE_QUALIFIERS:
            return VARIABLE_QUALIFIERS[text]
    type_node = decl.child_by_field_name("type")
    if type_node is not None and type_node.type == "template_type":
        name = type_node.child_by_field_name("name")
        if name is not None and _node_text(name) in TEXTURE_TYPES:
            return "texture"
    return None


def _type_name(node: tree_sitter.Node) -> str | None:
    """Name a file-scope struct/class/enum/typedef defines, if the node defines one."""
    if node.type == "type_definition":
        decl = node.child_by_field_name("declarator")
        return _node_text(decl) if decl is not None else None
    spec = node
    if node.type == "declaration":
        spec = node.child_by_field_name("type")
    if spec is not None and spec.type in _TYPE_NODES and spec.child_by_field_name("body"):
        name = spec.child_by_field_name("name")
        return _node_text(name) if name is not None else None
    return None


def _count_code_chars(node: tree_sitter.Node, source: bytes) -> int:
    """Non-whitespace characters in a node, comments excluded."""
    text = source[node.start_byte : node.end_byte]
    total = len(re.sub(rb"\s+", b"", text))
    for comment in _descendants(node, "comment"):
        total -= len(re.sub(rb"\s+", b"", source[comment.start_byte : comment.end_byte]))
    return total


def _descendants(node: tree_sitter.Node, node_type: str) -> list[tree_sitter.Node]:
    found, stack = [], [node]
    while stack:
        current = stack.pop()
        if current.type == node_type:
            found.append(current)
        stack.extend(current.children)
    return found


def _words(text: str) -> set[str]:
    return set(_WORD.findall(text))


def isolate(source: str) -> DeviceCode:
    """Split one file into device-side units (kept) and host code (dropped)."""
    tree = parse(source)
    raw = source.encode()
    code_units: list[tuple[int, Unit]] = []
    context: list[tuple[int, Unit, set[str]]] = []  # macros and types, kept only if referenced
    includes: list[str] = []
    device_chars = 0

    def visit(node: tree_sitter.Node) -> None:
        nonlocal device_chars
        for child in node.children:
            if child.type in _TRANSPARENT:
                visit(child)
                continue
            line = child.start_point[0] + 1
            fn = _function_of(child)
            if fn is not None:
                kind = _function_kind(fn)
                if kind is not None:
                    name = _declarator_name(fn.child_by_field_name("declarator"))
                    unit = Unit(kind, name, _node_text(child), line, child.has_error)
                    code_units.append((child.start_byte, unit))
                    device_chars += _count_code_chars(child, raw)
                continue
            if child.type == "declaration":
                kind = _variable_kind(child)
                if kind is not None:
                    name = _declarator_name(child.child_by_field_name("declarator"))
                    unit = Unit(kind, name, _node_text(child), line, child.has_error)
                    code_units.append((child.start_byte, unit))
                    device_chars += _count_code_chars(child, raw)
                    continue
            if child.type in ("preproc_def", "preproc_function_def"):
                name = _node_text(child.child_by_field_name("name"))
                value = child.child_by_field_name("value")
                body = _node_text(value) if value is not None else ""
                unit = Unit("macro", name, _node_text(child).rstrip("\n"), line, child.has_error)
                context.append((child.start_byte, unit, _words(body)))
                continue
            if child.type == "preproc_include":
                includes.append(_node_text(child).strip())
                continue
            if child.type == "ERROR":
                broken = _BROKEN_FUNCTION.search(_node_text(child))
                if broken is not None:
                    kind = "global" if broken.group(1) == "__global__" else "device"
                    code_units.append(
                        (
                            child.start_byte,
                            Unit(kind, broken.group(2), _node_text(child), line, True),
                        )
                    )
                continue
            type_name = _type_name(child)
            if type_name:
                text = _node_text(child)
                unit = Unit("type", type_name, text, line, child.has_error)
                context.append((child.start_byte, unit, _words(text) - {type_name}))

    visit(tree.root_node)
    needed: set[str] = set()
    for _, unit in code_units:
        needed |= _words(unit.text)
    kept: dict[int, Unit] = {}
    changed = True
    while changed:  # macros and types may refer to further macros and types
        changed = False
        for start, unit, refs in context:
            if start not in kept and unit.name in needed:
                kept[start] = unit
                needed |= refs
                changed = True
    ordered = sorted([*code_units, *kept.items()], key=lambda item: item[0])
    units = [unit for _, unit in ordered]
    return DeviceCode(
        units=units,
        includes=includes,
        code_chars=_count_code_chars(tree.root_node, raw),
        device_chars=device_chars,
    )
