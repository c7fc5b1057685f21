"""Source-to-source C++ transformations that the offline policy composes.

Each transformation parses the program with tree-sitter, looks for one pattern and
returns the rewritten source, or ``None`` when the pattern is absent or the rewrite
cannot be shown safe by these local checks. The checks are conservative on purpose:
a declined rewrite costs a missed speedup, a wrong one costs an evaluation. They are
syntactic, so a program that defeats them (aliasing through pointers, macros) can
still be miscompiled; the evaluator's tests are the final judge.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import tree_sitter_cpp
from tree_sitter import Language, Node, Parser

_PARSER = Parser(Language(tree_sitter_cpp.language()))

# Functions that only read their arguments (values or iterators). Calls to anything else
# may modify what is passed (by reference, pointer or iterator).
READONLY_FUNCS = frozenset(
    {
        "lower_bound", "upper_bound", "binary_search", "equal_range", "accumulate",
        "count", "count_if", "find", "find_if", "max_element", "min_element",
        "minmax_element", "all_of", "any_of", "none_of", "distance", "equal", "is_sorted",
        "inner_product", "strlen", "strcmp", "strncmp", "strchr", "strstr", "printf",
        "puts", "abs", "fabs", "sqrt", "pow", "min", "max", "to_string", "stoi", "stol",
        "stoll", "atoi", "atol", "atoll", "hypot", "exp", "log", "log2", "log10", "floor",
        "ceil", "round", "static_cast", "toupper", "tolower", "isdigit", "isalpha",
    }
)  # fmt: skip
# Member functions that do not modify their object (const overloads exist for all).
READONLY_METHODS = frozenset(
    {
        "size", "empty", "length", "at", "front", "back", "find", "count", "contains",
        "begin", "end", "cbegin", "cend", "rbegin", "rend", "substr", "c_str", "data",
        "compare", "lower_bound", "upper_bound", "equal_range",
    }
)  # fmt: skip
# Of those, the ones returning an iterator or pointer through which a caller could write.
_ITERATOR_METHODS = frozenset(
    {"begin", "end", "rbegin", "rend", "data", "find", "lower_bound", "upper_bound", "equal_range"}
)
# Pure functions whose calls may be computed once before a loop when their arguments are invariant.
_HOISTABLE_FUNCS = frozenset(
    {"strlen", "pow", "sqrt", "exp", "log", "log2", "log10", "cbrt", "hypot"}
)
_HOISTABLE_METHODS = frozenset({"size", "length"})
_CXX_STDIO_CALLS = frozenset(
    {"printf", "scanf", "puts", "putchar", "getchar", "gets", "fgets", "fputs", "fread",
     "fwrite", "fprintf", "fscanf", "getc", "putc", "fgetc", "fputc", "getchar_unlocked",
     "putchar_unlocked", "fflush"}
)  # fmt: skip
_INTEGRAL_WORDS = frozenset(
    {"int", "long", "short", "unsigned", "signed", "char", "size_t", "uint64_t", "int64_t",
     "uint32_t", "int32_t", "uint16_t", "int16_t", "uint8_t", "int8_t", "const", "std"}
)  # fmt: skip
_HASHABLE_KEYS = _INTEGRAL_WORDS | {"string", "bool"}
_ORDERED_ONLY_METHODS = frozenset(
    {"begin", "rbegin", "cbegin", "crbegin", "lower_bound", "upper_bound", "equal_range"}
)
_BIG_CONTAINERS = frozenset(
    {"vector", "string", "map", "set", "unordered_map", "unordered_set", "deque", "multiset",
     "multimap", "basic_string", "list"}
)  # fmt: skip
_REDUCTION_OPS = frozenset({"+=", "-=", "^=", "|=", "&="})


class CppSource:
    """A parsed program plus helpers over its syntax tree (tree-sitter works on bytes)."""

    def __init__(self, text: str):
        self.text = text
        self.data = text.encode()
        self.root = _PARSER.parse(self.data).root_node

    def nodes(self, *types: str, under: Node | None = None) -> Iterator[Node]:
        """Nodes in source order, optionally only of the given types."""
        stack = [under or self.root]
        while stack:
            node = stack.pop()
            if not types or node.type in types:
                yield node
            stack.extend(reversed(node.children))

    def identifiers(self, name: str, under: Node | None = None) -> list[Node]:
        return [n for n in self.nodes("identifier", under=under) if _text(n) == name]

    def declared_type(self, name: str) -> str | None:
        """Type text of the first declaration of ``name`` (array dimensions dropped)."""
        for node in self.nodes("declaration", "parameter_declaration", "field_declaration"):
            type_node = node.child_by_field_name("type")
            if type_node is None:
                continue
            for declarator in node.children_by_field_name("declarator"):
                if _declared_name(declarator) == name:
                    return _text(type_node)
        return None

    def edit(self, edits: list[tuple[int, int, str]]) -> str:
        """Apply (start_byte, end_byte, replacement) edits; they must not overlap."""
        data = self.data
        last = len(data) + 1
        for start, end, new in sorted(edits, key=lambda e: e[0], reverse=True):
            if end > last:
                raise ValueError(f"overlapping edits at byte {start}")
            data = data[:start] + new.encode() + data[end:]
            last = start
        return data.decode()

    def indent_of(self, node: Node) -> str:
        line_start = self.data.rfind(b"\n", 0, node.start_byte) + 1
        prefix = self.data[line_start : node.start_byte].decode()
        return prefix if prefix.strip() == "" else ""


def _text(node: Node | None) -> str:
    return node.text.decode() if node is not None and node.text is not None else ""


def _declared_name(declarator: Node) -> str | None:
    """The identifier a declarator introduces (through init/array/reference/pointer wrappers)."""
    node: Node | None = declarator
    while node is not None and node.type != "identifier":
        inner = node.child_by_field_name("declarator")
        if inner is None:
            inner = next(
                (
                    c
                    for c in node.named_children
                    if "declarator" in c.type or c.type == "identifier"
                ),
                None,
            )
        node = inner
    return _text(node) if node is not None else None


def _function_name(call: Node) -> str:
    fn = call.child_by_field_name("function")
    while fn is not None and fn.type in ("qualified_identifier", "template_function"):
        fn = fn.child_by_field_name("name")
    return _text(fn)


def _unparen(node: Node) -> tuple[Node, Node]:
    """Climb out of parentheses: (outermost expression standing for node, its parent)."""
    parent = node.parent
    while parent is not None and parent.type == "parenthesized_expression":
        node, parent = parent, parent.parent
    assert parent is not None  # an expression always has a parent
    return node, parent


def is_written(node: Node) -> bool:
    """Whether the object named by ``node`` may be modified, or escape by reference, here.

    Unknown contexts count as writes, so callers err on the side of not transforming.
    """
    node, parent = _unparen(node)
    kind = parent.type
    if kind == "subscript_expression":
        return parent.child_by_field_name("argument") == node and is_written(parent)
    if kind == "assignment_expression":
        return parent.child_by_field_name("left") == node
    if kind == "update_expression":
        return True
    if kind == "pointer_expression":
        return _text(parent.child_by_field_name("operator")) == "&"
    if kind == "field_expression":
        if parent.child_by_field_name("argument") != node:
            return False
        call = parent.parent
        if (
            call is None
            or call.type != "call_expression"
            or call.child_by_field_name("function") != parent
        ):
            return is_written(parent)  # member access: a write to the member writes the object
        method = _text(parent.child_by_field_name("field"))
        if method not in READONLY_METHODS:
            return True
        return method in _ITERATOR_METHODS and _iterator_escapes(call)
    if kind == "argument_list":
        call = parent.parent
        return (
            call is None
            or call.type != "call_expression"
            or _function_name(call) not in READONLY_FUNCS
        )
    if kind == "binary_expression":
        return (
            _text(parent.child_by_field_name("operator")) == ">>"
            and parent.child_by_field_name("right") == node
        )
    if kind == "for_range_loop":
        if parent.child_by_field_name("right") != node:
            return True
        declarator = parent.child_by_field_name("declarator")
        const = any(c.type == "type_qualifier" and _text(c) == "const" for c in parent.children)
        return declarator is not None and declarator.type == "reference_declarator" and not const
    if kind == "init_declarator":
        declarator = parent.child_by_field_name("declarator")
        return declarator is not None and declarator.type in (
            "reference_declarator",
            "pointer_declarator",
        )
    return kind not in (
        "condition_clause", "expression_statement", "conditional_expression", "cast_expression",
        "unary_expression", "subscript_argument_list", "return_statement", "comma_expression",
    )  # fmt: skip


def _iterator_escapes(call: Node) -> bool:
    """An iterator from ``call`` is only compared or handed to a read-only algorithm."""
    _, parent = _unparen(call)
    if parent.type == "binary_expression":
        return _text(parent.child_by_field_name("operator")) not in (
            "==",
            "!=",
            "-",
            "<",
            ">",
            "<=",
            ">=",
        )
    if parent.type == "argument_list":
        outer = parent.parent
        return outer is None or _function_name(outer) not in READONLY_FUNCS
    return True


def _is_integral(type_text: str | None) -> bool:
    if not type_text:
        return False
    inner = type_text
    while True:
        m = re.fullmatch(
            r"\s*(?:const\s+)?(?:std::)?(?:vector|array)\s*<\s*(.*?)\s*(?:,\s*\w+\s*)?>\s*", inner
        )
        if not m:
            break
        inner = m.group(1)
    words = re.findall(r"[A-Za-z_]\w*", inner)
    return bool(words) and set(words) <= _INTEGRAL_WORDS


@dataclass(frozen=True)
class Transform:
    name: str
    description: str  # what it does, shown in proposal notes
    # diagnoses it addresses: io | algorithm | memory_layout | constant_factor | compute
    targets: frozenset[str]
    apply: Callable[[str], str | None]


# ---------------------------------------------------------------- fast I/O
def fast_io(text: str) -> str | None:
    """Unsync iostreams from C stdio and untie cin from cout, when only iostreams are used."""
    src = CppSource(text)
    names = {_text(n) for n in src.nodes("identifier")}
    if not names & {"cin", "cout"} or "sync_with_stdio" in src.text:
        return None
    if any(_function_name(c) in _CXX_STDIO_CALLS for c in src.nodes("call_expression")):
        return None  # mixing stdio with unsynced iostreams reorders output
    main = _main_body(src)
    if main is None:
        return None
    brace = main.children[0]
    indent = _body_indent(src, main)
    insert = f"\n{indent}std::ios::sync_with_stdio(false);\n{indent}std::cin.tie(nullptr);"
    return src.edit([(brace.end_byte, brace.end_byte, insert)])


def _main_body(src: CppSource) -> Node | None:
    for fn in src.nodes("function_definition"):
        declarator = fn.child_by_field_name("declarator")
        if declarator is not None and _text(declarator.child_by_field_name("declarator")) == "main":
            return fn.child_by_field_name("body")
    return None


def _body_indent(src: CppSource, body: Node) -> str:
    first = next((c for c in body.named_children if c.type != "comment"), None)
    return src.indent_of(first) if first is not None and src.indent_of(first) else "    "


# ---------------------------------------------------------------- endl
def endl_to_newline(text: str) -> str | None:
    """``<< endl`` flushes on every line; ``<< '\\n'`` leaves flushing to the buffer."""
    src = CppSource(text)
    edits = []
    for node in src.nodes("identifier", "qualified_identifier"):
        if _text(node) not in ("endl", "std::endl"):
            continue
        parent = node.parent
        if (
            parent is not None
            and parent.type == "binary_expression"
            and _text(parent.child_by_field_name("operator")) == "<<"
            and parent.child_by_field_name("right") == node
        ):
            edits.append((node.start_byte, node.end_byte, "'\\n'"))
    return src.edit(edits) if edits else None


# ---------------------------------------------------------------- reserve
@dataclass(frozen=True)
class _CountedLoop:
    var: str
    lower: Node
    upper: Node
    inclusive: bool


def _counted_loop(loop: Node) -> _CountedLoop | None:
    """``for (int i = A; i < B; i++)`` (or ``<=``, ``++i``, ``i += 1``) with a declared counter."""
    init = loop.child_by_field_name("initializer")
    cond = loop.child_by_field_name("condition")
    update = loop.child_by_field_name("update")
    if init is None or cond is None or update is None or init.type != "declaration":
        return None
    declarators = init.children_by_field_name("declarator")
    if len(declarators) != 1 or declarators[0].type != "init_declarator":
        return None
    var = _declared_name(declarators[0])
    lower = declarators[0].child_by_field_name("value")
    if var is None or cond.type != "binary_expression":
        return None
    if _text(cond.child_by_field_name("left")) != var:
        return None
    op = _text(cond.child_by_field_name("operator"))
    if op not in ("<", "<="):
        return None
    if not (
        (update.type == "update_expression" and _text(update).replace(var, "") == "++")
        or (
            update.type == "assignment_expression"
            and re.fullmatch(rf"{var}\s*\+=\s*1", _text(update))
        )
    ):
        return None
    upper = cond.child_by_field_name("right")
    if lower is None or upper is None:
        return None
    return _CountedLoop(var, lower, upper, op == "<=")


def _simple_expr(node: Node) -> bool:
    """Identifiers, literals, arithmetic and ``x.size()``: cheap, side-effect free to re-evaluate."""
    if node.type in ("identifier", "number_literal"):
        return True
    if node.type == "cast_expression":
        value = node.child_by_field_name("value")
        return value is not None and _simple_expr(value)
    if node.type in ("binary_expression", "parenthesized_expression", "unary_expression"):
        op = node.child_by_field_name("operator")
        if op is not None and _text(op) not in ("+", "-", "*", "/"):
            return False
        return all(_simple_expr(c) for c in node.named_children)
    if node.type == "call_expression":
        fn = node.child_by_field_name("function")
        args = node.child_by_field_name("arguments")
        return (
            fn is not None
            and fn.type == "field_expression"
            and _text(fn.child_by_field_name("field")) in _HOISTABLE_METHODS
            and fn.child_by_field_name("argument").type == "identifier"
            and args is not None
            and args.named_child_count == 0
        )
    return False


def _modified_in(src: CppSource, names: set[str], region: Node) -> bool:
    return any(is_written(n) for name in names for n in src.identifiers(name, under=region))


def _names_in(src: CppSource, node: Node) -> set[str]:
    return {_text(n) for n in src.nodes("identifier", under=node)}


def reserve_vectors(text: str) -> str | None:
    """Reserve a vector's final size before a counted loop that push_backs into it."""
    src = CppSource(text)
    edits = []
    done: set[tuple[str, int]] = set()
    for loop in src.nodes("for_statement"):
        counted = _counted_loop(loop)
        if counted is None or loop.parent is None or loop.parent.type != "compound_statement":
            continue
        if not (_simple_expr(counted.lower) and _simple_expr(counted.upper)):
            continue
        bound_names = _names_in(src, counted.lower) | _names_in(src, counted.upper)
        body = loop.child_by_field_name("body")
        if body is None or counted.var in bound_names or _modified_in(src, bound_names, body):
            continue
        for call in src.nodes("call_expression", under=body):
            fn = call.child_by_field_name("function")
            if fn is None or fn.type != "field_expression":
                continue
            if _text(fn.child_by_field_name("field")) not in ("push_back", "emplace_back"):
                continue
            target = fn.child_by_field_name("argument")
            name = _text(target)
            if target.type != "identifier" or (name, loop.start_byte) in done:
                continue
            if _inside_inner_loop(call, loop) or not _vector_in_scope(src, name, loop):
                continue
            if f"{name}.reserve" in src.text:
                continue
            done.add((name, loop.start_byte))
            lo, hi = _text(counted.lower), _text(counted.upper)
            span = f"{hi}" if lo == "0" else f"({hi}) - ({lo})"
            count = f"{span} + 1" if counted.inclusive else span
            check = ">=" if counted.inclusive else ">"
            indent = src.indent_of(loop)
            line = f"if ({span} {check} 0) {name}.reserve({name}.size() + static_cast<size_t>({count}));\n{indent}"
            edits.append((loop.start_byte, loop.start_byte, line))
    return src.edit(edits) if edits else None


