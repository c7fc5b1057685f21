"""Content-addressed build cache for candidates' ``load_inline`` extensions.

Why not torch's own ``load_inline``: it re-parses all of ``torch/extension.h`` in the
host file and, when the candidate includes it, in the ``.cu`` file too (tens of seconds
per candidate), keys nothing by content, and shares one build directory per name, so
concurrent candidates with the same extension name overwrite each other. Here:

* the build key hashes the generated sources, every flag, the toolchain and the GPU
  architecture, so an identical extension is compiled once, ever;
* a per-key file lock plus build-in-a-private-directory-then-rename means concurrent
  jobs (threads or processes) never see a half-written build and never build twice;
* the host binding (``main.cpp``) reuses a precompiled header built once per toolchain and
  flag set: first the core set, ATen's Tensor and torch's pybind11 casters
  (``HOST_CORE_HEADERS``, the other ops it calls included after), the binding's own
  ``#include <torch/extension.h>`` lines made comments; on a missing name, and for host code
  that names the C++ frontend, the whole torch/extension.h;
* the .cu's host functions are moved into the host binding (launches through generated
  stubs, :mod:`maxcode.evaluate.cuda.host_split`): nvcc then compiles the kernels without
  torch, g++ the host functions with the PCH; any failure falls back to
* the ``.cu`` compiled against the lightest headers that work, each tier falling back to
  the next on failure (:meth:`BuildCache._cuda_tiers`): the CUDA headers alone, ATen's
  ``Tensor`` plus the headers of the ``torch::``/``at::`` functions it calls, the text as
  written; host and device compiles run in parallel; the tier a .cu reached is remembered
  per .cu text;
* deterministic compiler errors are cached too (trimmed, with the first error line), so
  an identical broken candidate costs nothing the second time; timeouts are not cached.

Measured gains, each the build with everything on against the build without it (build
wall per real load_inline call, median, AMD EPYC 2 cores, compile only, the 3 calls of the
sample's first 6 that compile there; ``bench_cuda_compile.py --builds``,
benchmarks/results/cuda-compile/2026-11-29-build-path.json):

* precompiled header: 7.8 s against 30.7 s parsing torch/extension.h;
* core header set: 7.8 s against 14.6 s with torch/extension.h's PCH (host step 6.1-7.2 s
  against 12.5-20.6 s);
* host split: 7.8 s against 27.9 s with the .cu at its lightest tier;
* "ATen ops" tier, for a .cu the split does not take: 27.9 s against 92.5 s as written;
* "cuda only" tier (the split's kernels): nvcc 1.3-10.7 s against 25.6-38.7 s at "ATen ops";
* a build waits for a precompiled header being built rather than parse its headers: 20.6 s
  against 23.3 s per candidate (H200, 16 cores, 32 candidates, 16 in flight, an empty cache:
  benchmarks/results/cuda-compile/2026-11-28-core-header-set.json).

Flags are the ones torch itself would use (read from the ninja file that torch's
cpp_extension writes for the same arguments), so built extensions are ABI-identical to
what ``load_inline`` produces.
"""

from __future__ import annotations

import dataclasses
import fcntl
import functools
import hashlib
import importlib.machinery
import importlib.util
import inspect
import json
import os
import re
import shlex
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from types import ModuleType
from typing import IO, Any

from maxcode.evaluate.cuda.host_split import SPLIT_VERSION, split_host_functions
from maxcode.evaluate.sandbox import (
    LAUNCH_FAILED,
    Confinement,
    confined_returncode,
    signal_name,
    uid_slot,
)
from maxcode.evaluate.scrub import allowed_env

_local = threading.local()  # the confinement of the build this thread is running, if any
# The precompiled headers this process builds in the background, by directory: one thread
# each, kept while it runs and when it failed (see ``BuildCache.start_pch``).
_PCH_THREADS: dict[Path, threading.Thread] = {}
_PCH_THREADS_LOCK = threading.Lock()

_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# A CUDA source that names any of these needs torch's headers (load_inline adds torch/types.h).
_TORCH_NAME = re.compile(
    r"\b(torch|at|c10|pybind11|py)\s*::|\b(TORCH|AT|C10|PYBIND11)_[A-Z_]+|#\s*include\s*[<\"](torch|ATen|c10|pybind11)/"
)
_EXT_H = re.compile(r"#\s*include\s*[<\"]torch/extension\.h[>\"]")
_TORCH_H = re.compile(r"#\s*include\s*[<\"]torch/(extension|types)\.h[>\"]")
# Umbrella headers that bring every op anyway (and torch's own dtype aliases).
_ALL_OPS_H = re.compile(
    r"#\s*include\s*[<\"](torch/(torch|all)\.h|ATen/ATen\.h|ATen/Functions\.h)[>\"]"
)
# torch::zeros(...), at::empty_like(...): each has its own small header, ATen/ops/<name>.h.
_OP_CALL = re.compile(r"\b(?:torch|at)::([a-z_][a-z0-9_]*)\s*\(")
# What torch/types.h adds to namespace torch besides ``using namespace at``.
_TORCH_DTYPES = (
    "kUInt8 = at::kByte", "kInt8 = at::kChar", "kInt16 = at::kShort", "kInt32 = at::kInt",
    "kInt64 = at::kLong", "kUInt16 = at::kUInt16", "kUInt32 = at::kUInt32",
    "kUInt64 = at::kUInt64", "kFloat16 = at::kHalf", "kFloat32 = at::kFloat",
    "kFloat64 = at::kDouble", "kU8 = kUInt8", "kU16 = kUInt16", "kU32 = kUInt32",
    "kU64 = kUInt64", "kI8 = kInt8", "kI16 = kInt16", "kI32 = kInt32", "kI64 = kInt64",
    "kF16 = kFloat16", "kF32 = kFloat32", "kF64 = kFloat64",
)  # fmt: skip
# ``namespace torch`` as torch/types.h makes it, for text that includes less than torch/types.h.
_TORCH_NAMESPACE = "\n".join(
    [
        "namespace torch {",
        "using namespace at;",
        "using Dtype = at::ScalarType;",
        *(f"constexpr auto {alias};" for alias in _TORCH_DTYPES),
        "}  // namespace torch",
    ]
)
_NAME_DEFINE = re.compile(r"^-DTORCH_EXTENSION_NAME=")
COMPILE_NICENESS = 10
"""Compile jobs and every compiler step run this much nicer than the evaluator, so a full pool
of builds cannot take CPU from what the GPU slots wait on: kernel launches inside every timed
call, KernelBench's serial CPU input generator, a reference's torch.compile. But for the
precompiled headers, built once per machine: every build of a first wave waits for them, so
they run at the evaluator's priority."""
MAX_LOG_CHARS = 4000
# Benchmarks set this to a directory: every nvcc run then writes its per-phase times there
# (``nvcc --time``, one CSV per build step), see benchmarks/bench_cuda_compile.py.
NVCC_TIME_DIR_VAR = "MAXCODE_NVCC_TIME_DIR"


_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
# The tier of a .cu whose host functions were moved into the host binding (host_split).
HOST_SPLIT_TIER = "cuda only, host functions in the binding"

