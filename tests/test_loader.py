"""The one strict loader: nesting, coercion, presets, did-you-mean, the key path."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from maxcode.errors import ConfigError
from maxcode.loader import load


@dataclass(frozen=True)
class Inner:
    rate: float = field(default=1.0, metadata={"exclusive_min": 0})
    names: tuple[str, ...] = ()


@dataclass(frozen=True)
class Outer:
    size: int = field(default=2, metadata={"min": 1})
    mode: str = field(default="a", metadata={"choices": ("a", "b")})
    limit: int | None = None
    inner: Inner = field(default_factory=Inner)

    def __post_init__(self) -> None:
        if self.mode == "b" and self.size > 3:
            raise ValueError("mode b takes size <= 3")


def test_nesting_and_coercion():
    cfg = load(Outer, {"size": 3, "inner": {"rate": 2, "names": ["x", "y"]}}, "blk")
    assert cfg == Outer(size=3, inner=Inner(rate=2.0, names=("x", "y")))
    assert isinstance(cfg.inner.rate, float)
    assert load(Outer, None, "blk") == Outer()
    assert load(Outer, {"limit": None}, "blk").limit is None


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"sise": 3}, r"blk: unknown key\(s\) 'sise' \(did you mean 'size'\?\)"),
        ({"inner": {"rat": 1}}, r"blk\.inner: unknown key\(s\) 'rat' \(did you mean 'rate'\?\)"),
        ({"size": 0}, r"blk\.size: must be >= 1, got 0"),
        ({"size": True}, r"blk\.size: expected an integer, got True"),
        ({"mode": "c"}, r"blk\.mode: 'c' is not one of \['a', 'b'\]"),
        ({"inner": {"rate": 0}}, r"blk\.inner\.rate: must be > 0"),
        ({"inner": {"names": "x"}}, r"blk\.inner\.names: expected a list"),
        ({"limit": "3"}, r"blk\.limit: expected int or null, got '3'"),
        ({"mode": "b", "size": 4}, r"blk: mode b takes size <= 3"),
        ([1, 2], r"blk: expected a mapping, got list"),
    ],
)
def test_every_error_names_the_key_path(data, message):
    with pytest.raises(ConfigError, match=message):
        load(Outer, data, "blk")


def test_presets_start_from_a_named_set():
    presets = {"big": {"size": 3, "inner": {"rate": 5.0}}}
    cfg = load(Outer, {"preset": "big", "inner": {"names": ["z"]}}, "blk", presets=presets)
    assert cfg == Outer(size=3, inner=Inner(rate=5.0, names=("z",)))
    with pytest.raises(ConfigError, match=r"blk\.preset: 'huge' is not one of \['big'\]"):
        load(Outer, {"preset": "huge"}, "blk", presets=presets)
    with pytest.raises(ConfigError, match=r"unknown key\(s\) 'preset'"):
        load(Outer, {"preset": "big"}, "blk")  # no presets: not a key of Outer