def _inside_inner_loop(node: Node, loop: Node) -> bool:
    parent = node.parent
    while parent is not None and parent != loop:
        if parent.type in (
            "for_statement",
            "while_statement",
            "do_statement",
            "for_range_loop",
            "lambda_expression",
        ):
            return True
        parent = parent.parent
    return False


def _vector_in_scope(src: CppSource, name: str, loop: Node) -> bool:
    """A vector declared before ``loop`` in a block that encloses it (or at file scope)."""
    for decl in src.nodes("declaration"):
        if decl.start_byte >= loop.start_byte:
            break
        if not any(_declared_name(d) == name for d in decl.children_by_field_name("declarator")):
            continue
        if "vector" not in _text(decl.child_by_field_name("type")):
            continue
        scope = decl.parent
        if scope is not None and (
            scope.type == "translation_unit"
            or (scope.start_byte <= loop.start_byte and loop.end_byte <= scope.end_byte)
        ):
            return True
    return False


# ---------------------------------------------------------------- const reference parameters
def const_ref_params(text: str) -> str | None:
    """Pass large containers that a function only reads by const reference instead of by value."""
    src = CppSource(text)
    global_names = {
        _declared_name(d)
        for decl in src.root.named_children
        if decl.type == "declaration"
        for d in decl.children_by_field_name("declarator")
    }
    edits = []
    for fn in src.nodes("function_definition"):
        declarator = fn.child_by_field_name("declarator")
        body = fn.child_by_field_name("body")
        if declarator is None or body is None or declarator.type != "function_declarator":
            continue
        params = declarator.child_by_field_name("parameters")
        if params is None:
            continue
        param_nodes = [p for p in params.named_children if p.type == "parameter_declaration"]
        if any(_by_mutable_reference(p) for p in param_nodes):
            continue  # another parameter may alias the argument and change it under us
        if _modified_in(src, {g for g in global_names if g}, body):
            continue  # the argument may be a global that the body changes
        for param in param_nodes:
            type_node = param.child_by_field_name("type")
            pdecl = param.child_by_field_name("declarator")
            if type_node is None or pdecl is None or pdecl.type != "identifier":
                continue
            base = _template_name(type_node)
            if base not in _BIG_CONTAINERS:
                continue
            name = _text(pdecl)
            uses = src.identifiers(name, under=body)
            if any(is_written(u) or _returned(u) for u in uses):
                continue
            if base in ("map", "unordered_map") and any(_subscripted(u) for u in uses):
                continue  # operator[] inserts, so it has no const overload
            if _redeclared(src, name, body):
                continue
            const = any(c.type == "type_qualifier" and _text(c) == "const" for c in param.children)
            if not const:
                edits.append((param.start_byte, param.start_byte, "const "))
            edits.append((type_node.end_byte, type_node.end_byte, "&"))
    return src.edit(edits) if edits else None