# The host binding's core header set, tried before torch/extension.h: what a KernelBench
# binding uses (ATen's Tensor class and its operators, the dispatch macros, the usual
# factories, torch's pybind11 casters and the error wrapper load_inline puts around each
# function) and torch's namespace aliases; the other ops a binding calls by name
# (``torch::sum(``) are included after it, one header each.
HOST_CORE_HEADERS = (
    "torch/csrc/utils/pybind.h",
    "torch/csrc/Exceptions.h",
    "ATen/core/Tensor.h",
    "ATen/Dispatch.h",
    "ATen/TensorOperators.h",  # with AT_PER_OPERATOR_HEADERS: needs empty_like, not every op
    "ATen/ops/empty.h",
    "ATen/ops/empty_like.h",
    "ATen/ops/zeros.h",
    "ATen/ops/zeros_like.h",
)
HOST_CORE = "ATen's Tensor, the ops called and torch's pybind11 casters"
# Host code the core set must not be used for, besides what ``_needs_every_op`` says: a torch/
# header other than extension.h (torch/types.h would define torch's aliases again, and any of
# torch/'s own headers may include it). All 515 includes of torch/ in the public runs' sources
# are torch/extension.h.
_TORCH_OTHER_H = re.compile(r"#\s*include\s*[<\"]torch/(?!extension\.h[>\"])")
HOST_FULL = "torch/extension.h"
# Host code that names the frontend (or includes it whole) goes to torch/extension.h directly:
# it would fail the core set.
_HOST_NEEDS_FRONTEND = re.compile(
    r"\btorch\s*::\s*(nn|optim|data|jit|serialize|fft|linalg|special|nested|sparse|autograd"
    r"|mps|xpu|python|enumtype|stable)\b|#\s*include\s*[<\"]torch/(torch|all|python|nn|optim"
    r"|data|jit|serialize|autograd|fft|linalg|special|nested|sparse|enum)\.h[>\"]"
)
_EXT_H_LINE = "// maxcode: torch/extension.h, as the core precompiled header"
# Errors a missing declaration can cause: only these send a binding to the next header set.
_LOOKUP_ERROR = re.compile(
    r"error: .*(was not declared|has not been declared|is not a member of|does not name a"
    r"|no matching function|incomplete type|no type named|is not a namespace|is not a template"
    r"|not declared in this scope|undeclared|there are no arguments|no match for)"
)


LOAD_INLINE_KEYWORDS_DECIDED_HERE = frozenset(
    {
        "sycl_sources",
        "extra_sycl_cflags",
        "build_directory",
        "verbose",
        "with_cuda",
        "with_sycl",
        "is_python_module",
        "keep_intermediates",
        "use_pch",
    }
)
"""torch's load_inline keywords (2.11 to 2.13) that the evaluator reads but does not pass on."""


class BuildError(RuntimeError):
    """The candidate's extension did not build; ``outcome`` holds the trimmed log."""

    def __init__(self, outcome: BuildOutcome):
        super().__init__(f"extension '{outcome.name}' failed to build: {outcome.first_error}")
        self.outcome = outcome


@dataclass(frozen=True)
class ExtensionSpec:
    """What a candidate passed to ``load_inline``, normalized as torch normalizes it."""

    name: str
    cpp_sources: tuple[str, ...]
    cuda_sources: tuple[str, ...] = ()
    functions: tuple[tuple[str, str], ...] | None = None
    extra_cflags: tuple[str, ...] = ()
    extra_cuda_cflags: tuple[str, ...] = ()
    extra_ldflags: tuple[str, ...] = ()
    extra_include_paths: tuple[str, ...] = ()
    with_pytorch_error_handling: bool = True
    no_implicit_headers: bool = False

    @classmethod
    def from_load_inline(
        cls,
        name: str,
        cpp_sources: str | list[str],
        cuda_sources: str | list[str] | None = None,
        functions: str | list[str] | dict[str, str] | None = None,
        extra_cflags: list[str] | None = None,
        extra_cuda_cflags: list[str] | None = None,
        extra_ldflags: list[str] | None = None,
        extra_include_paths: list[str] | None = None,
        with_pytorch_error_handling: bool = True,
        no_implicit_headers: bool = False,
        **ignored: Any,
    ) -> ExtensionSpec:
        """Accepts load_inline's signature; build_directory, verbose, use_pch etc. are ours to decide.
        A keyword torch's load_inline does not take is refused as torch refuses it."""
        unknown = sorted(set(ignored) - LOAD_INLINE_KEYWORDS_DECIDED_HERE)
        if unknown:
            raise TypeError(f"load_inline() got an unexpected keyword argument {unknown[0]!r}")
        unsupported = {k for k in ("sycl_sources", "extra_sycl_cflags") if ignored.get(k)}
        if unsupported or ignored.get("is_python_module") is False:
            raise ValueError(
                f"load_inline options not supported by the evaluator: {sorted(unsupported) or ['is_python_module=False']}"
            )
        if not isinstance(name, str) or not _NAME_RE.match(name):
            raise ValueError(
                f"load_inline name {name!r} must be a C identifier (it names the Python module)"
            )

        def strings(value: str | list[str] | None, what: str) -> tuple[str, ...]:
            if value is None:
                return ()
            if isinstance(value, str):
                return (value,)
            if not all(isinstance(v, str) for v in value):
                raise ValueError(f"load_inline {what} must be a string or a list of strings")
            return tuple(value)

        if isinstance(functions, str):
            functions = [functions]
        if isinstance(functions, list):
            funcs: tuple[tuple[str, str], ...] | None = tuple((f, f) for f in functions)
        elif isinstance(functions, dict):
            funcs = tuple(functions.items())
        elif functions is None:
            funcs = None
        else:
            raise ValueError(
                f"load_inline functions must be a list or dict, got {type(functions).__name__}"
            )
        return cls(
            name=name,
            cpp_sources=strings(cpp_sources, "cpp_sources"),
            cuda_sources=strings(cuda_sources, "cuda_sources"),
            functions=funcs,
            extra_cflags=tuple(
                f.strip() for f in strings(extra_cflags, "extra_cflags") if f.strip()
            ),
            extra_cuda_cflags=tuple(
                f.strip() for f in strings(extra_cuda_cflags, "extra_cuda_cflags") if f.strip()
            ),
            extra_ldflags=tuple(
                f.strip() for f in strings(extra_ldflags, "extra_ldflags") if f.strip()
            ),
            extra_include_paths=strings(extra_include_paths, "extra_include_paths"),
            with_pytorch_error_handling=with_pytorch_error_handling,
            no_implicit_headers=no_implicit_headers,
        )

    def to_dict(self) -> dict:
        return asdict(self)

    def digest(self) -> str:
        """What the candidate asked for, by content (no flags, no toolchain)."""
        return hashlib.sha256(json.dumps(self.to_dict(), sort_keys=True).encode()).hexdigest()[:24]

    @classmethod
    def from_dict(cls, d: dict) -> ExtensionSpec:
        """A spec sent by a sandboxed compile job: checked again, it is untrusted input."""
        functions = d.get("functions")
        return cls.from_load_inline(
            name=d["name"],
            cpp_sources=list(d["cpp_sources"]),
            cuda_sources=list(d.get("cuda_sources") or []),
            functions=None if functions is None else {str(f): str(doc) for f, doc in functions},
            extra_cflags=list(d.get("extra_cflags") or []),
            extra_cuda_cflags=list(d.get("extra_cuda_cflags") or []),
            extra_ldflags=list(d.get("extra_ldflags") or []),
            extra_include_paths=list(d.get("extra_include_paths") or []),
            with_pytorch_error_handling=bool(d.get("with_pytorch_error_handling", True)),
            no_implicit_headers=bool(d.get("no_implicit_headers", False)),
        )

    @property
    def with_cuda(self) -> bool:
        return bool(self.cuda_sources)

    def main_cpp(self, moved_host_code: str = "") -> str:
        """The host file exactly as torch's load_inline writes it (TORCH_EXTENSION_NAME defined
        in-source); ``moved_host_code`` (host functions moved out of the .cu, see
        :mod:`maxcode.evaluate.cuda.host_split`) goes before the candidate's cpp_sources."""
        parts = [f"#define TORCH_EXTENSION_NAME {self.name}"]
        if not self.no_implicit_headers:
            parts.append("#include <torch/extension.h>")
        if moved_host_code:  # after the headers its .cu gave it (see ``cuda_cu``)
            parts += ["#include <cuda.h>", "#include <cuda_runtime.h>", moved_host_code]
        parts.extend(self.cpp_sources)
        if self.functions is not None:
            parts.append("PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {")
            for fn, doc in self.functions:
                target = (
                    f"torch::wrap_pybind_function({fn})" if self.with_pytorch_error_handling else fn
                )
                parts.append(f'm.def("{fn}", {target}, "{doc}");')
            parts.append("}")
        return "\n".join(parts)

    def cuda_cu(self, implicit_torch: bool = True, body: str | None = None) -> str:
        """The .cu file as load_inline writes it; ``implicit_torch=False`` leaves out the
        implicit ``torch/types.h`` (for sources that never name torch); ``body`` replaces
        the candidate's sources (the kernels of a host split)."""
        parts = [f"#define TORCH_EXTENSION_NAME {self.name}"]
        if not self.no_implicit_headers:
            if implicit_torch:
                parts.append("#include <torch/types.h>")
            parts += ["#include <cuda.h>", "#include <cuda_runtime.h>"]
        parts.extend(self.cuda_sources if body is None else [body])
        return "\n".join(parts)

    def lean_torch_cu(self, torch_include: Path) -> str | None:
        """The .cu with its torch includes replaced by ATen's Tensor class, the dispatch
        macros and the headers of the ops it calls by name; None when that cannot stand
        in: no torch include to replace, an umbrella header that declares every op anyway,
        or ``requires_grad`` (torch:: factories handle it, at:: ones refuse it)."""
        text = self.cuda_cu()
        first = _TORCH_H.search(text)
        if first is None or _needs_every_op(text):
            return None
        ops = sorted(
            {
                name
                for src in self.cuda_sources
                for name in _OP_CALL.findall(src)
                if (torch_include / "ATen" / "ops" / f"{name}.h").is_file()
            }
        )
        lean = "\n".join(
            [
                "#include <ATen/core/Tensor.h>",
                "#include <ATen/Dispatch.h>",
                *(f"#include <ATen/ops/{name}.h>" for name in ops),
                _TORCH_NAMESPACE,
            ]
        )
        head, tail = text[: first.start()], text[first.end() :]
        return head + lean + _TORCH_H.sub("", tail)

    def names_torch(self) -> bool:
        """Whether the CUDA sources use torch, ATen, c10 or pybind11 (or include their headers)."""
        return any(_TORCH_NAME.search(src) for src in self.cuda_sources)


