"""A generated differential test for a slow/fast pair with the same kernels (Rodinia's).

Both sides go into one CUDA program, each in its own namespace; every kernel of the fast
side is launched on both with identical inputs (a fixed-seed fill of every pointer
argument and of every ``__constant__``/``__device__`` array) and the same launch shape,
and every buffer is compared afterwards. The launch shape and the scalar arguments are
guesses (the benchmarks' host code is not run), so a launch error means "unchecked", not
"wrong"; a mismatch under a clean launch means the naive side computes something else.
"""

from __future__ import annotations

import functools
import re
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import tree_sitter

from maxcode.errors import ConfigError
from maxcode.evaluate.sandbox import Limits, Sandbox
from maxcode.kernelcompare.cudaparse import isolate, parse
from maxcode.kernelcompare.techniques import features

ARITHMETIC = {
    "float": "float",
    "double": "double",
    "int": "int",
    "unsigned int": "unsigned int",
    "unsigned": "unsigned int",
    "long": "long",
    "long long": "long long",
    "unsigned long": "unsigned long",
    "size_t": "size_t",
    "short": "short",
    "char": "char",
    "unsigned char": "unsigned char",
    "bool": "bool",
}
_RESULT = re.compile(r"^(MATCH|MISMATCH|NONDETERMINISTIC|LAUNCH_ERROR) (\S+)(.*)$", re.M)


@dataclass(frozen=True)
class HarnessConfig:
    """Guessed launch and inputs; one setting for every kernel of a run."""

    elements: int = field(default=1 << 22, metadata={"help": "elements per pointer argument"})
    blocks: int = field(default=64, metadata={"help": "blocks per launch (x; y for 2-D)"})
    threads: int = field(default=256, metadata={"help": "threads per block (1-D kernels)"})
    tile: int = field(default=16, metadata={"help": "block edge for kernels using threadIdx.y"})
    scalar_int: int = field(default=256, metadata={"help": "value of integer scalar arguments"})
    scalar_float: float = field(default=0.5, metadata={"help": "value of float scalar arguments"})
    max_int_data: int = field(
        default=64, metadata={"help": "integer buffers hold 0..max-1, so they stay valid indices"}
    )
    dynamic_shared_bytes: int = field(default=16384, metadata={"help": "extern __shared__ size"})
    rtol: float = field(default=1e-4, metadata={"help": "relative tolerance of float outputs"})
    atol: float = field(default=1e-5, metadata={"help": "absolute tolerance of float outputs"})
    run_timeout_s: float = field(default=60.0, metadata={"help": "limit of one harness run"})

    def __post_init__(self) -> None:
        small = [
            k
            for k in ("elements", "blocks", "threads", "tile", "max_int_data", "run_timeout_s")
            if getattr(self, k) <= 0
        ]
        if small:
            raise ConfigError(f"kernelcompare.harness: {small} must be > 0")
        if self.rtol < 0 or self.atol < 0:
            raise ConfigError("kernelcompare.harness: rtol and atol must be >= 0")


@dataclass(frozen=True)
class Param:
    name: str
    base: str  # a key of ARITHMETIC
    pointer: bool


@dataclass
class OutputCheck:
    status: str  # match | mismatch | nondeterministic | launch_error | unsupported | build_error | built
    detail: str = ""
    kernels: dict[str, str] = field(default_factory=dict)  # kernel -> MATCH/MISMATCH/...


def _text(node: tree_sitter.Node) -> str:
    return node.text.decode(errors="replace")


def _params(fn: tree_sitter.Node) -> list[Param] | str:
    declarator = fn.child_by_field_name("declarator")
    plist = declarator.child_by_field_name("parameters") if declarator is not None else None
    params = []
    for p in plist.named_children if plist is not None else []:
        if p.type != "parameter_declaration":
            return f"parameter '{_text(p)}' is not a plain declaration"
        type_node = p.child_by_field_name("type")
        base = " ".join(_text(type_node).split()) if type_node is not None else ""
        decl = p.child_by_field_name("declarator")
        depth, name_node = 0, decl
        while name_node is not None and name_node.type == "pointer_declarator":
            depth += 1
            name_node = name_node.child_by_field_name("declarator")
        if base not in ARITHMETIC or depth > 1 or name_node is None:
            return f"parameter '{_text(p)}' is not an arithmetic value or pointer"
        params.append(Param(_text(name_node), base, depth == 1))
    return params


def kernels_of(code: str) -> dict[str, list[Param] | str]:
    """Non-template ``__global__`` kernels and their parameters (or why unsupported)."""
    found: dict[str, list[Param] | str] = {}
    stack = [parse(code).root_node]
    while stack:
        node = stack.pop()
        stack.extend(reversed(node.children))
        if node.type != "function_definition" or "__global__" not in {
            c.type for c in node.children
        }:
            continue
        name_node = node.child_by_field_name("declarator").child_by_field_name("declarator")
        name = _text(name_node)
        parent = node.parent
        found[name] = (
            "template kernel"
            if parent is not None and parent.type == "template_declaration"
            else _params(node)
        )
    return found