def _template_name(type_node: Node) -> str:
    node = type_node
    while node.type == "qualified_identifier":
        node = node.child_by_field_name("name")
    if node.type == "template_type":
        return _text(node.child_by_field_name("name"))
    return _text(node)


def _by_mutable_reference(param: Node) -> bool:
    declarator = param.child_by_field_name("declarator")
    const = any(c.type == "type_qualifier" and _text(c) == "const" for c in param.children)
    return (
        declarator is not None
        and declarator.type in ("reference_declarator", "pointer_declarator")
        and not const
    )


def _returned(node: Node) -> bool:
    node, parent = _unparen(node)
    return parent.type == "return_statement"


def _subscripted(node: Node) -> bool:
    node, parent = _unparen(node)
    return parent.type == "subscript_expression" and parent.child_by_field_name("argument") == node


def _redeclared(src: CppSource, name: str, body: Node) -> bool:
    return any(
        _declared_name(d) == name
        for decl in src.nodes("declaration", under=body)
        for d in decl.children_by_field_name("declarator")
    )


# ---------------------------------------------------------------- hoisting
def hoist_invariant_calls(text: str) -> str | None:
    """Compute ``strlen(s)``, ``v.size()``, ``pow(x, k)``... once before a loop that never changes their inputs."""
    src = CppSource(text)
    edits: list[tuple[int, int, str]] = []
    taken: set[str] = set()
    touched: list[Node] = []
    for loop in src.nodes("for_statement", "while_statement"):
        if loop.parent is None or loop.parent.type != "compound_statement":
            continue
        if any(
            t.start_byte <= loop.start_byte < t.end_byte
            or loop.start_byte <= t.start_byte < loop.end_byte
            for t in touched
        ):
            continue  # one hoisting per loop nest per pass keeps the edits disjoint
        groups = _hoistable_calls(src, loop)
        if not groups:
            continue
        touched.append(loop)
        indent = src.indent_of(loop)
        lines = ""
        for call_text, calls in groups.items():
            name = _fresh(src, taken)
            lines += f"const auto {name} = {call_text};\n{indent}"
            edits.extend((c.start_byte, c.end_byte, name) for c in calls)
        edits.append((loop.start_byte, loop.start_byte, lines))
    return src.edit(edits) if edits else None