@dataclass
class BuildOutcome:
    key: str
    name: str
    ok: bool
    so_path: str | None = None
    log: str = ""  # trimmed compiler output
    first_error: str = ""
    # "pch" | "host" | "cuda" | "link" | "load" (prebuilt not visible), or one of NOT_CACHED
    failed_step: str = ""
    seconds: float = 0.0  # wall time of this build (0 when served from cache)
    steps: dict[str, float] = field(default_factory=dict)  # seconds per step
    # What the .cu was compiled against: "cuda only", "ATen ops", "as written"
    # ("": no .cu), or HOST_SPLIT_TIER (its host functions compiled in the host binding).
    cuda_headers: str = ""
    # Why the host functions were not moved out of the .cu ("" when they were, or no .cu).
    host_split: str = ""
    # What the host binding was compiled against: HOST_CORE or HOST_FULL ("": no PCH).
    host_headers: str = ""
    cached: bool = False

    def to_dict(self) -> dict:
        return asdict(self)

    def fail(self, step: str, rc: int, log: str, work: Path) -> None:
        """``step`` exited with ``rc``: keep the compiler's first error, or say why it gave
        none (then the failed step is ``killed``, which is not cached)."""
        self.log, self.first_error = trim_log(log, work)
        why = no_verdict(step, rc, log)
        self.failed_step = "killed" if why else step
        self.first_error = why or self.first_error


# Failed steps that say nothing about the source: out of time, or a compiler killed (a
# cancelled job, the OOM killer) or never started; never cached, the next try builds again.
NOT_CACHED = ("timeout", "killed")


def no_verdict(step: str, rc: int, log: str) -> str:
    """Why ``step`` ended without the compiler's word on the source ("" when it had it)."""
    if rc < 0:
        return f"{step} was killed by {signal_name(-rc)} (out of memory, or cancelled?)"
    last = log.rstrip().rpartition("\n")[2]
    if rc == LAUNCH_FAILED and last.startswith(("sandbox launcher gave", "sandbox setup failed")):
        return f"{step}: {last}"
    return ""


@dataclass(frozen=True)
class Toolchain:
    """Everything outside the sources that changes the binary."""

    torch_version: str
    torch_cuda: str
    nvcc: str
    cxx: str
    python: str
    cuda_arch: str

    def fingerprint(self) -> str:
        return hashlib.sha256(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()[:16]


@functools.cache
def detect_toolchain(cuda_arch: str) -> Toolchain:
    import torch

    def version(cmd: list[str]) -> str:
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=60).stdout
        except (OSError, subprocess.TimeoutExpired):
            return "missing"
        return out.strip().splitlines()[-1] if out.strip() else "missing"

    return Toolchain(
        torch_version=torch.__version__,
        torch_cuda=str(torch.version.cuda),
        nvcc=version([_nvcc(), "--version"]),
        cxx=" ".join(version([os.environ.get("CXX", "c++"), "--version"]).split()[:1])
        + " "
        + subprocess.run(
            [os.environ.get("CXX", "c++"), "-dumpfullversion"], capture_output=True, text=True
        ).stdout.strip(),
        python=f"{sys.version_info.major}.{sys.version_info.minor}",
        cuda_arch=cuda_arch,
    )


def _nvcc() -> str:
    home = cuda_home()
    return str(Path(home, "bin", "nvcc")) if home else shutil.which("nvcc") or "nvcc"


@functools.cache
def cuda_home() -> str | None:
    """CUDA toolkit root; a CPU-only torch does not look for one, so we do it the same way torch would."""
    from torch.utils import cpp_extension as ce

    candidates = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), ce.CUDA_HOME]
    nvcc = shutil.which("nvcc")
    if nvcc:
        candidates.append(str(Path(os.path.realpath(nvcc)).parent.parent))
    candidates.append("/usr/local/cuda")
    home = next((c for c in candidates if c and Path(c, "include", "cuda.h").is_file()), None)
    if home and ce.CUDA_HOME is None:
        ce.CUDA_HOME = home  # cpp_extension reads this module global when it writes CUDA flags
    return home


@dataclass(frozen=True)
class _Flags:
    cxx: list[str]
    cflags: list[str]
    post_cflags: list[str]
    nvcc: list[str]
    cuda_cflags: list[str]
    cuda_post_cflags: list[str]
    ldflags: list[str]


def torch_flags(spec: ExtensionSpec, cuda_arch: str) -> _Flags:
    """Flags torch's cpp_extension would use for this spec, read from the ninja file it writes."""
    from torch.utils import cpp_extension as ce

    os.environ["TORCH_CUDA_ARCH_LIST"] = cuda_arch
    if spec.with_cuda and cuda_home() is None:
        raise RuntimeError(
            "no CUDA toolkit found (set CUDA_HOME); CUDA candidates cannot be compiled here"
        )
    with tempfile.TemporaryDirectory(prefix="maxcode-flags-") as tmp:
        sources = [os.path.join(tmp, "main.cpp")] + (
            [os.path.join(tmp, "cuda.cu")] if spec.with_cuda else []
        )
        ld_args = {
            "extra_ldflags": list(spec.extra_ldflags),
            "with_cuda": spec.with_cuda,
            "with_sycl": False,
            "verbose": False,
            "is_standalone": False,
        }
        ldflags = ce._prepare_ldflags(**_accepted(ce._prepare_ldflags, ld_args))
        args = {
            "path": os.path.join(tmp, "build.ninja"),
            "name": spec.name,
            "sources": sources,
            "extra_cflags": list(spec.extra_cflags),
            "extra_cuda_cflags": list(spec.extra_cuda_cflags),
            "extra_sycl_cflags": [],
            "extra_ldflags": ldflags,
            "extra_include_paths": list(spec.extra_include_paths),
            "with_cuda": spec.with_cuda,
            "with_sycl": False,
            "is_standalone": False,
        }
        ce._write_ninja_file_to_build_library(
            **_accepted(ce._write_ninja_file_to_build_library, args)
        )
        variables = {}
        for line in Path(args["path"]).read_text().splitlines():
            m = re.match(r"^(\w+) = (.*)$", line)
            if m:
                variables[m.group(1)] = m.group(2)

    def split(key: str) -> list[str]:
        return [f for f in shlex.split(variables.get(key, "")) if not _NAME_DEFINE.match(f)]

    return _Flags(
        cxx=shlex.split(variables.get("cxx", "c++")),
        cflags=split("cflags"),
        post_cflags=split("post_cflags"),
        nvcc=shlex.split(variables.get("nvcc", _nvcc())),
        cuda_cflags=split("cuda_cflags"),
        cuda_post_cflags=split("cuda_post_cflags"),
        ldflags=split("ldflags"),
    )


