"""Naive counterparts for optimized kernels that have none (Rodinia).

The report had an LLM write them; any ``NaiveVariantGenerator`` fits here (an LLM
role goes through the project's cached LLM backends). ``SourceTransformGenerator``
is the offline one: it de-optimizes by rewriting the parse tree, so each change is
known exactly and is semantics-preserving up to floating-point rounding.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import tree_sitter

from maxcode.kernelcompare.cudaparse import isolate, parse


@dataclass
class NaiveVariant:
    source: str | None  # None: the generator could not write a slower variant
    generator: str
    changes: dict[str, int] = field(default_factory=dict)  # transformation -> edits made
    reason: str = ""  # why there is no variant


class NaiveVariantGenerator(Protocol):
    name: str  # recorded on every generated pair, e.g. "offline-transform/1"
    offline: bool

    def generate(self, benchmark: str, source_file: str, fast_code: str) -> NaiveVariant: ...


Edit = tuple[int, int, str]  # byte start, byte end, replacement
_PRECISE = {
    "__expf": "expf",
    "__exp10f": "exp10f",
    "__logf": "logf",
    "__log2f": "log2f",
    "__log10f": "log10f",
    "__sinf": "sinf",
    "__cosf": "cosf",
    "__tanf": "tanf",
    "__powf": "powf",
}


def _text(node: tree_sitter.Node) -> str:
    return node.text.decode(errors="replace")


def _walk(node: tree_sitter.Node) -> list[tree_sitter.Node]:
    out, stack = [], [node]
    while stack:
        current = stack.pop()
        out.append(current)
        stack.extend(reversed(current.children))
    return out


def _calls(tree: tree_sitter.Tree, names: set[str]) -> list[tuple[tree_sitter.Node, list]]:
    found = []
    for node in _walk(tree.root_node):
        if node.type != "call_expression":
            continue
        fn = node.child_by_field_name("function")
        if fn is not None and _text(fn) in names:
            args = node.child_by_field_name("arguments")
            found.append((node, args.named_children if args is not None else []))
    return found


def drop_unroll_pragmas(tree: tree_sitter.Tree) -> list[Edit]:
    """``#pragma unroll [n]`` -> nothing: the compiler chooses (usually less) unrolling."""
    edits = []
    for node in _walk(tree.root_node):
        if node.type == "preproc_call":
            directive = node.child_by_field_name("directive")
            argument = node.child_by_field_name("argument")
            if (
                directive is not None
                and _text(directive) == "#pragma"
                and argument is not None
                and _text(argument).strip().startswith("unroll")
            ):
                edits.append((node.start_byte, node.end_byte, ""))
    return edits


def ldg_to_plain_load(tree: tree_sitter.Tree) -> list[Edit]:
    """``__ldg(p)`` -> ``(*(p))``: the load goes through L1 instead of the read-only path."""
    return [
        (node.start_byte, node.end_byte, f"(*({_text(args[0])}))")
        for node, args in _calls(tree, {"__ldg"})
        if len(args) == 1
    ]


def fast_math_to_precise(tree: tree_sitter.Tree) -> list[Edit]:
    """Intrinsics like ``__expf`` -> ``expf`` and ``__fdividef(a, b)`` -> ``((a) / (b))``."""
    edits = []
    for node, args in _calls(tree, {*_PRECISE, "__fdividef"}):
        fn = node.child_by_field_name("function")
        name = _text(fn)
        if name == "__fdividef" and len(args) == 2:
            edits.append(
                (node.start_byte, node.end_byte, f"(({_text(args[0])}) / ({_text(args[1])}))")
            )
        elif name in _PRECISE:
            edits.append((fn.start_byte, fn.end_byte, _PRECISE[name]))
    return edits


def drop_restrict(tree: tree_sitter.Tree) -> list[Edit]:
    """``__restrict__`` pointers -> plain pointers: the compiler must assume aliasing."""
    return [
        (node.start_byte, node.end_byte, "")
        for node in _walk(tree.root_node)
        if node.type == "type_qualifier" and _text(node) in ("__restrict__", "__restrict")
    ]


def drop_launch_bounds(tree: tree_sitter.Tree) -> list[Edit]:
    """``__launch_bounds__(...)`` -> nothing: register allocation is no longer tuned."""
    return [
        (node.start_byte, node.end_byte, "")
        for node in _walk(tree.root_node)
        if node.type == "launch_bounds"
    ]


def constant_to_global(tree: tree_sitter.Tree) -> list[Edit]:
    """``__constant__`` -> ``__device__``: reads lose the broadcast constant cache.

    The host side is unchanged: ``cudaMemcpyToSymbol`` works on both.
    """
    return [
        (node.start_byte, node.end_byte, "__device__")
        for node in _walk(tree.root_node)
        if node.type == "type_qualifier" and _text(node) == "__constant__"
    ]


