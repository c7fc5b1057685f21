"""The one strict loader: a params mapping becomes a config dataclass, or a ConfigError.

Every config dataclass of the project is built here, so every block of ``params.yaml``
gets the same rules: nested dataclasses, int-to-float and list-to-tuple coercion, a
``preset`` key that starts from a named preset, an unknown key answered with "did you
mean", and the full key path (``evaluation.cpp.workers``) in every message. Bounds
and choices live on the fields (``metadata``: ``choices``, ``min``, ``max``,
``exclusive_min``), so the JSON schema is generated from the same place
(``maxcode.params.json_schema``).
"""

from __future__ import annotations

import dataclasses
import difflib
import types
import typing
from collections.abc import Mapping
from typing import Any, TypeVar

from maxcode.errors import ConfigError

C = TypeVar("C")

PRESET_KEY = "preset"


def load(
    cls: type[C],
    data: Mapping[str, Any] | None,
    where: str,
    *,
    presets: Mapping[str, Mapping[str, Any]] | None = None,
    **fixed: Any,
) -> C:
    """Build ``cls`` from ``data`` (None: all defaults) or raise ConfigError naming ``where``.

    ``presets`` names the starting points a ``preset:`` key may pick; ``fixed`` are
    fields the caller sets itself (a method's name, an LLM role), not the user.
    """
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise ConfigError(f"{where}: expected a mapping, got {type(data).__name__} {data!r}")
    data = dict(data)
    if presets is not None and PRESET_KEY in data:
        name = data.pop(PRESET_KEY)
        if name not in presets:
            raise ConfigError(f"{where}.{PRESET_KEY}: {name!r} is not one of {sorted(presets)}")
        data = merge(presets[name], data)
    settable = [f for f in dataclasses.fields(cls) if f.init and f.name not in fixed]
    names = [f.name for f in settable]
    reject_unknown(
        data, names, where, [PRESET_KEY] if presets is not None else [], owner=cls.__name__
    )
    hints = typing.get_type_hints(cls)
    kwargs = dict(fixed)
    for f in settable:
        if f.name in data:
            path = f"{where}.{f.name}"
            value = coerce(data[f.name], hints[f.name], path)
            check_field(f, value, path)
            kwargs[f.name] = value
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise ConfigError(f"{where}.{f.name}: required key is missing")
    try:
        return cls(**kwargs)
    except ConfigError as err:  # keep its type (an LLMConfigError stays one)
        err.args = (_with_path(str(err), where),)
        raise
    except (TypeError, ValueError) as err:
        raise ConfigError(_with_path(str(err), where)) from err


def merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """``override`` on top of ``base``, mappings merged key by key."""
    out = dict(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out


def coerce(value: Any, hint: Any, where: str) -> Any:
    """``value`` as the type ``hint`` asks for, or a ConfigError saying what was expected."""
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if hint is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        errors = []
        for option in (a for a in args if a is not type(None)):
            try:
                return coerce(value, option, where)
            except ConfigError as err:
                errors.append(err)
        raise ConfigError(f"{where}: expected {describe(hint)}, got {value!r}")
    if origin is typing.Literal:
        if value not in args:
            raise ConfigError(f"{where}: {value!r} is not one of {list(args)}")
        return value
    if dataclasses.is_dataclass(hint):
        return load(hint, value, where)
    if origin is tuple:
        if not isinstance(value, list | tuple):
            raise ConfigError(f"{where}: expected a list, got {value!r}")
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(coerce(v, args[0], f"{where}[{i}]") for i, v in enumerate(value))
        if not args:
            return tuple(value)
        if len(args) != len(value):
            raise ConfigError(f"{where}: expected {len(args)} items, got {len(value)}")
        return tuple(
            coerce(v, a, f"{where}[{i}]") for i, (v, a) in enumerate(zip(value, args, strict=True))
        )
    if origin is list:
        if not isinstance(value, list | tuple):
            raise ConfigError(f"{where}: expected a list, got {value!r}")
        return (
            [coerce(v, args[0], f"{where}[{i}]") for i, v in enumerate(value)]
            if args
            else list(value)
        )
    if origin is dict or hint is dict:
        if not isinstance(value, Mapping):
            raise ConfigError(f"{where}: expected a mapping, got {value!r}")
        if not args:
            return dict(value)
        return {
            coerce(k, args[0], f"{where}"): coerce(v, args[1], f"{where}.{k}")
            for k, v in value.items()
        }
    if hint is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{where}: expected true or false, got {value!r}")
        return value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{where}: expected an integer, got {value!r}")
        return value
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"{where}: expected a number, got {value!r}")
        return float(value)
    if hint is str:
        if not isinstance(value, str):
            raise ConfigError(f"{where}: expected a string, got {value!r}")
        return value
    if isinstance(hint, type) and not isinstance(value, hint):
        raise ConfigError(f"{where}: expected {describe(hint)}, got {value!r}")
    return value


def check_field(f: dataclasses.Field, value: Any, where: str) -> None:
    """The bounds and choices a field declares in its metadata."""
    meta = f.metadata
    if "choices" in meta and value is not None:
        items = value if isinstance(value, tuple | list) else (value,)
        for item in items:
            if item not in meta["choices"]:
                raise ConfigError(f"{where}: {item!r} is not one of {list(meta['choices'])}")
    if value is None or isinstance(value, bool) or not isinstance(value, int | float):
        return
    if "min" in meta and value < meta["min"]:
        raise ConfigError(f"{where}: must be >= {meta['min']}, got {value}")
    if "exclusive_min" in meta and value <= meta["exclusive_min"]:
        raise ConfigError(f"{where}: must be > {meta['exclusive_min']}, got {value}")
    if "max" in meta and value > meta["max"]:
        raise ConfigError(f"{where}: must be <= {meta['max']}, got {value}")


def describe(hint: Any) -> str:
    """A type as a params author reads it."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(describe(a) for a in typing.get_args(hint))
    if hint is type(None):
        return "null"
    return getattr(hint, "__name__", str(hint))


def reject_unknown(
    data: Mapping[str, Any], names: list[str], where: str, extra: list[str], owner: str = ""
) -> None:
    """An unknown key fails with the nearest allowed ones ("did you mean") and the list."""
    allowed = [*names, *extra]
    unknown = [k for k in data if k not in allowed]
    if not unknown:
        return
    parts = []
    for key in unknown:
        close = difflib.get_close_matches(str(key), allowed, n=2)
        parts.append(
            f"{key!r}" + (f" (did you mean {' or '.join(map(repr, close))}?)" if close else "")
        )
    listing = (
        f"allowed: {sorted(allowed)}"
        if len(allowed) <= 30
        else f"allowed keys are the fields of {owner} ({len(allowed)} of them)"
    )
    raise ConfigError(f"{where}: unknown key(s) {', '.join(parts)}; {listing}")


def _with_path(message: str, where: str) -> str:
    """Prefix the key path unless the message already starts with it (or a deeper one)."""
    head, _, last = where.rpartition(".")
    if message.startswith(where.split(".")[0]):
        return message
    if head and message.startswith(f"{last}."):  # "budget.max_calls: ..." inside llm.x.budget
        return f"{head}.{message}"
    return f"{where}: {message}"