def _accepted(fn: Any, kwargs: dict) -> dict:
    params = inspect.signature(fn).parameters
    return {k: v for k, v in kwargs.items() if k in params}


def build_key(
    spec: ExtensionSpec,
    flags: _Flags,
    toolchain: Toolchain,
    light_headers: bool,
    host_pch: bool,
    split_host: bool = False,
    light_host_headers: bool = False,
) -> str:
    payload = {
        "name": spec.name,
        "main": spec.main_cpp(),
        "cuda": spec.cuda_cu() if spec.with_cuda else None,
        "flags": asdict(flags),
        "toolchain": asdict(toolchain),
        "light_headers": light_headers,
        "host_pch": host_pch,
        **({"split_host": SPLIT_VERSION} if split_host else {}),  # earlier builds' keys stay
        **({"core_host": _pch_header(HOST_CORE)[1]} if light_host_headers else {}),
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:24]


def readable_by_all(tree: Path) -> None:
    """Builds are read by sandboxed processes under other uids: directories 0755, files 0644
    (0755 when executable), whatever the umask (mkdtemp's 0700, or a strict umask, would hide
    them from those uids)."""
    for path in (tree, *tree.rglob("*")):
        if path.is_symlink():
            continue
        executable = path.is_dir() or path.stat().st_mode & stat.S_IXUSR
        path.chmod(0o755 if executable else 0o644)


class PrebuiltBuilds:
    """The builds a candidate's compile job asked for, found by what was asked (the spec's
    digest) and loaded as built: the GPU process does not repeat the flag and toolchain probes
    (subprocesses, inside the jail) that a build key needs, and a build it cannot see fails
    with the path and the reason instead of a rebuild its read-only cache cannot hold (that
    message is what showed, on the H100 on 2026-11-25, that the jail carried no build cache).
    A spec the compile job never saw (an extension made only when a GPU is present) is built
    through ``cache`` as before."""

    def __init__(self, cache: BuildCache, keys: dict[str, str]):
        self.cache = cache
        self.keys = keys

    def build(self, spec: ExtensionSpec, timeout_s: float = 600.0) -> BuildOutcome:
        key = self.keys.get(spec.digest())
        if key is None:
            return self.cache.build(spec, timeout_s)
        hit = self.cache.lookup(key)
        if hit is not None:
            return hit
        meta = self.cache.root / "ext" / key / "outcome.json"
        try:
            meta.stat()
            why = "present but unreadable"
        except OSError as err:
            why = f"{type(err).__name__}: {err.strerror}"
        return BuildOutcome(
            key=key,
            name=spec.name,
            ok=False,
            failed_step="load",
            first_error=f"the compile job's build is not visible to the GPU process ({meta}: {why})",
        )


