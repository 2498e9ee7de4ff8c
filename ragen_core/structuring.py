"""Structuring: plain data (YAML's dicts, lists, scalars) into attrs config classes and back, strictly.

:func:`structure` checks every value against the field's type (``int``, ``float``, ``Literal``, ``X | None``,
lists, mappings, nested attrs classes), refuses unknown keys with the nearest valid one suggested, and raises one
:class:`~ragen_core.errors.ConfigError` naming the full key path; :func:`unstructure` is the inverse. It needs only
attrs and the core's errors, so the registry, the env base class and every config class can use it.
"""

from __future__ import annotations

import collections.abc as cabc
import enum
import math
import re
import types
import typing
from typing import Any, Literal, Union

import attrs

from ragen_core.errors import ConfigError, RagenError, suggest
from ragen_core.ragen_keys import ragen_hint

__all__ = ["ECHO_LIMIT", "INTERNAL", "join_path", "short_repr", "structure", "unstructure"]


def structure(cls: type, data: Any, path: str = "") -> Any:
    """Build an instance of attrs class ``cls`` from plain data, strictly.

    Unknown keys, wrong types and validator failures raise :class:`ConfigError` naming ``path.key``. Supported field
    types: ``bool``, ``int``, ``float`` (ints accepted), ``str``, ``Any``, ``None``, ``Optional``/``Union``,
    ``Literal``, enums, ``list[X]``, ``tuple[X, ...]``, ``tuple[X, Y]``, ``dict[str, X]``/``Mapping`` and nested
    attrs classes.
    """
    return _structure_value(cls, data, path)


#: attrs field metadata marking bookkeeping that is not a config key (never read from or written to YAML)
INTERNAL = "ragen_internal"


def _is_key(f: attrs.Attribute[Any]) -> bool:
    return f.init and not f.metadata.get(INTERNAL)


def join_path(path: str, key: Any) -> str:
    return f"{path}.{key}" if path else str(key)


def _structure_attrs(cls: type, data: Any, path: str) -> Any:
    if data is None:
        data = {}
    if attrs.has(type(data)) and isinstance(data, cls):
        return data
    if not isinstance(data, cabc.Mapping):
        raise ConfigError(f"{path or cls.__name__}: expected a mapping of options, got {_tname(data)} {short_repr(data)}")
    hook = getattr(cls, "__ragen_structure__", None)
    if hook is not None:
        data = hook(dict(data))
    try:
        attrs.resolve_types(cls)
    except NameError as exc:
        raise RagenError(f"config class {cls.__qualname__} has an annotation that cannot be resolved: {exc}",
                         hint="define config classes at module level and import the types they use") from exc
    fields = {f.alias or f.name: f for f in attrs.fields(cls) if _is_key(f)}
    for key in data:
        if key not in fields:
            close = suggest(str(key), list(fields))
            hint = ragen_hint(join_path(path, key), data[key]) or (f"did you mean {join_path(path, close)!r}?"
                if close else f"valid keys: {', '.join(sorted(fields)) or '(none: this section takes no options)'}")
            raise ConfigError(f"unknown config key {join_path(path, key)!r}", hint=hint)
    kwargs = {}
    for key, value in data.items():
        kwargs[key] = _structure_value(fields[key].type, value, join_path(path, key))
    try:
        return cls(**kwargs)
    except (ValueError, TypeError) as exc:
        match = _FIELD_MSG.match(str(exc))
        if match and match.group(1) in fields:
            raise ConfigError(f"{join_path(path, match.group(1))}: {match.group(2)}") from exc
        raise ConfigError(f"{path or cls.__name__}: {exc}") from exc


_FIELD_MSG = re.compile(r"^'?(\w+)'? (must .*)$", re.S)


#: the most characters of a value echoed in an error message
ECHO_LIMIT = 200


def short_repr(value: Any) -> str:
    """``repr(value)``, cut to :data:`ECHO_LIMIT` characters (an error line never carries a huge value)."""
    text = repr(value)
    return text if len(text) <= ECHO_LIMIT else text[:ECHO_LIMIT - 3] + "..."


