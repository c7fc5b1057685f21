"""Check ``torch_tampering``: torch as the candidate found it, compared after its import and calls.

A candidate that replaces ``torch.relu`` with a slow version, or turns on TF32 or
``cudnn.benchmark``, changes the reference it is measured or checked against. The
snapshot is taken before the candidate is imported; ``changes`` lists every function,
class, Tensor method, ``nn`` module method, backend flag or default that differs since,
and ``restore`` puts them back so the rest of the evaluation runs on torch as shipped.
"""

from __future__ import annotations

import contextlib
import importlib
import types
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

_MISSING = object()


# Imported before the snapshot: importing them wraps torch functions (torch._dynamo wraps
# torch.manual_seed and nn.Module.__init__), which is torch's own doing, not the candidate's.
PRELOAD = (
    "torch._dynamo",
    "torch.profiler",
    "torch.utils.flop_counter",
    "torch.utils.cpp_extension",
)


def _namespaces() -> dict[str, Any]:
    """Namespaces whose callables a candidate must leave alone, by dotted name."""
    spaces: dict[str, Any] = {
        "torch": torch,
        "torch.nn.functional": torch.nn.functional,
        "torch.Tensor": torch.Tensor,
        "torch._C.TensorBase": torch._C.TensorBase,
        "torch.linalg": torch.linalg,
        "torch.fft": torch.fft,
        "torch.special": torch.special,
    }
    for name, cls in vars(torch.nn).items():  # nn.ReLU.forward, nn.Module.__call__, ...
        if isinstance(cls, type) and issubclass(cls, torch.nn.Module):
            spaces[f"torch.nn.{name}"] = cls
    return spaces


@dataclass(frozen=True)
class _Flag:
    read: Callable[[], Any]
    write: Callable[[Any], None]


def _attr_flag(owner: Callable[[], Any], attr: str) -> _Flag:
    return _Flag(lambda: getattr(owner(), attr, None), lambda v: setattr(owner(), attr, v))


FLAGS: dict[str, _Flag] = {
    **{
        f"torch.backends.cuda.matmul.{a}": _attr_flag(lambda: torch.backends.cuda.matmul, a)
        for a in (
            "allow_tf32",
            "allow_fp16_reduced_precision_reduction",
            "allow_bf16_reduced_precision_reduction",
        )
    },
    **{
        f"torch.backends.cudnn.{a}": _attr_flag(lambda: torch.backends.cudnn, a)
        for a in ("allow_tf32", "benchmark", "deterministic", "enabled")
    },
    "torch.get_default_dtype()": _Flag(torch.get_default_dtype, torch.set_default_dtype),
    "torch.get_float32_matmul_precision()": _Flag(
        torch.get_float32_matmul_precision, torch.set_float32_matmul_precision
    ),
    "torch.are_deterministic_algorithms_enabled()": _Flag(
        torch.are_deterministic_algorithms_enabled, torch.use_deterministic_algorithms
    ),
}


def _guarded_entries(space: Any) -> dict[str, Any]:
    """Callables and classes of a namespace; submodules come and go with imports, so not them."""
    return {
        k: v
        for k, v in vars(space).items()
        if (callable(v) and not isinstance(v, types.ModuleType))
        or isinstance(v, staticmethod | classmethod | property)
    }


def _read_flags() -> dict[str, Any]:
    with warnings.catch_warnings():  # newer torch deprecates the allow_tf32 spellings
        warnings.simplefilter("ignore")
        return {name: flag.read() for name, flag in FLAGS.items()}


@dataclass
class TorchSnapshot:
    """Identity of every guarded callable and the value of every flag, at one moment."""

    entries: dict[str, dict[str, Any]]
    flags: dict[str, Any]

    @classmethod
    def take(cls) -> TorchSnapshot:
        for name in PRELOAD:
            importlib.import_module(name)
        with contextlib.suppress(ImportError, AttributeError):  # torch.compile's first call does it
            from torch._dynamo.mutation_guard import install_generation_tagging_init

            install_generation_tagging_init()  # wraps nn.Module.__init__ / __setstate__
        return cls({n: _guarded_entries(s) for n, s in _namespaces().items()}, _read_flags())

    def changes(self) -> list[str]:
        """What differs now, as 'name replaced' / 'flag: old -> new' (sorted, stable)."""
        found = []
        spaces = _namespaces()
        for space_name, before in self.entries.items():
            space = spaces.get(space_name)
            now = vars(space) if space is not None else {}
            for key, obj in before.items():
                if now.get(key, _MISSING) is not obj:
                    found.append(f"{space_name}.{key} replaced")
            if space is not None:
                found += [
                    f"{space_name}.{key} added"
                    for key in _guarded_entries(space).keys() - before.keys()
                ]
        for name, value in _read_flags().items():
            if value != self.flags[name]:
                found.append(f"{name}: {value_text(self.flags[name])} -> {value_text(value)}")
        return sorted(found)

    def restore(self) -> None:
        """Put every replaced callable and changed flag back."""
        spaces = _namespaces()
        for space_name, before in self.entries.items():
            space = spaces.get(space_name)
            if space is None:
                continue
            for key, obj in before.items():
                if vars(space).get(key, _MISSING) is not obj:
                    setattr(space, key, obj)
            for key in _guarded_entries(space).keys() - before.keys():
                delattr(space, key)
        now = _read_flags()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for name, value in self.flags.items():
                if now[name] != value:
                    FLAGS[name].write(value)


def value_text(value: Any) -> str:
    return repr(value) if not isinstance(value, torch.dtype) else str(value)