class BuildCache:
    """``root/ext/<key>/`` holds a finished build (``outcome.json`` + ``<name>.so``).

    Inside the sandbox the root is read-only (only the evaluator writes it): a build the
    sandboxed process still needs goes to a private scratch cache in its own ``/tmp``,
    reusing the shared root's builds and precompiled header, and disappears with it.
    """

    def __init__(
        self,
        root: Path,
        cuda_arch: str,
        host_pch: bool = True,
        light_cuda_headers: bool = True,
        jail: Confinement | None = None,
        split_host: bool = False,
        light_host_headers: bool = False,
    ):
        """``jail``: run the compilers confined (only the build's own directory writable, no
        network, a dedicated uid): the sources and flags are the candidate's. ``split_host``:
        first try the .cu's host functions in the host binding (with ``light_cuda_headers``).
        ``light_host_headers`` (with ``host_pch``): the binding first against the core
        precompiled header (``HOST_CORE_HEADERS``)."""
        self.root = Path(root)
        self.light_host_headers = light_host_headers and host_pch
        self.split_host = split_host and light_cuda_headers
        self.jail = jail
        self.cuda_arch = cuda_arch
        self.host_pch = host_pch
        self.light_cuda_headers = light_cuda_headers
        self.out = self.root  # where this process writes builds
        try:
            for sub in ("ext", "tmp", "locks", "pch", "tiers"):
                (self.root / sub).mkdir(parents=True, exist_ok=True)
            for shared in (self.root, *(self.root / s for s in ("ext", "pch", "tiers"))):
                shared.chmod(0o755)
        except OSError:
            pass
        if not os.access(self.root / "ext", os.W_OK):
            self.out = Path(tempfile.gettempdir()) / "maxcode-build"
            for sub in ("ext", "tmp", "locks", "pch", "tiers"):
                (self.out / sub).mkdir(parents=True, exist_ok=True)

    def key_of(self, spec: ExtensionSpec) -> tuple[str, _Flags]:
        flags = torch_flags(spec, self.cuda_arch)
        toolchain = detect_toolchain(self.cuda_arch)
        split = self.split_host and spec.with_cuda and not spec.no_implicit_headers
        key = build_key(
            spec,
            flags,
            toolchain,
            self.light_cuda_headers,
            self.host_pch,
            split,
            self.light_host_headers,
        )
        return key, flags

    def lookup(self, key: str) -> BuildOutcome | None:
        meta = self.root / "ext" / key / "outcome.json"
        if not meta.is_file():
            meta = self.out / "ext" / key / "outcome.json"
        if not meta.is_file():
            return None
        known = {f.name for f in dataclasses.fields(BuildOutcome)}  # earlier versions' extras off
        outcome = BuildOutcome(
            **{k: v for k, v in json.loads(meta.read_text()).items() if k in known}
        )
        outcome.cached = True
        outcome.seconds = 0.0
        return outcome

    def build(self, spec: ExtensionSpec, timeout_s: float = 600.0) -> BuildOutcome:
        """Cached outcome for this spec, building it (once, under a lock) when absent."""
        key, flags = self.key_of(spec)
        hit = self.lookup(key)
        if hit is not None:
            return hit
        with _locked(self.out / "locks" / f"{key}.lock"):
            hit = self.lookup(key)  # another job finished it while we waited
            if hit is not None:
                return hit
            outcome = self._build_unlocked(spec, key, flags, timeout_s)
        return outcome

    def _build_unlocked(
        self, spec: ExtensionSpec, key: str, flags: _Flags, timeout_s: float
    ) -> BuildOutcome:
        start = time.monotonic()
        deadline = start + timeout_s
        work = Path(tempfile.mkdtemp(prefix=f"{key}.", dir=self.out / "tmp"))
        outcome = BuildOutcome(key=key, name=spec.name, ok=False)
        try:
            with self._confined(work):
                self._compile_and_link(spec, flags, work, outcome, deadline)
            outcome.seconds = round(time.monotonic() - start, 3)
            if outcome.failed_step in NOT_CACHED:
                return outcome
            final = self.out / "ext" / key
            if outcome.ok:
                outcome.so_path = str(final / f"{spec.name}.so")
            for leftover in list(work.iterdir()):
                if leftover.suffix not in (".so",):
                    leftover.unlink()
            (work / "outcome.json").write_text(json.dumps(outcome.to_dict()))
            readable_by_all(work)
            os.rename(work, final)
            return outcome
        finally:
            if work.exists():
                shutil.rmtree(work, ignore_errors=True)

    def _compile_and_link(
        self, spec: ExtensionSpec, flags: _Flags, work: Path, outcome: BuildOutcome, deadline: float
    ) -> None:
        if self._compile_split(spec, flags, work, outcome, deadline):
            return
        # The .cu compile needs no precompiled header: it starts first and runs while
        # this build waits for (or builds) the PCH, which every build of a fresh cache does.
        started: _Started = {}
        tiers = self._cuda_tiers(spec)
        cuda_cmd = _cuda_command(flags)
        if tiers:
            outcome.cuda_headers, text = tiers.pop(0)
            (work / "cuda.cu").write_text(text)
            started = _start_jobs({"cuda": cuda_cmd}, work)
        host_tiers = self._host_tiers(spec)
        host_cmd = self._host_command(spec, flags, host_tiers, work, started, outcome, deadline)
        if host_cmd is None:
            return
        started = {"host": _start_jobs({"host": host_cmd}, work)["host"], **started}
        results = _finish_jobs(started, deadline)
        if not self._host_with_more_headers(
            spec, flags, host_tiers, work, results, outcome, deadline
        ):
            return
        while tiers and results["cuda"][0] not in (0, None):
            # The lighter file was not enough (any error may be a missing declaration: an op,
            # an operator, a std header that came with torch): the next tier, up to the source
            # as written.
            spent = results["cuda"][2]
            outcome.cuda_headers, text = tiers.pop(0)
            (work / "cuda.cu").write_text(text)
            rc, log, secs = _run_parallel({"cuda": cuda_cmd}, work, deadline)["cuda"]
            results["cuda"] = (rc, log, round(spent + secs, 3))
        if "cuda" in results and results["cuda"][0] == 0:
            self._remember_tier(spec, outcome.cuda_headers)
        for step, (rc, log, secs) in results.items():
            outcome.steps[step] = secs
            if rc is None:
                outcome.failed_step, outcome.first_error = (
                    "timeout",
                    f"{step} compile exceeded the build time limit",
                )
                return
            if rc != 0:
                outcome.fail(step, rc, log, work)
                return
        objects = ["main.o"] + (["cuda.cuda.o"] if spec.with_cuda else [])
        link = {"link": [*flags.cxx, *objects, *flags.ldflags, "-o", f"{spec.name}.so"]}
        rc, log, secs = _run_parallel(link, work, deadline)["link"]
        outcome.steps["link"] = secs
        if rc is None:
            outcome.failed_step, outcome.first_error = (
                "timeout",
                "link exceeded the build time limit",
            )
        elif rc != 0:
            outcome.fail("link", rc, log, work)
        else:
            missing, log, outcome.steps["symbols"] = _unresolved_at_load(
                spec, flags, work, deadline
            )
            if missing:
                outcome.failed_step, outcome.log = "link", trim_log(log, work)[0]
                outcome.first_error = undefined_symbol_error(missing[0])
            else:
                outcome.ok = True

    def _compile_split(
        self, spec: ExtensionSpec, flags: _Flags, work: Path, outcome: BuildOutcome, deadline: float
    ) -> bool:
        """Build with the .cu's host functions moved into the host binding: the kernels at the
        "cuda only" tier (nvcc parses no torch), the host functions compiled by g++ with the
        precompiled header. True when that settled the build (built, out of time, no PCH);
        False to build the usual way, the reason in ``outcome.host_split``."""
        if not (self.split_host and spec.with_cuda and not spec.no_implicit_headers):
            return False
        if any(self._split_failed_file(spec, root).exists() for root in (self.root, self.out)):
            outcome.host_split = "an earlier split of this .cu failed"
            return False
        split = _flags_block_split(spec) or split_host_functions("\n".join(spec.cuda_sources))
        if isinstance(split, str):
            outcome.host_split = split
            return False
        # nvcc compiled the host functions at its -O level; they keep it in the binding
        # (a precompiled header of its own, as -O defines __OPTIMIZE__).
        levels = [f for f in spec.extra_cuda_cflags if _OPT_LEVEL.fullmatch(f)]
        if levels and levels[-1] not in spec.extra_cflags:
            flags = dataclasses.replace(flags, cflags=[*flags.cflags, levels[-1]])
        (work / "cuda.cu").write_text(f"{spec.cuda_cu(implicit_torch=False, body=split.kernels)}")
        started = _start_jobs({"cuda": _cuda_command(flags)}, work)
        host_tiers = self._host_tiers(spec, split.host)
        host_cmd = self._host_command(spec, flags, host_tiers, work, started, outcome, deadline)
        if host_cmd is None:
            return True
        started = {"host": _start_jobs({"host": host_cmd}, work)["host"], **started}
        results = _finish_jobs(started, deadline)
        if not self._host_with_more_headers(
            spec, flags, host_tiers, work, results, outcome, deadline
        ):
            return True
        if all(rc == 0 for rc, _, _ in results.values()):
            missing = _unresolved(split.linked, work, deadline)
            if missing:  # a stub not instantiated: the import would fail, not the link
                outcome.steps.update({f"split {k}": secs for k, (_, _, secs) in results.items()})
                outcome.host_split = f"the split leaves undefined: {', '.join(missing)[:300]}"
                self._remember_split_failed(spec)
                return False
            objects = ["main.o", "cuda.cuda.o"]
            link = [*flags.cxx, *objects, *flags.ldflags, "-o", f"{spec.name}.so"]
            results["link"] = _run_parallel({"link": link}, work, deadline)["link"]
        if any(rc is None for rc, _, _ in results.values()):
            outcome.steps.update({step: secs for step, (_, _, secs) in results.items()})
            outcome.failed_step = "timeout"
            outcome.first_error = "the build exceeded its time limit"
            return True
        killed = [
            why for step, (rc, log, _) in results.items() if (why := no_verdict(step, rc, log))
        ]
        if killed:
            outcome.steps.update({step: secs for step, (_, _, secs) in results.items()})
            outcome.failed_step, outcome.first_error = "killed", killed[0]
            return True
        failed = next((step for step, (rc, _, _) in results.items() if rc != 0), None)
        if failed is None:
            missing, log, secs = _unresolved_at_load(spec, flags, work, deadline)
            results["symbols"] = (0, log, secs)
            if missing:  # the usual build says why
                outcome.steps.update({f"split {k}": s for k, (_, _, s) in results.items()})
                outcome.host_split = f"the split leaves undefined when loaded: {missing[0]}"
                self._remember_split_failed(spec)
                return False
            outcome.steps.update({step: secs for step, (_, _, secs) in results.items()})
            outcome.cuda_headers, outcome.ok = HOST_SPLIT_TIER, True
            self._remember_tier(spec, HOST_SPLIT_TIER)
            return True
        first = trim_log(results[failed][1], work)[1]
        if failed == "link" and _MISSING_LIBRARY.search(results[failed][1]):
            # torch's own libraries are missing (a CPU-only torch): the usual build has the
            # same link command and would fail the same way
            outcome.steps.update({step: secs for step, (_, _, secs) in results.items()})
            outcome.cuda_headers, outcome.failed_step = HOST_SPLIT_TIER, "link"
            outcome.log, outcome.first_error = trim_log(results[failed][1], work)
            return True
        # Fall back to the usual build; the attempt's time stays visible in the steps.
        outcome.steps.update({f"split {step}": secs for step, (_, _, secs) in results.items()})
        outcome.host_split = f"the split failed ({failed}): {first}"
        self._remember_split_failed(spec)
        return False

    def _host_tiers(self, spec: ExtensionSpec, moved_host_code: str = "") -> list[tuple[str, str]]:
        """(headers, main.cpp text), lightest first: the core set (``HOST_CORE_HEADERS``, where
        the text allows it), the binding's own ``#include <torch/extension.h>`` lines made
        comments (line numbers kept), then the binding as torch writes it."""
        as_written = spec.main_cpp(moved_host_code)
        if not self.host_pch or spec.no_implicit_headers:
            return [("", as_written)]
        code = _COMMENT.sub("", as_written)
        if (
            not self.light_host_headers
            or _HOST_NEEDS_FRONTEND.search(code)
            or _needs_every_op(code)
            or _TORCH_OTHER_H.search(code)
        ):
            return [(HOST_FULL, as_written)]
        return [(HOST_CORE, _EXT_H.sub(_EXT_H_LINE, as_written)), (HOST_FULL, as_written)]

    def _host_with_more_headers(
        self,
        spec: ExtensionSpec,
        flags: _Flags,
        tiers: list[tuple[str, str]],
        work: Path,
        results: dict[str, tuple[int | None, str, float]],
        outcome: BuildOutcome,
        deadline: float,
    ) -> bool:
        """While a host compile with lighter headers fails on a name or an overload it could
        not find (not out of time, not killed, not a syntax error), compile it again with the
        next header set, up to torch/extension.h, the lighter compiles' time under ``light
        host``. False when a PCH failed (the failure is in ``outcome``)."""
        while True:
            rc, log, spent = results["host"]
            if not tiers or rc in (0, None) or not _LOOKUP_ERROR.search(log):
                return True
            outcome.steps["light host"] = round(outcome.steps.get("light host", 0.0) + spent, 3)
            host_cmd = self._host_command(spec, flags, tiers, work, {}, outcome, deadline)
            if host_cmd is None:
                return False
            results["host"] = _run_parallel({"host": host_cmd}, work, deadline)["host"]

    def _host_command(
        self,
        spec: ExtensionSpec,
        flags: _Flags,
        tiers: list[tuple[str, str]],
        work: Path,
        started: _Started,
        outcome: BuildOutcome,
        deadline: float,
    ) -> list[str] | None:
        """Writes ``main.cpp`` at the first of ``tiers`` (taken off the list) and returns its
        compile command, with that tier's precompiled header (waited for or built here);
        None when the PCH failed: the jobs in ``started`` are stopped and the failure is in
        ``outcome``."""
        outcome.host_headers, text = tiers.pop(0)
        (work / "main.cpp").write_text(text)
        host_cmd = [*flags.cxx, "-MMD", "-MF", "main.o.d", *flags.cflags]
        headers = outcome.host_headers
        if headers:
            t0 = time.monotonic()
            try:
                pch_header = self._ensure_pch(flags, deadline, outcome.host_headers)
            except BaseException:
                _finish_jobs(started, deadline=time.monotonic())  # stops the .cu compile
                raise
            waited = round(time.monotonic() - t0, 3)
            outcome.steps["pch"] = round(outcome.steps.get("pch", 0.0) + waited, 3)
            if isinstance(pch_header, BuildOutcome):
                _finish_jobs(started, deadline=time.monotonic())
                _copy_failure(pch_header, outcome)
                return None
            host_cmd += ["-include", str(pch_header), "-Winvalid-pch"]
        if headers == HOST_CORE:  # the ops it calls beyond the core set's, after the PCH
            host_cmd += [arg for op in _ops_beyond_core(text) for arg in ("-include", op)]
        return [*host_cmd, "-c", "main.cpp", "-o", "main.o", *flags.post_cflags]

    def _cuda_tiers(self, spec: ExtensionSpec) -> list[tuple[str, str]]:
        """(tier, .cu text), lightest first, each falling back to the next on failure: the
        CUDA headers alone for a source that never names torch; "ATen ops", ATen's Tensor
        and the headers of the ops it calls (a third of the .cu's nvcc time as written, see
        the module's docstring); the text as written."""
        if not spec.with_cuda:
            return []
        as_written = spec.cuda_cu()
        if not self.light_cuda_headers:
            return [("as written", as_written)]
        tiers = []
        if not spec.no_implicit_headers and not spec.names_torch():
            tiers.append(("cuda only", spec.cuda_cu(implicit_torch=False)))
        lean = spec.lean_torch_cu(_torch_include())
        if lean is not None:
            tiers.append(("ATen ops", lean))
        tiers.append(("as written", as_written))
        known = self._known_tier(spec)
        names = [tier for tier, _ in tiers]
        return tiers[names.index(known) :] if known in names else tiers

    def _tier_file(self, spec: ExtensionSpec, root: Path) -> Path:
        """Where the tier a .cu reached is noted: keyed by the .cu as written, its flags and
        the toolchain (not the host binding), so a rebuild with another binding or name
        skips the lighter tiers that failed."""
        payload = [
            spec.cuda_cu(),
            spec.extra_cuda_cflags,
            spec.extra_include_paths,
            asdict(detect_toolchain(self.cuda_arch)),
        ]
        digest = hashlib.sha256(json.dumps(payload).encode()).hexdigest()[:24]
        return root / "tiers" / digest

    def _split_failed_file(self, spec: ExtensionSpec, root: Path) -> Path:
        """Marks a .cu (as keyed by :meth:`_tier_file`) whose host split failed: a rebuild
        with another binding or name goes to the header tiers directly."""
        tier_file = self._tier_file(spec, root)
        return tier_file.with_name(f"{tier_file.name}.split{SPLIT_VERSION}-failed")

    def _remember_split_failed(self, spec: ExtensionSpec) -> None:
        with suppress(OSError):
            self._split_failed_file(spec, self.out).touch()

    def _known_tier(self, spec: ExtensionSpec) -> str | None:
        for root in (self.root, self.out):
            with suppress(OSError):
                return self._tier_file(spec, root).read_text()
        return None

    def _remember_tier(self, spec: ExtensionSpec, tier: str) -> None:
        path = self._tier_file(spec, self.out)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
        with suppress(OSError):
            tmp.write_text(tier)
            tmp.chmod(0o644)
            os.replace(tmp, path)

    def prepare_host_pch(
        self, timeout_s: float = 600.0, first_ready: Callable[[], None] | None = None
    ) -> None:
        """Builds, before any build asks for them, the precompiled headers a plain candidate's
        binding uses (no flags of its own): the core set first, alone, as nearly every
        binding compiles with it, then ``first_ready`` (when it was built), then the whole
        ``torch/extension.h`` for the bindings the core set cannot compile (the core set was there
        after 26.2 s, both after 94.5 s: benchmarks/results/cuda-compile/2026-11-29-build-path.json).
        Each is built by ``start_pch``'s thread, which a build that asks meanwhile waits for
        too. Builds nothing when this cache uses no PCH."""
        spec = ExtensionSpec.from_load_inline("maxcode_pch", "", cuda_sources="// none")
        flags = torch_flags(spec, self.cuda_arch)
        sets = [headers for headers, _ in self._host_tiers(spec) if headers]
        if not sets:
            return
        self.start_pch(flags, sets[0], timeout_s).join()
        if first_ready is not None and self._pch_ready(flags, sets[0]):
            first_ready()
        for thread in [self.start_pch(flags, headers, timeout_s) for headers in sets[1:]]:
            thread.join()

    def start_pch(self, flags: _Flags, headers: str, timeout_s: float) -> threading.Thread:
        """The thread building the precompiled header ``headers`` for these flags: started
        here unless this process already has one running or failed (a failed build is not
        tried again here: a build that needs it tries it once more and says why it failed;
        a built one lost later, with its cache, is built again)."""
        own = self.out / "pch" / self._pch_key(flags, headers)
        deadline = time.monotonic() + timeout_s

        def build() -> None:
            with suppress(Exception):
                if isinstance(self._ensure_pch(flags, deadline, headers), Path):
                    with _PCH_THREADS_LOCK:
                        _PCH_THREADS.pop(own, None)

        with _PCH_THREADS_LOCK:
            thread = _PCH_THREADS.get(own)
            if thread is None:
                thread = _PCH_THREADS[own] = threading.Thread(
                    target=build, name="maxcode-pch", daemon=True
                )
                thread.start()
        return thread

    def _pch_key(self, flags: _Flags, headers: str) -> str:
        """Keys the precompiled header by the host flags and toolchain (and a lighter set's text)."""
        own_set = {HOST_CORE: [_pch_header(HOST_CORE)[1]]}
        return hashlib.sha256(
            json.dumps(
                [
                    flags.cxx,
                    flags.cflags,
                    flags.post_cflags,
                    asdict(detect_toolchain(self.cuda_arch)),
                    *own_set.get(headers, []),  # torch/extension.h's keys stay
                ]
            ).encode()
        ).hexdigest()[:16]

    def _pch_ready(self, flags: _Flags, headers: str) -> bool:
        key = self._pch_key(flags, headers)
        return any((root / "pch" / key / "ok").exists() for root in (self.root, self.out))

    def _ensure_pch(self, flags: _Flags, deadline: float, headers: str) -> Path | BuildOutcome:
        """The precompiled header set ``headers`` (HOST_CORE or HOST_FULL) for exactly these
        host flags, built once under a lock."""
        key = self._pch_key(flags, headers)
        name, text = _pch_header(headers)
        shared = self.root / "pch" / key / name
        if (shared.parent / "ok").exists():
            return shared
        final = self.out / "pch" / key
        header = final / name
        if (final / "ok").exists():
            return header
        with _locked(self.out / "locks" / f"pch-{key}.lock"):
            if (final / "ok").exists():
                return header
            work = Path(tempfile.mkdtemp(prefix=f"{key}.", dir=self.out / "tmp"))
            try:
                (work / header.name).write_text(text)
                cmd = [
                    *flags.cxx,
                    *flags.cflags,
                    "-x",
                    "c++-header",
                    header.name,
                    "-o",
                    header.name + ".gch",
                    *flags.post_cflags,
                ]
                with self._confined(work):  # every build of a first wave waits for it
                    rc, log, _ = _run_parallel({"pch": cmd}, work, deadline, niced=False)["pch"]
                if rc != 0:
                    failed = BuildOutcome(key=key, name="pch", ok=False)
                    if rc is None:
                        failed.failed_step = "timeout"
                        failed.log, failed.first_error = trim_log(log or "timeout", work)
                    else:
                        failed.fail("pch", rc, log, work)
                    return failed
                (work / "ok").write_text("")
                readable_by_all(work)
                if final.exists():
                    shutil.rmtree(final)
                os.rename(work, final)
            finally:
                if work.exists():
                    shutil.rmtree(work, ignore_errors=True)
        return header

    @contextmanager
    def _confined(self, work: Path) -> Iterator[None]:
        """Compilers started by this thread inside the block run in the jail, as a uid of
        their own, ``work`` their only writable directory; ``work`` is root's again after."""
        if self.jail is None or self.jail.helper is None:
            yield
            return
        previous = getattr(_local, "build", None)
        with uid_slot() as uid:
            os.chown(work, uid, uid)
            _local.build = (self.jail, uid, (self.root, self.out))
            try:
                yield
            finally:
                _local.build = previous
                for path in (work, *work.rglob("*")):
                    with suppress(FileNotFoundError):
                        os.lchown(path, os.geteuid(), os.getegid())


