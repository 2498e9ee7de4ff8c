"""Reading config text: YAML documents (bounded in depth and size, YAML 1.2 floats) and dotted ``key=value``
overrides applied to the loaded data."""

from __future__ import annotations

import copy
import re
from typing import Any

from ragen_core.errors import ConfigError
from ragen_core.structuring import short_repr

__all__ = ["YAML_MAX_DEPTH", "YAML_MAX_NODES", "apply_overrides", "load_yaml", "parse_override"]


#: YAML 1.2 floats (``1e-6``, ``3E5``) that PyYAML's YAML 1.1 resolver leaves as strings
_FLOAT = re.compile(r"^[-+]?(?:\d+\.?\d*|\.\d+)[eE][-+]?\d+$")


#: the deepest nesting a config document may have (RAGEN's configs use 4 levels)
YAML_MAX_DEPTH = 64
#: the most nodes a document may expand to once its aliases are followed (an alias "bomb" is refused before it is
#: built: 9 levels of 9 aliases are 387 million nodes in 509 bytes)
YAML_MAX_NODES = 100_000


def _expanded(node: Any, memo: dict[int, int]) -> int:
    """The nodes of a composed YAML document once its aliases are followed (capped just over the limit)."""
    if id(node) not in memo:
        memo[id(node)] = 1  # a recursive alias counts once
        kids = [c for item in node.value for c in (item if isinstance(item, tuple) else (item,))] \
            if isinstance(node.value, list) else []
        memo[id(node)] = min(1 + sum(_expanded(c, memo) for c in kids), YAML_MAX_NODES + 1)
    return memo[id(node)]


def load_yaml(text: str) -> Any:
    """``yaml.safe_load``, with YAML 1.2 floats (``1e-6`` is a float) and limits: a key repeated in one mapping, more
    than :data:`YAML_MAX_DEPTH` levels of nesting, or aliases that expand to more than :data:`YAML_MAX_NODES` nodes
    raise ``yaml.YAMLError`` with the line, instead of a silent choice, a ``RecursionError`` or an exhausted memory."""
    import yaml

    class Loader(yaml.SafeLoader):  # type: ignore[misc]  # PyYAML ships no type hints
        depth = 0

        def compose_node(self, parent: Any, index: Any) -> Any:
            self.depth += 1
            if self.depth > YAML_MAX_DEPTH:
                line = self.peek_event().start_mark.line + 1
                raise yaml.YAMLError(f"nested more than {YAML_MAX_DEPTH} levels deep (line {line})")
            node = super().compose_node(parent, index)
            self.depth -= 1
            return node

        def construct_document(self, node: Any) -> Any:
            if _expanded(node, {}) > YAML_MAX_NODES:
                raise yaml.YAMLError(f"expands to more than {YAML_MAX_NODES:,} values once its aliases (*name) "
                                     "are followed")
            return super().construct_document(node)

        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            seen: dict[str, int] = {}
            for key, _ in node.value:
                if isinstance(key, yaml.ScalarNode) and key.tag != "tag:yaml.org,2002:merge":
                    if key.value in seen:
                        raise yaml.YAMLError(f"duplicate key {short_repr(key.value)} (line {key.start_mark.line + 1}, "
                                             f"first on line {seen[key.value]}): a mapping names each key once")
                    seen[key.value] = key.start_mark.line + 1
            return super().construct_mapping(node, deep)

    Loader.add_implicit_resolver("tag:yaml.org,2002:float", _FLOAT, list("-+0123456789."))
    return yaml.load(text, Loader=Loader)  # noqa: S506 (a SafeLoader subclass)


def parse_override(text: str) -> tuple[list[str], Any]:
    """Parse ``a.b.c=value`` into (``["a", "b", "c"]``, typed value). Values are YAML: ``3``, ``0.5``,
    ``true``, ``null``, ``[1, 2]``, ``{a: 1}``; anything else is a string."""
    import yaml

    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key or any(not part for part in key.split(".")):
        raise ConfigError(f"bad override {text!r}", hint="overrides look like key.sub=value, e.g. rollout.group_size=8")
    try:
        value = load_yaml(raw) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw
    return key.split("."), value


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Apply dotted overrides (in order) to a nested dict/list structure; returns a new structure."""
    data = copy.deepcopy(data)
    for text in overrides:
        keys, value = parse_override(text)
        _set_path(data, keys, value, text)
    return data


_SHORTHAND = {"filter", "estimator", "trainer"}


def _set_path(data: dict[str, Any], keys: list[str], value: Any, text: str) -> None:
    node: Any = data
    for i, key in enumerate(keys[:-1]):
        if i == 0 and key == "env":
            key = keys[0] = "envs"
            node.setdefault("envs", [{}])
            node = node["envs"]
            if not isinstance(node, list) or len(node) != 1:
                raise ConfigError(f"override {text!r}: 'env.' needs exactly one env", hint="use envs.N.key=value")
            node = node[0]
            if isinstance(node, str):
                node = data["envs"][0] = {"name": node}
            continue
        if isinstance(node, list):
            try:
                idx = int(key)
                if isinstance(node[idx], str):  # a name shorthand ("envs: [a, b]") gains options
                    node[idx] = {"name": node[idx]}
                node = node[idx]
            except (ValueError, IndexError):
                raise ConfigError(f"override {text!r}: {'.'.join(keys[:i + 1])!r} is not a valid list index") from None
            continue
        if not isinstance(node, dict):
            raise ConfigError(f"override {text!r}: {'.'.join(keys[:i])!r} is not a section")
        child = node.get(key)
        if child is None:
            child = node[key] = {}
        elif isinstance(child, str) and i == 0 and key in _SHORTHAND:
            child = node[key] = {"name": child}
        node = child
    last = keys[-1]
    if len(keys) == 1 and last == "env":
        data.pop("envs", None)
        data["envs"] = [value]
        return
    if isinstance(node, list):
        try:
            node[int(last)] = value
        except (ValueError, IndexError):
            raise ConfigError(f"override {text!r}: {last!r} is not a valid list index") from None
        return
    if not isinstance(node, dict):
        raise ConfigError(f"override {text!r}: {'.'.join(keys[:-1])!r} is not a section")
    if len(keys) == 1 and last in _SHORTHAND and isinstance(value, str):
        value = {"name": value}
    node[last] = value