def _fresh(src: CppSource, taken: set[str]) -> str:
    i = 0
    existing = {_text(n) for n in src.nodes("identifier")}
    while f"mc_hoisted{i}" in existing | taken:
        i += 1
    taken.add(f"mc_hoisted{i}")
    return f"mc_hoisted{i}"


def _hoistable_calls(src: CppSource, loop: Node) -> dict[str, list[Node]]:
    """Invariant pure calls in a loop's condition and body, grouped by their text."""
    declared_inside = {
        _declared_name(d)
        for decl in src.nodes("declaration", "for_range_loop", under=loop)
        for d in decl.children_by_field_name("declarator")
    }
    calls_user_code = any(
        _function_name(c) not in READONLY_FUNCS | _HOISTABLE_FUNCS
        and (c.child_by_field_name("function") or c).type != "field_expression"
        for c in src.nodes("call_expression", under=loop)
    )
    condition = loop.child_by_field_name("condition")
    groups: dict[str, list[Node]] = {}
    for call in src.nodes("call_expression", under=loop):
        if not _pure_call(call):
            continue
        in_condition = condition is not None and (
            condition.start_byte <= call.start_byte and call.end_byte <= condition.end_byte
        )
        if _function_name(call) == "strlen" and not in_condition:
            continue  # the loop may guard it (a null pointer); the condition runs at least once
        names = _names_in(src, call) - {_function_name(call)}
        fn = call.child_by_field_name("function")
        if fn is not None and fn.type == "field_expression":
            names.add(_text(fn.child_by_field_name("argument")))
        if not names or names & declared_inside:
            continue
        if _modified_in(src, names, loop):
            continue
        if calls_user_code and any(
            src.declared_type(n) is None or _is_global(src, n) for n in names
        ):
            continue  # a called function might change a global input
        if _enclosing_call_inside(call, loop):
            continue
        groups.setdefault(_text(call), []).append(call)
    return groups