def _tname(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _structure_value(tp: Any, value: Any, path: str) -> Any:
    """``value`` checked against (and converted to) type ``tp``; a mismatch raises :class:`ConfigError` at ``path``."""
    if tp is Any or tp is object or tp is None and value is None:
        return value
    if isinstance(tp, str):
        raise ConfigError(f"{path}: unresolved type annotation {tp!r}")
    if attrs.has(tp):
        return _structure_attrs(tp, value, path)
    origin = typing.get_origin(tp)
    if tp is type(None):
        if value is None:
            return None
        raise ConfigError(f"{path}: expected null, got {_tname(value)} {short_repr(value)}")
    if origin in (Union, types.UnionType):
        return _structure_union(tp, value, path)
    if origin is Literal or (isinstance(tp, type) and issubclass(tp, enum.Enum)):
        return _structure_choice(tp, value, path)
    if tp in _SCALARS:
        return _SCALARS[tp](value, path)
    if origin in (list, cabc.Sequence, cabc.MutableSequence, tuple, dict, cabc.Mapping, cabc.MutableMapping) \
            or tp in (list, tuple, dict):
        return _structure_container(tp, value, path)
    if isinstance(tp, type):
        if isinstance(value, tp):
            return value
        raise ConfigError(f"{path}: expected {tp.__name__}, got {_tname(value)} {short_repr(value)}")
    raise ConfigError(f"{path}: unsupported config type {_type_str(tp)}")


def _structure_union(tp: Any, value: Any, path: str) -> Any:
    """The first member type of union ``tp`` that takes ``value`` (null for an optional)."""
    args = typing.get_args(tp)
    if value is None and type(None) in args:
        return None
    errors = []
    for arg in args:
        if arg is type(None):
            continue
        try:
            return _structure_value(arg, value, path)
        except ConfigError as exc:
            errors.append(exc)
    if len(errors) == 1:
        raise errors[0]
    raise ConfigError(f"{path}: {short_repr(value)} matches none of {_type_str(tp)}")


def _structure_choice(tp: Any, value: Any, path: str) -> Any:
    """A ``Literal`` member (a bool only where the literal lists one) or an enum member, by value."""
    if typing.get_origin(tp) is Literal:
        args = typing.get_args(tp)
        if value in args and not (isinstance(value, bool) and not any(isinstance(a, bool) for a in args)):
            return value
        close = suggest(str(value), [str(a) for a in args])
        raise ConfigError(f"{path}: {short_repr(value)} is not one of {', '.join(repr(a) for a in args)}",
                          hint=f"did you mean {close!r}?" if close else None)
    try:
        return tp(value)
    except ValueError:
        raise ConfigError(f"{path}: {short_repr(value)} is not one of {', '.join(repr(m.value) for m in tp)}") from None


def _structure_bool(value: Any, path: str) -> bool:
    if isinstance(value, bool):
        return value
    raise ConfigError(f"{path}: expected true or false, got {_tname(value)} {short_repr(value)}")


def _structure_int(value: Any, path: str) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    raise ConfigError(f"{path}: expected an integer, got {_tname(value)} {short_repr(value)}")


def _structure_float(value: Any, path: str) -> float:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            number = float(value)
        except OverflowError:
            number = math.inf
        if not math.isfinite(number):
            raise ConfigError(f"{path}: expected a finite number, got {short_repr(value)}")
        return number
    raise ConfigError(f"{path}: expected a number, got {_tname(value)} {short_repr(value)}")


def _structure_str(value: Any, path: str) -> str:
    if isinstance(value, str):
        return value
    raise ConfigError(f"{path}: expected a string, got {_tname(value)} {short_repr(value)}")


_SCALARS: dict[Any, Any] = {bool: _structure_bool, int: _structure_int, float: _structure_float,
                            str: _structure_str}


def _structure_container(tp: Any, value: Any, path: str) -> Any:
    """A list, a tuple (fixed or ``tuple[X, ...]``) or a mapping, each item structured against its type."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (dict, cabc.Mapping, cabc.MutableMapping) or tp is dict:
        if not isinstance(value, cabc.Mapping):
            raise ConfigError(f"{path}: expected a mapping, got {_tname(value)} {short_repr(value)}")
        kt, vt = args if args else (Any, Any)
        return {_structure_value(kt, k, path): _structure_value(vt, v, join_path(path, k)) for k, v in value.items()}
    if not isinstance(value, (list, tuple)):
        raise ConfigError(f"{path}: expected a list, got {_tname(value)} {short_repr(value)}")
    if origin is not tuple:  # a list, a sequence or a bare tuple
        item = args[0] if args else Any
        return [_structure_value(item, v, f"{path}[{i}]") for i, v in enumerate(value)]
    if len(args) == 2 and args[1] is Ellipsis:
        return tuple(_structure_value(args[0], v, f"{path}[{i}]") for i, v in enumerate(value))
    if len(value) != len(args):
        raise ConfigError(f"{path}: expected {len(args)} items, got {len(value)}")
    return tuple(_structure_value(a, v, f"{path}[{i}]") for i, (a, v) in enumerate(zip(args, value)))


def _type_str(tp: Any) -> str:
    return getattr(tp, "__name__", None) or str(tp).replace("typing.", "")


def unstructure(obj: Any) -> Any:
    """Turn an attrs config (possibly nested) into plain YAML-able data."""
    if attrs.has(type(obj)):
        return {f.alias or f.name: unstructure(getattr(obj, f.name))
                for f in attrs.fields(type(obj)) if _is_key(f)}
    if isinstance(obj, enum.Enum):
        return obj.value
    if isinstance(obj, cabc.Mapping):
        return {str(k): unstructure(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [unstructure(v) for v in obj]
    return obj
