"""The ``symbols`` option the grid envs (FrozenLake, Sokoban) share: role -> symbol, merged over the env's own."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import attrs

__all__ = ["merge_symbols", "symbols_validator"]


def merge_symbols(defaults: Mapping[str, str], value: Mapping[str, str] | None) -> dict[str, str]:
    """Symbols given by the user (possibly only some roles) merged over ``defaults``."""
    merged = dict(defaults)
    if value is not None:
        merged.update(value)
    return merged


def symbols_validator(defaults: Mapping[str, str]) -> Callable[[Any, attrs.Attribute, Mapping[str, str]], None]:
    """The attrs validator of a ``symbols`` field whose roles are the keys of ``defaults``."""
    roles = sorted(defaults)

    def check(_inst: Any, attribute: attrs.Attribute, value: Mapping[str, str]) -> None:
        """Known roles only, each with a different non-blank one-line symbol."""
        unknown = sorted(set(value) - set(roles))
        if unknown:
            raise ValueError(f"{attribute.name} has unknown roles {unknown}; the roles are {roles}")
        for role, sym in value.items():
            if not isinstance(sym, str) or not sym.strip() or "\n" in sym or "\r" in sym:
                raise ValueError(f"{attribute.name}[{role!r}] must be a non-blank one-line string, got {sym!r}")
        if len(set(value.values())) != len(value):
            raise ValueError(f"{attribute.name} must give every role a different symbol, got {dict(value)}")

    return check