def _pure_call(call: Node) -> bool:
    fn = call.child_by_field_name("function")
    args = call.child_by_field_name("arguments")
    if fn is None or args is None:
        return False
    if fn.type == "field_expression":
        return (
            _text(fn.child_by_field_name("field")) in _HOISTABLE_METHODS
            and fn.child_by_field_name("argument").type == "identifier"
            and args.named_child_count == 0
        )
    if _function_name(call) not in _HOISTABLE_FUNCS or fn.type == "template_function":
        return False
    return all(_simple_expr(a) for a in args.named_children)


def _enclosing_call_inside(call: Node, loop: Node) -> bool:
    """Hoist the outermost pure call only (``sqrt(pow(x, 2))`` as one)."""
    parent = call.parent
    while parent is not None and parent != loop:
        if parent.type == "call_expression" and _pure_call(parent):
            return True
        parent = parent.parent
    return False


def _is_global(src: CppSource, name: str) -> bool:
    return any(
        _declared_name(d) == name
        for decl in src.root.named_children
        if decl.type == "declaration"
        for d in decl.children_by_field_name("declarator")
    )


# ---------------------------------------------------------------- loop interchange
def loop_interchange(text: str) -> str | None:
    """Swap two perfectly nested counted loops when the inner one strides across rows.

    Legal when the body is a list of assignments whose targets are indexed by the loop
    counters (each element then sees its updates in the same order) or are integer
    reductions (order-free), and the body reads no element that it also writes elsewhere.
    """
    src = CppSource(text)
    edits = []
    for outer in src.nodes("for_statement"):
        inner = _sole_statement(outer.child_by_field_name("body"))
        if inner is None or inner.type != "for_statement":
            continue
        outer_loop, inner_loop = _counted_loop(outer), _counted_loop(inner)
        if outer_loop is None or inner_loop is None:
            continue
        body = inner.child_by_field_name("body")
        statements = _statements(body)
        if not statements:
            continue
        bounds = (outer_loop.lower, outer_loop.upper, inner_loop.lower, inner_loop.upper)
        if not all(_simple_expr(b) for b in bounds):
            continue  # the swapped headers are evaluated a different number of times
        inner_bounds = _names_in(src, inner_loop.lower) | _names_in(src, inner_loop.upper)
        outer_bounds = _names_in(src, outer_loop.lower) | _names_in(src, outer_loop.upper)
        if outer_loop.var in inner_bounds or inner_loop.var in outer_bounds:
            continue  # triangular nest, or a bound shadowed by the other counter
        if _modified_in(src, inner_bounds | outer_bounds, body):
            continue
        if not _interchange_legal(src, statements, {outer_loop.var, inner_loop.var}):
            continue
        accesses = [n for s in statements for n in _array_accesses(src, s)]
        if _stride_cost(accesses, outer_loop.var) >= _stride_cost(accesses, inner_loop.var):
            continue
        header_o, header_i = _header(outer), _header(inner)
        edits.append((header_o[0], header_o[1], src.data[header_i[0] : header_i[1]].decode()))
        edits.append((header_i[0], header_i[1], src.data[header_o[0] : header_o[1]].decode()))
    return src.edit(edits) if edits else None