def _fill(buf: str, base: str, count: str, seed: int, cfg: HarnessConfig) -> str:
    ctype = ARITHMETIC[base]
    value = (
        "(float)(s >> 40) / 16777216.0f"
        if base in ("float", "double")
        else f"(long long)((s >> 33) % {cfg.max_int_data})"
    )
    return (
        f"  {{ unsigned long long s = {seed}ull; for (size_t i = 0; i < {count}; ++i) "
        f"{{ s = s * 6364136223846793005ull + 1442695040888963407ull; "
        f"(({ctype}*){buf})[i] = ({ctype})({value}); }} }}\n"
    )


def _launch_bounds(kernel_text: str) -> str | None:
    """The first argument of the kernel's ``__launch_bounds__``, as written (may be a macro)."""
    stack = [parse(kernel_text).root_node]
    while stack:
        node = stack.pop()
        if node.type == "launch_bounds":
            return _text(node.named_children[0]) if node.named_children else None
        stack.extend(node.children)
    return None


def _compare(k: int, p: int, ctype: str, other: str, counter: str, cfg: HarnessConfig) -> list[str]:
    """C++ lines counting the elements of buffer p where side ``other`` differs from fast."""
    a, b = f"{other}_{k}_{p}", f"fast_{k}_{p}"
    worst = "if (d > worst) worst = d; " if counter == "bad" else ""
    return [
        f"    CHECK(cudaMemcpy(h, {a}, N * sizeof({ctype}), cudaMemcpyDeviceToHost));",
        f"    CHECK(cudaMemcpy(h2, {b}, N * sizeof({ctype}), cudaMemcpyDeviceToHost));",
        f"    for (size_t i = 0; i < N; ++i) {{ double x = (double)(({ctype}*)h)[i], "
        f"y = (double)(({ctype}*)h2)[i]; double d = fabs(x - y); "
        f"if ((x != x) != (y != y)) d = INFINITY; else if (x != x) d = 0; {worst}"
        f"if (d > {cfg.atol} + {cfg.rtol} * fabs(y)) {counter}++; }}",
    ]


def build_program(slow_code: str, fast_code: str, includes: list[str], cfg: HarnessConfig) -> str:
    """The harness source; raises ValueError naming the kernel it cannot drive."""
    fast_kernels, slow_kernels = kernels_of(fast_code), kernels_of(slow_code)
    if sorted(fast_kernels) != sorted(slow_kernels):
        raise ValueError(
            f"kernels differ: fast {sorted(fast_kernels)}, slow {sorted(slow_kernels)}"
        )
    if not fast_kernels:
        raise ValueError("no non-template __global__ kernel to launch")
    units = isolate(fast_code).units
    symbols = [
        u.name for u in units if u.kind in ("constant", "device_var") and "extern" not in u.text
    ]
    two_d = bool({"threadIdx.y", "blockIdx.y"} & features(fast_code).organization)
    dynamic = any(u.kind == "shared" and "extern" in u.text for u in units)
    lines = [*includes, "#include <cstdio>", "#include <cstdlib>", "#include <cmath>", ""]
    lines += ["namespace slow {", slow_code, "}  // namespace slow", ""]
    lines += ["namespace fast {", fast_code, "}  // namespace fast", ""]
    lines += [
        "#define CHECK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { "
        'printf("LAUNCH_ERROR %s %s\\n", current, cudaGetErrorString(e)); return 2; } } while (0)',
        'static const char *current = "setup";',
        "int main() {",
        f"  const size_t N = {cfg.elements};",
        "  void *h = malloc(N * 8), *h2 = malloc(N * 8);",
    ]
    for i, sym in enumerate(symbols):
        lines.append(_fill("h", "float", f"sizeof(fast::{sym}) / 4", 1000 + i, cfg))
        lines.append(f"  CHECK(cudaMemcpyToSymbol(fast::{sym}, h, sizeof(fast::{sym})));")
        lines.append(f"  CHECK(cudaMemcpyToSymbol(slow::{sym}, h, sizeof(slow::{sym})));")
    for k_index, (name, params) in enumerate(sorted(fast_kernels.items())):
        if isinstance(params, str):
            raise ValueError(f"kernel {name}: {params}")
        grid = f"dim3({cfg.blocks}, {cfg.blocks})" if two_d else f"dim3({cfg.blocks})"
        block = f"dim3({cfg.tile}, {cfg.tile})" if two_d else f"dim3({cfg.threads})"
        shmem = cfg.dynamic_shared_bytes if dynamic else 0
        lines.append(f'  current = "{name}";')
        bounds = next((u for u in units if u.kind == "global" and u.name == name), None)
        limit = _launch_bounds(bounds.text) if bounds is not None and not two_d else None
        if limit is not None:
            block = f"dim3({limit})"
        args: dict[str, list[str]] = {"slow": [], "fast": [], "again": []}
        for p_index, p in enumerate(params):
            ctype = ARITHMETIC[p.base]
            if not p.pointer:
                value = cfg.scalar_float if p.base in ("float", "double") else cfg.scalar_int
                for side in args:
                    args[side].append(f"({ctype}){value}")
                continue
            seed = 7919 * (k_index + 1) + p_index
            lines.append(_fill("h", p.base, "N", seed, cfg))
            for side in args:
                buf = f"{side}_{k_index}_{p_index}"
                lines.append(f"  {ctype} *{buf}; CHECK(cudaMalloc(&{buf}, N * sizeof({ctype})));")
                lines.append(
                    f"  CHECK(cudaMemcpy({buf}, h, N * sizeof({ctype}), cudaMemcpyHostToDevice));"
                )
                args[side].append(buf)
        for side in ("slow", "fast", "again"):
            space = "slow" if side == "slow" else "fast"
            lines.append(
                f"  {space}::{name}<<<{grid}, {block}, {shmem}>>>({', '.join(args[side])});"
            )
            lines.append("  CHECK(cudaGetLastError()); CHECK(cudaDeviceSynchronize());")
        # The fast kernel runs twice: with a guessed launch shape a kernel may race across
        # blocks, and then a difference says nothing about the naive side.
        lines.append("  { int flaky = 0, bad = 0; double worst = 0;")
        for p_index, p in enumerate(params):
            if p.pointer:
                lines += _compare(k_index, p_index, ARITHMETIC[p.base], "again", "flaky", cfg)
                lines += _compare(k_index, p_index, ARITHMETIC[p.base], "slow", "bad", cfg)
                lines += [f"    CHECK(cudaFree({side}_{k_index}_{p_index}));" for side in args]
        lines.append(
            f'    printf("%s {name} bad=%d max_abs_diff=%g\\n", flaky ? "NONDETERMINISTIC" : '
            'bad ? "MISMATCH" : "MATCH", flaky ? flaky : bad, worst); }'
        )
    lines += ["  free(h); free(h2);", "  return 0;", "}", ""]
    return "\n".join(lines)