def forceinline_to_noinline(tree: tree_sitter.Tree) -> list[Edit]:
    """``__forceinline__`` -> ``__noinline__``: every helper call becomes a real call."""
    return [
        (node.start_byte, node.end_byte, "__noinline__")
        for node in _walk(tree.root_node)
        if node.type == "__forceinline__"
    ]


TRANSFORMS: dict[str, Callable[[tree_sitter.Tree], list[Edit]]] = {
    "drop_unroll_pragmas": drop_unroll_pragmas,
    "ldg_to_plain_load": ldg_to_plain_load,
    "fast_math_to_precise": fast_math_to_precise,
    "drop_restrict": drop_restrict,
    "drop_launch_bounds": drop_launch_bounds,
    "constant_to_global": constant_to_global,
    "forceinline_to_noinline": forceinline_to_noinline,
}


def apply_edits(source: str, edits: list[Edit]) -> str:
    """Apply non-overlapping byte edits; an edit nested in an earlier one is skipped."""
    raw = source.encode()
    out, pos = [], 0
    for start, end, replacement in sorted(edits):
        if start < pos:
            continue
        out.append(raw[pos:start])
        out.append(replacement.encode())
        pos = end
    out.append(raw[pos:])
    return b"".join(out).decode(errors="replace")


@dataclass
class SourceTransformGenerator:
    """Offline generator: applies the configured parse-tree transformations in order."""

    transforms: tuple[str, ...] = tuple(TRANSFORMS)
    name: str = "offline-transform/1"
    offline: bool = True

    def __post_init__(self) -> None:
        unknown = [t for t in self.transforms if t not in TRANSFORMS]
        if unknown:
            raise ValueError(
                f"unknown naive transformation(s) {unknown}; choose from {list(TRANSFORMS)}"
            )

    def generate(self, benchmark: str, source_file: str, fast_code: str) -> NaiveVariant:
        code, changes = fast_code, {}
        for name in self.transforms:
            edits = TRANSFORMS[name](parse(code))
            if edits:
                code = apply_edits(code, edits)
                changes[name] = len(edits)
        if not changes:
            return NaiveVariant(
                None,
                self.name,
                reason=f"none of {list(self.transforms)} applies to {benchmark}/{source_file}",
            )
        return NaiveVariant(code, self.name, changes)


NAIVE_PROMPT_VERSION = "kernelcompare-naive/v1"
NAIVE_SYSTEM = (
    "You are a CUDA expert writing teaching material. Given an optimized CUDA kernel, write a "
    "semantically equivalent but unoptimized version: remove shared memory staging, memory "
    "coalescing, loop unrolling, texture/constant memory and warp-level tricks. Keep every "
    "function name, signature and result identical. Answer with one ```cuda code block."
)
_FENCE = re.compile(
    r"^(`{3,}|~{3,})[ \t]*(?:cuda|cu|c\+\+|cpp)?[ \t]*\n(.*?)^\1[ \t]*$", re.S | re.M
)


class CompletionClient(Protocol):
    """What the generator needs of ``maxcode.llm.client.LLMClient`` (cached, budgeted)."""

    @property
    def identity(self) -> str: ...

    def complete(self, messages: list[dict], n: int = 1, seed: int = 0) -> list: ...


@dataclass
class LLMNaiveGenerator:
    """The report's generator: a model writes the naive side; its answer is checked.

    The client's response cache makes a rerun free. A variant is accepted only when it
    defines the same ``__global__`` kernels as the optimized code (same names, in order).
    """

    client: CompletionClient
    seed: int = 0
    offline: bool = False

    @property
    def name(self) -> str:
        return f"llm:{self.client.identity}/{NAIVE_PROMPT_VERSION}"

    def generate(self, benchmark: str, source_file: str, fast_code: str) -> NaiveVariant:
        messages = [
            {"role": "system", "content": NAIVE_SYSTEM},
            {
                "role": "user",
                "content": f"Benchmark {benchmark}, file {source_file}:\n\n```cuda\n{fast_code}```\n",
            },
        ]
        (completion,) = self.client.complete(messages, n=1, seed=self.seed)
        blocks = [m.group(2) for m in _FENCE.finditer(completion.text)]
        if not blocks:
            return NaiveVariant(None, self.name, reason="the answer has no ```cuda code block")
        code = blocks[-1]
        want, got = isolate(fast_code).kernel_names, isolate(code).kernel_names
        if want != got:
            return NaiveVariant(
                None, self.name, reason=f"the answer defines kernels {got}, expected {want}"
            )
        return NaiveVariant(code, self.name, {"llm_rewrite": 1})