def _sole_statement(body: Node | None) -> Node | None:
    if body is None:
        return None
    if body.type != "compound_statement":
        return body
    kids = [c for c in body.named_children if c.type != "comment"]
    return kids[0] if len(kids) == 1 else None


def _statements(body: Node | None) -> list[Node]:
    if body is None:
        return []
    kids = (
        [c for c in body.named_children if c.type != "comment"]
        if body.type == "compound_statement"
        else [body]
    )
    if not kids or any(k.type != "expression_statement" for k in kids):
        return []
    return kids


def _header(loop: Node) -> tuple[int, int]:
    """Byte range of ``(init; cond; update)`` including the parentheses."""
    open_paren = next(c for c in loop.children if c.type == "(")
    close_paren = next(c for c in loop.children if c.type == ")")
    return open_paren.start_byte, close_paren.end_byte


def _array_accesses(src: CppSource, node: Node) -> list[list[str]]:
    """Index expression texts of each outermost subscript chain, outermost index last."""
    out = []
    for sub in src.nodes("subscript_expression", under=node):
        parent = sub.parent
        if (
            parent is not None
            and parent.type == "subscript_expression"
            and parent.child_by_field_name("argument") == sub
        ):
            continue
        indices = []
        cur = sub
        while cur.type == "subscript_expression":
            indices.append(_text(cur.child_by_field_name("indices"))[1:-1].strip())
            cur = cur.child_by_field_name("argument")
        out.append(list(reversed(indices)))
    return out


def _stride_cost(accesses: list[list[str]], var: str) -> int:
    """Accesses that jump a row per iteration of ``var`` minus those that stay contiguous."""
    cost = 0
    for indices in accesses:
        uses = [bool(re.search(rf"\b{re.escape(var)}\b", ix)) for ix in indices]
        if uses and uses[-1]:
            cost -= 1
        elif any(uses):
            cost += 1
    return cost


def _interchange_legal(src: CppSource, statements: list[Node], loop_vars: set[str]) -> bool:
    written: dict[str, str] = {}
    for stmt in statements:
        expr = stmt.named_children[0] if stmt.named_children else None
        if expr is None or expr.type != "assignment_expression":
            return False
        left, right = expr.child_by_field_name("left"), expr.child_by_field_name("right")
        op = _text(expr.child_by_field_name("operator"))
        if left is None or right is None:
            return False
        if any(
            c.type == "call_expression" and not _pure_call(c)
            for c in src.nodes("call_expression", under=right)
        ):
            return False
        if any(
            n.type in ("assignment_expression", "update_expression") for n in src.nodes(under=right)
        ):
            return False
        base = left
        while base.type == "subscript_expression":
            base = base.child_by_field_name("argument")
        if base.type != "identifier":
            return False
        name = _text(base)
        if name in loop_vars or name in written:
            return False
        index_text = _text(left)[len(name) :]
        indexed_by = {v for v in loop_vars if re.search(rf"\b{re.escape(v)}\b", index_text)}
        if not indexed_by:
            # every iteration of both loops updates one element: the new order is only
            # harmless for order-free integer reductions (floating-point sums would round differently)
            if op not in _REDUCTION_OPS or not _is_integral(src.declared_type(name)):
                return False
        elif op != "=" and op not in _REDUCTION_OPS | {"*="}:
            return False
        written[name] = _text(left)
    for stmt in statements:
        right = stmt.named_children[0].child_by_field_name("right")
        for ident in src.nodes("identifier", under=right):
            name = _text(ident)
            if name in loop_vars and is_written(ident):
                return False
            if name in written:
                outer = _subscript_root(ident)
                if _text(outer) != written[name] or written[name] == name:
                    return False  # reads another element (or the accumulator) of what it writes
    return True


def _subscript_root(ident: Node) -> Node:
    """The whole element expression ``a[i][j]`` around the array name ``a``."""
    node = ident
    while (
        node.parent is not None
        and node.parent.type == "subscript_expression"
        and node.parent.child_by_field_name("argument") == node
    ):
        node = node.parent
    return node