def _needs_every_op(text: str) -> bool:
    """Whether ATen's Tensor and the headers of the ops called by name cannot stand in for
    torch's headers in ``text``: an umbrella header declares every op anyway, and torch::
    factories handle ``requires_grad`` where the at:: ones that ``using namespace at`` gives
    refuse it."""
    return bool(_ALL_OPS_H.search(text)) or "requires_grad" in text


def _ops_beyond_core(text: str) -> list[str]:
    """The ATen op headers of the ``torch::``/``at::`` functions ``text`` calls by name that
    the core header set does not include."""
    ops = {f"ATen/ops/{name}.h" for name in _OP_CALL.findall(_COMMENT.sub("", text))}
    return sorted(op for op in ops - set(HOST_CORE_HEADERS) if (_torch_include() / op).is_file())


def _pch_header(headers: str) -> tuple[str, str]:
    """The file name of the header set ``headers`` and its text (the includes it stands for)."""
    if headers == HOST_CORE:
        includes = "".join(f"#include <{h}>\n" for h in HOST_CORE_HEADERS)
        per_operator = (
            "#ifndef AT_PER_OPERATOR_HEADERS\n#define AT_PER_OPERATOR_HEADERS\n"
            "#define MAXCODE_PER_OPERATOR\n#endif\n"
        )
        back = "#ifdef MAXCODE_PER_OPERATOR\n#undef AT_PER_OPERATOR_HEADERS\n#endif\n"
        return "maxcode_torch_core.h", per_operator + includes + back + _TORCH_NAMESPACE + "\n"
    return "maxcode_torch_extension.h", "#include <torch/extension.h>\n"


