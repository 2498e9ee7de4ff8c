"""The generated reference pages (docs/config.md, docs/envs.md) match the code; every option has a doc."""

from __future__ import annotations

import difflib

import attrs
import pytest

from ragen_core.validators import integer, one_of
from tests.docs.gen import ROOT, load_generator

gen = load_generator()


@pytest.mark.parametrize("page", sorted(gen.PAGES))
def test_generated_page_is_in_sync(page: str) -> None:
    try:
        fresh = gen.PAGES[page]()
    except gen.DocsUnavailable as exc:
        pytest.skip(f"docs/{page} cannot be generated here: {exc}")
    path = ROOT / "docs" / page
    committed = path.read_text(encoding="utf-8") if path.exists() else ""
    if committed != fresh:
        diff = list(difflib.unified_diff(committed.splitlines(), fresh.splitlines(), f"docs/{page} (committed)",
                                         f"docs/{page} (from the code)", lineterm="", n=1))
        shown = "\n".join(diff[:60]) + (f"\n... {len(diff) - 60} more diff lines" if len(diff) > 60 else "")
        pytest.fail(f"docs/{page} is out of date with the code; regenerate it with {gen.REGENERATE}\n{shown}",
                    pytrace=False)


def test_every_config_option_has_a_doc() -> None:
    missing = gen.undocumented_options()
    assert not missing, (
        "config options without a description (add an ':ivar NAME: ...' line to the class docstring, or "
        f"attrs.field(metadata={{'doc': ...}})), then regenerate with {gen.REGENERATE}: " + ", ".join(missing))


def test_every_builtin_env_registers_a_full_guide() -> None:
    from ragen_core.registry import GUIDE_KEYS
    from ragen_plugins_envs.registration_guides import GUIDES

    registries = gen.builtin_registries()
    missing = {spec.name: sorted(set(GUIDE_KEYS) - set(spec.guide)) for spec in registries.envs.envs()
               if set(spec.guide) != set(GUIDE_KEYS)}
    assert not missing, (f"envs without their full catalogue entry: {missing}; add them to "
                         f"ragen_plugins_envs/registration_guides.py, then regenerate with {gen.REGENERATE}")
    stale = sorted(set(GUIDES) - {spec.name for spec in registries.envs.envs()})
    assert not stale, f"ragen_plugins_envs/registration_guides.py describes envs that are not registered: {stale}"


def test_only_builtin_plugins_are_documented() -> None:
    names = gen.builtin_plugin_names()
    assert {"envs", "filters", "estimators", "diagnostics", "torch"} <= set(names)
    plugins = {spec.plugin for reg in gen.builtin_registries().all().values() for spec in reg}
    assert plugins <= set(names)


# --------------------------------------------------------------------------------------------- the helpers


def _documented(_inst, attribute, value):  # noqa: ANN001, ANN202
    """In (0, 1]."""
    if not 0 < value <= 1:
        raise ValueError(f"'{attribute.name}' must be in (0, 1]: {value}")


def _undocumented(_inst, attribute, value):  # noqa: ANN001, ANN202
    if value not in ("a", "b"):
        raise ValueError(f"'{attribute.name}' must name one of {', '.join(('a', 'b'))} and more: {value}")


@attrs.define
class _Example:
    """An example.

    :ivar a: the first
        option, on two lines.
    """

    a: int = attrs.field(default=1, validator=integer(1))
    b: float = attrs.field(default=0.5, validator=[attrs.validators.gt(0), _documented])
    c: str | None = attrs.field(default=None, validator=attrs.validators.optional(_undocumented),
                                metadata={"doc": "from metadata"})
    d: list[int] = attrs.field(factory=lambda: [1, 2])
    e: str = attrs.field(default="x", validator=one_of("x", "y"))


def test_option_rows_read_types_defaults_ranges_and_docs() -> None:
    """The allowed column: a shared validator's description, attrs' own bounds, a validator function's docstring
    line; a function without a docstring shows nothing (its source is not read)."""
    rows = {r.key: r for r in gen.option_rows(_Example)}
    assert rows["a"].allowed == "an integer >= 1" and rows["a"].doc == "the first option, on two lines."
    assert rows["b"].allowed == "> 0, in (0, 1]" and rows["b"].type == "float"
    assert rows["c"].allowed == "" and rows["c"].doc == "from metadata" and rows["c"].type == "str | null"
    assert rows["d"].default == "`[1, 2]`" and rows["d"].type == "list[int]" and rows["d"].doc == ""
    assert rows["e"].allowed == "one of 'x', 'y'"


def test_text_helpers() -> None:
    assert gen.rst_to_md("see :class:`~a.b.Thing` and ``x = 1``") == "see `Thing` and `x = 1`"
    assert gen.cell("a | b\nc") == "a \\| b c"
    assert gen.fenced("has ``` inside")[0] == "````"
    assert gen.yaml_flow({"a": [1, 2], "s": "||"}) == "{a: [1, 2], s: '||'}"