# ---------------------------------------------------------------- map -> unordered_map
def map_to_unordered(text: str) -> str | None:
    """Use hash containers for maps and sets that are only looked up, never walked in order."""
    src = CppSource(text)
    edits = []
    headers = set()
    for decl in src.nodes("declaration"):
        type_node = decl.child_by_field_name("type")
        if type_node is None:
            continue
        template = type_node
        while template.type == "qualified_identifier":
            template = template.child_by_field_name("name")
        if template.type != "template_type":
            continue
        kind = _text(template.child_by_field_name("name"))
        if kind not in ("map", "set"):
            continue
        args = [a for a in template.child_by_field_name("arguments").named_children]
        if len(args) != (2 if kind == "map" else 1):
            continue  # a custom comparator has no hash counterpart
        key_words = set(re.findall(r"[A-Za-z_]\w*", _text(args[0])))
        if not key_words or not key_words <= _HASHABLE_KEYS:
            continue
        names = [_declared_name(d) for d in decl.children_by_field_name("declarator")]
        if not names or not all(names) or any(not _lookup_only(src, n) for n in names if n):
            continue
        if _range_iterated(src, set(filter(None, names))):
            continue
        name_node = template.child_by_field_name("name")
        edits.append((name_node.start_byte, name_node.end_byte, f"unordered_{kind}"))
        headers.add(f"unordered_{kind}")
    if not edits:
        return None
    for header in sorted(headers):
        if f"<{header}>" in src.text:
            continue
        includes = list(src.nodes("preproc_include"))
        at = includes[-1].end_byte if includes else 0
        edits.append((at, at, f"#include <{header}>\n"))
    return src.edit(edits)


def _lookup_only(src: CppSource, name: str) -> bool:
    for use in src.identifiers(name):
        node, parent = _unparen(use)
        if parent.type in ("init_declarator", "declaration") and parent.child_by_field_name(
            "declarator"
        ) in (node, use):
            continue  # the declaration itself
        if parent.type == "subscript_expression" and parent.child_by_field_name("argument") == node:
            continue
        if parent.type == "field_expression" and parent.child_by_field_name("argument") == node:
            if _text(parent.child_by_field_name("field")) in _ORDERED_ONLY_METHODS:
                return False
            continue
        return False  # passed, copied, compared or iterated: order may matter
    return True


def _range_iterated(src: CppSource, names: set[str]) -> bool:
    return any(
        _text(loop.child_by_field_name("right")) in names for loop in src.nodes("for_range_loop")
    )


# ---------------------------------------------------------------- target pragmas
def target_pragmas(text: str) -> str | None:
    """Compile the program's own code for AVX2 with loop unrolling (wider vector loops).

    Placed after the includes so library headers keep their default target. AVX2 without
    FMA leaves floating-point results unchanged (no contraction, no reassociation); a CPU
    without AVX2 fails with SIGILL, which the evaluator reports as a runtime error.
    """
    src = CppSource(text)
    if "#pragma GCC" in src.text:
        return None
    includes = list(src.nodes("preproc_include"))
    at = includes[-1].end_byte if includes else 0
    pragmas = '#pragma GCC optimize("unroll-loops")\n#pragma GCC target("avx2")\n'
    if at > 0 and not src.data[:at].endswith(b"\n"):
        pragmas = "\n" + pragmas
    return src.edit([(at, at, pragmas)])


# ---------------------------------------------------------------- s = s + x
def string_append(text: str) -> str | None:
    """``s = s + a + b;`` copies the whole string every time (quadratic in a loop);
    ``(s += a) += b`` appends in place (amortised linear), with the same result."""
    src = CppSource(text)
    edits = []
    for stmt in src.nodes("expression_statement"):
        expr = stmt.named_children[0] if stmt.named_children else None
        if expr is None or expr.type != "assignment_expression":
            continue
        if _text(expr.child_by_field_name("operator")) != "=":
            continue
        left, right = expr.child_by_field_name("left"), expr.child_by_field_name("right")
        if left is None or right is None or left.type != "identifier":
            continue
        name = _text(left)
        if "string" not in (src.declared_type(name) or ""):
            continue
        operands = []
        node = right
        while (
            node.type == "binary_expression" and _text(node.child_by_field_name("operator")) == "+"
        ):
            operands.append(node.child_by_field_name("right"))
            node = node.child_by_field_name("left")
        if node.type != "identifier" or _text(node) != name or not operands:
            continue
        if any(src.identifiers(name, under=op) for op in operands):
            continue  # s = s + s: the appended value reads the string being grown
        first, *rest = reversed(operands)
        new = f"{name} += {_text(first)}"
        for op in rest:
            new = f"({new}) += {_text(op)}"
        edits.append((expr.start_byte, expr.end_byte, new))
    return src.edit(edits) if edits else None


# ---------------------------------------------------------------- vector front -> deque
# vector members a deque lacks; a vector that uses one stays a vector
_VECTOR_ONLY_METHODS = frozenset({"data", "reserve", "capacity", "shrink_to_fit"})