def wait_for_pch_builds() -> None:
    """Joins this process's background precompiled-header builds: their compilers must not
    outlive the evaluator that started them."""
    with _PCH_THREADS_LOCK:
        threads = list(_PCH_THREADS.values())
    for thread in threads:
        thread.join()


@functools.cache
def _torch_include() -> Path:
    from torch.utils.cpp_extension import include_paths

    return Path(include_paths()[0])


_MISSING_LIBRARY = re.compile(r"cannot find -l(c10_cuda|torch_cuda|c10|torch\w*|cudart)\b")


def _unresolved(names: tuple[str, ...], work: Path, deadline: float) -> list[str]:
    """The symbols the split's host object takes from its kernel object by these names that
    the kernel object does not define (``nm``, run confined like the compilers)."""
    rc, log, _ = _run_parallel({"nm": ["nm", "-A", "main.o", "cuda.cuda.o"]}, work, deadline)["nm"]
    if rc != 0:
        return [f"(nm failed: {trim_log(log, work)[1]})"]
    undefined, defined = set(), set()
    for line in log.splitlines():  # "main.o:    U _Z...", "cuda.cuda.o:0000000000000010 T _Z..."
        m = re.match(r"(main|cuda\.cuda)\.o:(?:[0-9a-f]+)?\s+(\w)\s+(\S+)$", line)
        if m and m.group(1) == "main" and m.group(2) == "U":
            undefined.add(m.group(3))
        elif m and m.group(1) == "cuda.cuda" and m.group(2) not in ("U", "w", "v"):
            defined.add(m.group(3))
    tags = [f"{len(name)}{name}" for name in names]  # how the names appear mangled
    return sorted(s for s in undefined if any(t in s for t in tags) and s not in defined)


def _unresolved_at_load(
    spec: ExtensionSpec, flags: _Flags, work: Path, deadline: float
) -> tuple[list[str], str, float]:
    """The linked extension's own C++ symbols that will not resolve when it is loaded, with
    the check's log and seconds: a function the binding declares and no source defines links
    into a shared library anyway and fails only at import (qwencoder level 2 problem 58;
    torch's ``load_inline`` fails the same way). Checked here, with ``ldd -r`` run confined
    like the compilers (it relocates without running the library), because a candidate whose
    source shows every build runs no compile job that would import it: it waited for a GPU
    slot to fail there (2026-11-28). Only mangled C++ names count (the interpreter provides
    the C API at import); an answer that cannot be trusted (a library not found, ``ldd``
    missing) finds none, and the import in the compile job or the GPU process still
    catches it."""
    libs = ":".join(f[2:] for f in flags.ldflags if f.startswith("-L"))
    cmd = ["env", f"LD_LIBRARY_PATH={libs}", "ldd", "-r", f"{spec.name}.so"]
    rc, log, secs = _run_parallel({"symbols": cmd}, work, deadline)["symbols"]
    if rc != 0 or "not found" in log:
        return [], log, secs
    own = re.escape(f"{spec.name}.so)")  # "undefined symbol: _Z...\t(./name.so)"
    missing = sorted(set(re.findall(rf"^undefined symbol: (_Z\S+)\s+\(.*{own}$", log, re.M)))
    return missing, log, secs