def check_outputs(
    slow_code: str,
    fast_code: str,
    includes: list[str],
    include_dir: Path,
    nvcc: str,
    cfg: HarnessConfig | None = None,
    run: bool = True,
) -> OutputCheck:
    """Build (and, with ``run``, execute on the GPU) the differential harness."""
    cfg = cfg or HarnessConfig()
    try:
        program = build_program(slow_code, fast_code, includes, cfg)
    except ValueError as err:
        return OutputCheck("unsupported", str(err))
    with tempfile.TemporaryDirectory(prefix="kc-harness-") as tmp:
        src, exe = Path(tmp) / "harness.cu", Path(tmp) / "harness"
        src.write_text(program)
        built = subprocess.run(
            [nvcc, "-std=c++17", "-w", "-I", str(include_dir), str(src), "-o", str(exe)],
            capture_output=True,
            text=True,
            timeout=cfg.run_timeout_s * 4,
        )
        if built.returncode != 0:
            errors = [x for x in built.stderr.splitlines() if "error" in x]
            return OutputCheck("build_error", (errors[0] if errors else built.stderr[:300]))
        if not run:
            return OutputCheck("built", "harness compiled; not run")
        done = _sandbox().run([Sandbox.PROGRAM], _limits(cfg), copy_program=exe)
    if done.timed_out:
        return OutputCheck("launch_error", f"harness ran past {cfg.run_timeout_s}s")
    stdout, stderr = done.stdout.decode(errors="replace"), done.stderr.decode(errors="replace")
    kernels = {m.group(2): m.group(1) for m in _RESULT.finditer(stdout)}
    if "LAUNCH_ERROR" in kernels.values() or done.exit_code != 0:
        return OutputCheck("launch_error", stdout.strip()[-300:] or stderr[-300:], kernels)
    if "MISMATCH" in kernels.values():
        return OutputCheck("mismatch", stdout.strip()[-300:], kernels)
    if "NONDETERMINISTIC" in kernels.values():
        return OutputCheck("nondeterministic", stdout.strip()[-300:], kernels)
    return OutputCheck("match", stdout.strip()[-300:], kernels)


@functools.cache
def _sandbox() -> Sandbox:
    """The C++ evaluator's sandbox (namespaces, private /tmp, no network, own uid, scrubbed
    env): the harness runs third-party kernels. The GPU device nodes stay reachable."""
    return Sandbox(Path(tempfile.gettempdir()) / "maxcode-kernelcompare")


def _limits(cfg: HarnessConfig) -> Limits:
    # The CUDA driver reserves terabytes of address space: only the wall and CPU time bind.
    wall = cfg.run_timeout_s
    return Limits(wall_s=wall, cpu_s=int(wall) + 5, memory_mb=1 << 26, processes=64)