def front_erase_to_deque(text: str) -> str | None:
    """``v.erase(v.begin())`` / ``v.insert(v.begin(), x)`` move every element (linear each,
    quadratic in a loop); a deque pops and pushes at the front in constant time."""
    src = CppSource(text)
    edits, changed = [], False
    for decl in src.nodes("declaration"):
        type_node = decl.child_by_field_name("type")
        template = type_node
        while template is not None and template.type == "qualified_identifier":
            template = template.child_by_field_name("name")
        if template is None or template.type != "template_type":
            continue
        name_node = template.child_by_field_name("name")
        if _text(name_node) != "vector":
            continue
        names = [_declared_name(d) for d in decl.children_by_field_name("declarator")]
        if len(names) != 1 or not names[0]:
            continue
        fronts = _front_edits(src, names[0])
        if not fronts or not _deque_compatible(src, names[0]):
            continue
        edits.append((name_node.start_byte, name_node.end_byte, "deque"))
        edits.extend(fronts)
        changed = True
    if not changed:
        return None
    if "<deque>" not in src.text and "bits/stdc++.h" not in src.text:
        includes = list(src.nodes("preproc_include"))
        at = includes[-1].end_byte if includes else 0
        edits.append((at, at, "#include <deque>\n"))
    return src.edit(edits)


def _front_edits(src: CppSource, name: str) -> list[tuple[int, int, str]]:
    """Edits turning ``name.erase(name.begin())`` into ``pop_front`` and
    ``name.insert(name.begin(), x)`` into ``push_front``."""
    edits = []
    begin = re.compile(
        rf"^(std::)?begin\(\s*{re.escape(name)}\s*\)$|^{re.escape(name)}\s*\.\s*begin\(\s*\)$"
    )
    for call in src.nodes("call_expression"):
        fn = call.child_by_field_name("function")
        if fn is None or fn.type != "field_expression":
            continue
        if _text(fn.child_by_field_name("argument")) != name:
            continue
        method = _text(fn.child_by_field_name("field"))
        args = call.child_by_field_name("arguments").named_children
        if method == "erase" and len(args) == 1 and begin.match(_text(args[0])):
            edits.append((call.start_byte, call.end_byte, f"{name}.pop_front()"))
        elif method == "insert" and len(args) == 2 and begin.match(_text(args[0])):
            edits.append((call.start_byte, call.end_byte, f"{name}.push_front({_text(args[1])})"))
    return edits


def _deque_compatible(src: CppSource, name: str) -> bool:
    """Every use of ``name`` is one a deque supports the same way: its declaration, a
    subscript, a member call other than the vector-only ones, or a range-for."""
    if src.declared_type(name) is None:
        return False
    declarations = 0
    for use in src.identifiers(name):
        node, parent = _unparen(use)
        if parent.type in ("init_declarator", "declaration"):
            declarations += 1
            continue
        if parent.type == "subscript_expression" and parent.child_by_field_name("argument") == node:
            if parent.parent is not None and parent.parent.type == "pointer_expression":
                return False  # &v[i]: pointer arithmetic needs contiguous storage
            continue
        if parent.type == "field_expression" and parent.child_by_field_name("argument") == node:
            if _text(parent.child_by_field_name("field")) in _VECTOR_ONLY_METHODS:
                return False
            continue
        if parent.type == "for_range_loop" and parent.child_by_field_name("right") == node:
            continue
        return False  # passed to a function, assigned, compared: it must stay a vector
    return declarations == 1


TRANSFORMS: dict[str, Transform] = {
    t.name: t
    for t in (
        Transform("fast_io", "unsync iostreams from stdio and untie cin", frozenset({"io"}), fast_io),
        Transform("endl_to_newline", "write '\\n' instead of flushing endl", frozenset({"io"}), endl_to_newline),
        Transform("reserve_vectors", "reserve vectors before push_back loops", frozenset({"constant_factor", "memory_layout"}), reserve_vectors),
        Transform("const_ref_params", "pass read-only containers by const reference", frozenset({"constant_factor"}), const_ref_params),
        Transform("hoist_invariant_calls", "hoist loop-invariant strlen/size/pow calls", frozenset({"algorithm", "constant_factor"}), hoist_invariant_calls),
        Transform("loop_interchange", "swap nested loops so the inner one walks rows", frozenset({"memory_layout"}), loop_interchange),
        Transform("target_pragmas", "compile the program's loops for AVX2 with unrolling", frozenset({"compute"}), target_pragmas),
        Transform("map_to_unordered", "use unordered_map/set for lookup-only containers", frozenset({"constant_factor", "algorithm"}), map_to_unordered),
        Transform("string_append", "append with s += x instead of copying with s = s + x (quadratic to linear)", frozenset({"algorithm"}), string_append),
        Transform("front_erase_to_deque", "a deque for a vector erased or inserted at the front (quadratic to linear)", frozenset({"algorithm"}), front_erase_to_deque),
    )
}  # fmt: skip


def apply_transforms(text: str, names: list[str]) -> tuple[str, list[str]]:
    """Apply transformations in registry order; returns the source and those that applied."""
    unknown = [n for n in names if n not in TRANSFORMS]
    if unknown:
        raise ValueError(f"unknown C++ transformations {unknown}; choose from {list(TRANSFORMS)}")
    applied = []
    for name in TRANSFORMS:
        if name not in names:
            continue
        out = TRANSFORMS[name].apply(text)
        if out is not None and out != text:
            text = out
            applied.append(name)
    return text, applied