def undefined_symbol_error(symbol: str) -> str:
    return (
        f"undefined symbol {symbol} when the extension is loaded: a function the binding "
        "declares is not defined with that signature"
    )


_OPT_LEVEL = re.compile(r"-O[0-3s]?")
# nvcc flags that do not change how host code compiles (but for -O, carried over).
_DEVICE_FLAG = re.compile(
    r"-O[0-3s]?|-?-use_fast_math|-lineinfo|--expt-(relaxed-constexpr|extended-lambda)"
    r"|-(Xptxas|-ptxas-options|maxrregcount|arch|gencode|-gpu-architecture|ftz|prec-div|prec-sqrt|fmad)([= ].*)?"
    r"|-res-usage|--resource-usage"
)


def _flags_block_split(spec: ExtensionSpec) -> str:
    """Why the candidate's flags rule out moving its host functions into the binding: host
    code compiled there must see the macros, includes and language the .cu gave it."""
    cuda = [f for f in spec.extra_cuda_cflags if not _DEVICE_FLAG.fullmatch(f)]
    if cuda:
        return f"extra_cuda_cflags {cuda} may change how host code compiles"
    cxx = [f for f in spec.extra_cflags if not _OPT_LEVEL.fullmatch(f)]
    if cxx:
        return f"extra_cflags {cxx} would change how the moved host code compiles"
    return ""


def _cuda_command(flags: _Flags) -> list[str]:
    return [
        *flags.nvcc,
        *flags.cuda_cflags,
        "-c",
        "cuda.cu",
        "-o",
        "cuda.cuda.o",
        *flags.cuda_post_cflags,
    ]


def _copy_failure(src: BuildOutcome, dst: BuildOutcome) -> None:
    dst.failed_step, dst.log, dst.first_error = src.failed_step, src.log, src.first_error


def _run_parallel(
    jobs: dict[str, list[str]], cwd: Path, deadline: float, niced: bool = True
) -> dict[str, tuple[int | None, str, float]]:
    """Run commands concurrently; rc None means killed at the deadline."""
    return _finish_jobs(_start_jobs(jobs, cwd, niced), deadline)


@dataclass
class _Job:
    """A running compile step; a waiter thread notes when it exits, so each step is timed to
    its own exit even when it is collected after a longer one."""

    proc: subprocess.Popen
    log: IO[str]
    tmpdir: Path
    started: float
    confined: bool = False  # started by the sandbox launcher: the status is in the log
    times: tuple[Path, Path] | None = None  # nvcc --time file: (written, moved to)
    exited: threading.Event = field(default_factory=threading.Event)
    ended: float = 0.0

    def _wait(self) -> None:
        self.proc.wait()
        self.ended = time.monotonic()
        self.exited.set()


_Started = dict[str, _Job]


def _nicer() -> None:
    """Runs in a compiler step's child before exec."""
    os.nice(COMPILE_NICENESS)


def _start_jobs(jobs: dict[str, list[str]], cwd: Path, niced: bool = True) -> _Started:
    """Start each command in its own session, its output to ``<step>.log`` in ``cwd`` and
    its compilers' temporary files in ``.<step>.tmp`` there (a killed nvcc or g++ leaves
    them behind), removed when the job is collected; ``COMPILE_NICENESS`` nicer unless
    ``niced`` is false (the precompiled header)."""
    started: _Started = {}
    time_dir = os.environ.get(NVCC_TIME_DIR_VAR)
    for step, cmd in jobs.items():
        log = open(cwd / f"{step}.log", "w+")  # noqa: SIM115 - closed in _finish_jobs
        tmpdir = cwd / f".{step}.tmp"
        tmpdir.mkdir(exist_ok=True)
        times = None
        if time_dir and Path(cmd[0]).name == "nvcc":  # written here, moved when collected
            times = (cwd / f".{step}.time.csv", Path(time_dir) / f"{cwd.name}.{step}.csv")
            cmd = [*cmd, "--time", str(times[0])]
        confined = getattr(_local, "build", None)
        if confined is not None:
            jail, uid, keep = confined
            os.chown(tmpdir, uid, uid)
            cmd = jail.wrap(cmd, writable=(cwd,), keep=keep, uid=uid, workdir=cwd)
        proc = subprocess.Popen(
            cmd,
            cwd=cwd,
            env=allowed_env({"TMPDIR": str(tmpdir)}),  # compilers see no secrets either
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_nicer if niced else None,
        )
        job = _Job(proc, log, tmpdir, time.monotonic(), confined is not None, times)
        threading.Thread(target=job._wait, daemon=True).start()
        started[step] = job
    return started


def _finish_jobs(started: _Started, deadline: float) -> dict[str, tuple[int | None, str, float]]:
    """(rc, output, seconds) per step; a job still running at the deadline is killed (rc None)."""
    results: dict[str, tuple[int | None, str, float]] = {}
    for step, job in started.items():
        rc: int | None = None
        if job.exited.wait(timeout=max(0.0, deadline - time.monotonic())):
            rc = job.proc.returncode
        else:
            os.killpg(job.proc.pid, 9)
            job.exited.wait()
        job.log.seek(0)
        log = job.log.read()
        if job.confined and rc is not None:
            rc, log = confined_returncode(log)
        results[step] = (rc, log, round(job.ended - job.started, 3))
        job.log.close()
        if job.times and job.times[0].is_file():
            moved, n = job.times[1], 1
            while moved.exists():  # a retried step (another tier, a failed split) keeps both
                moved, n = job.times[1].with_suffix(f".{n}.csv"), n + 1
            shutil.move(job.times[0], moved)
        shutil.rmtree(job.tmpdir, ignore_errors=True)
    return results


def trim_log(log: str, work: Path | None = None) -> tuple[str, str]:
    """(trimmed log, first error line): paths shortened, the first error kept in view."""
    if work is not None:
        log = log.replace(str(work) + "/", "")
    lines = [ln for ln in log.splitlines() if ln.strip()]
    first_idx = next((i for i, ln in enumerate(lines) if re.search(r"\berror\b", ln, re.I)), None)
    first = (
        lines[first_idx].strip()
        if first_idx is not None
        else (lines[-1].strip() if lines else "no compiler output")
    )
    start = max(0, (first_idx or 0) - 3)
    kept = "\n".join(lines[start:])
    if len(kept) > MAX_LOG_CHARS:
        kept = kept[: MAX_LOG_CHARS - 200] + "\n[...]\n" + kept[-180:]
    return kept, first[:300]


class _locked:
    """Exclusive flock on a lock file: serializes builders of one key across processes."""

    def __init__(self, path: Path):
        self.path = path

    def __enter__(self) -> None:
        self._f = open(self.path, "a")
        fcntl.flock(self._f, fcntl.LOCK_EX)

    def __exit__(self, *exc: object) -> None:
        fcntl.flock(self._f, fcntl.LOCK_UN)
        self._f.close()


def import_extension(outcome: BuildOutcome) -> ModuleType:
    """Load a built extension module from its cached .so (several with one name may coexist)."""
    if not outcome.ok or not outcome.so_path:
        raise BuildError(outcome)
    loader = importlib.machinery.ExtensionFileLoader(outcome.name, outcome.so_path)
    spec = importlib.util.spec_from_file_location(outcome.name, outcome.so_path, loader=loader)
    try:
        module = importlib.util.module_from_spec(spec)
        loader.exec_module(module)
    except ImportError as err:
        if "undefined symbol" not in str(err):
            raise
        # A function declared to the binding and never defined (or defined with another
        # signature) links into a shared library anyway and fails when it is loaded: the
        # build is what is broken (torch's load_inline fails the same way).
        symbol = str(err).rpartition("undefined symbol: ")[2]
        raise BuildError(
            replace(
                outcome,
                ok=False,
                failed_step="link",
                first_error=undefined_symbol_error(symbol),
            )
        ) from err
    return module
