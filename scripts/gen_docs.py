#!/usr/bin/env python3
"""Generate the reference pages of ``docs/`` from the code: ``config.md`` and ``envs.md``.

::

    python scripts/gen_docs.py            # rewrite docs/config.md and docs/envs.md
    python scripts/gen_docs.py --check    # exit 1, naming the stale pages, when they are out of date
    make docs                             # the same as the first, plus docs/hooks.md

``config.md`` is read off the attrs config classes: the core sections (:mod:`ragen_core.config`) and the options
class of every registered component — key, type, default, the validator's range where it can be read, and the
field's doc (attrs field metadata ``doc``/``help``, else the class docstring's ``:ivar name:`` line).

``envs.md`` is the env catalogue: per env its rules (the ``guide`` its plugin registered), valid actions,
default options, variants, and the first prompt of seed 0 exactly as the core's prompt builder
(:mod:`ragen_core.starpo.chat`) renders it.

Only the built-in plugins (the repository's ``ragen-plugins-*`` distributions) are loaded, so a third-party plugin
installed on the machine does not change the pages. The output is deterministic: sorted, no timestamps, no absolute paths, and no text that
depends on the machine (the installed Coq version in the coq prompts is shown as ``Coq <version>``).
``tests/docs/test_docs_sync.py`` regenerates both pages and compares them with the committed files.
"""

from __future__ import annotations

import argparse
import enum
import importlib.metadata as md
import inspect
import re
import sys
import types
import typing
from pathlib import Path
from typing import Any, Literal, Union

import attrs

from ragen_core.validators import Constraint

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
REGENERATE = "make docs (or: python scripts/gen_docs.py)"


class DocsUnavailable(RuntimeError):
    """Something the pages document cannot be built on this machine (a missing optional package or program)."""


# --------------------------------------------------------------------------------------------- plugins

def builtin_plugin_names() -> list[str]:
    """Entry-point names (group ``ragen``) of the built-in plugins: those of the ``ragen-plugins-*`` distributions."""
    names = set()
    for ep in md.entry_points(group="ragen"):
        dist = getattr(ep, "dist", None)
        if dist is not None and (dist.name or "").lower().replace("_", "-").startswith("ragen-plugins-"):
            names.add(ep.name)
    return sorted(names)


#: the env-hub adapters (docs/hubs.md): built-in distributions whose envs the catalogue (envs.md) leaves out, since
#: their first prompts come from another library or a server; their options are in config.md like the others'
HUB_PLUGINS = ("reasoning_gym", "textarena", "openenv", "gymnasium")


def builtin_registries(hubs: bool = True) -> Any:
    """Registries filled by the built-in plugins only (autoload off, the built-ins named explicitly), the env-hub
    adapters included unless ``hubs`` is false."""
    from ragen_core.plugins import build_plugin_manager, collect_registries

    names = [n for n in builtin_plugin_names() if hubs or n not in HUB_PLUGINS]
    if not names:
        raise DocsUnavailable("no built-in plugin (ragen-plugins-*) is installed (make setup)")
    pm = build_plugin_manager(environ={"RAGEN_DISABLE_PLUGIN_AUTOLOAD": "1", "RAGEN_PLUGINS": ",".join(names)})
    return collect_registries(pm)


# --------------------------------------------------------------------------------------------- text helpers

_ROLE = re.compile(r":(?:class|func|meth|mod|data|attr|obj|exc):`~?([^`<]*?)(?:\s*<([^>]*)>)?`")


def rst_to_md(text: str) -> str:
    """Docstring reST to Markdown: ````code```` → ```code```, ``:class:`~a.B``` → ```B```."""
    def role(m: re.Match[str]) -> str:
        target = m.group(1).strip()
        if m.group(0).startswith(tuple(f":{r}:`~" for r in ("class", "func", "meth", "mod", "data", "attr", "obj",
                                                                "exc"))):
            target = target.split(".")[-1]
        return f"`{target}`"

    text = _ROLE.sub(role, text)
    return re.sub(r"``(.+?)``", r"`\1`", text, flags=re.S)


def cell(text: str) -> str:
    """Text for one Markdown table cell: one line, pipes escaped."""
    return " ".join(str(text).split()).replace("|", "\\|")


def code(text: str) -> str:
    """Inline code for a table cell (backticks that can hold backticks)."""
    text = cell(text)
    fence = "``" if "`" in text else "`"
    pad = " " if "`" in text else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def fenced(text: str, lang: str = "") -> list[str]:
    """A fenced code block long enough not to be closed by the text's own backticks."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return [fence + lang, text.rstrip("\n"), fence]


def anchor(kind: str, name: str) -> str:
    """A stable HTML anchor id."""
    return re.sub(r"[^a-z0-9_-]+", "-", f"{kind}-{name}".lower()).strip("-")


def yaml_flow(value: Any) -> str:
    """``value`` as a one-line YAML flow value (how it is written in a config file or an override)."""
    import yaml

    from ragen_core.config import unstructure

    text = yaml.safe_dump(unstructure(value), default_flow_style=True, allow_unicode=True, width=10**9,
                          sort_keys=False).strip()
    return text[:-4].strip() if text.endswith("\n...") else text


# --------------------------------------------------------------------------------------------- attrs introspection

def type_name(tp: Any) -> str:
    """A readable type: ``int``, ``float | None``, ``"full" | "single_turn"``, ``list[EnvChoice]``."""
    if tp is Any or tp is object:
        return "any"
    if tp is None or tp is type(None):
        return "null"
    if isinstance(tp, str):
        return tp
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is Literal:
        return " | ".join(f'"{a}"' if isinstance(a, str) else yaml_flow(a) for a in args)
    if origin in (Union, types.UnionType):
        return " | ".join(type_name(a) for a in args)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return " | ".join(f'"{m.value}"' for m in tp)
    if origin is not None:
        name = getattr(origin, "__name__", str(origin))
        if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
            return f"tuple[{type_name(args[0])}, ...]"
        return f"{name}[{', '.join(type_name(a) for a in args)}]" if args else name
    return getattr(tp, "__name__", str(tp).replace("typing.", ""))


def ivar_docs(cls: type) -> dict[str, str]:
    """``:ivar name: text`` entries of the class docstring and its bases' (the nearest class wins)."""
    out: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        doc = inspect.cleandoc(klass.__dict__.get("__doc__") or "")
        current = None
        for line in doc.splitlines():
            m = re.match(r":ivar (\w+):\s*(.*)", line)
            if m:
                current = m.group(1)
                out[current] = m.group(2)
            elif current and line.startswith((" ", "\t")) and line.strip():
                out[current] += " " + line.strip()
            else:
                current = None
    return {k: " ".join(v.split()) for k, v in out.items()}


def class_summary(cls: type) -> str:
    """The class docstring without its ``:ivar``/``:param`` fields, as Markdown."""
    doc = inspect.cleandoc(cls.__dict__.get("__doc__") or "")
    kept, skipping = [], False
    for line in doc.splitlines():
        if re.match(r":(ivar|param|cvar|var|returns?|raises?)\b", line):
            skipping = True
            continue
        if skipping and (line.startswith((" ", "\t")) and line.strip()):
            continue
        skipping = False
        kept.append(line)
    return rst_to_md("\n".join(kept).strip())


def field_doc(cls: type, field: attrs.Attribute) -> str:
    meta = field.metadata or {}
    for key in ("doc", "help", "description"):
        if meta.get(key):
            return " ".join(str(meta[key]).split())
    return ivar_docs(cls).get(field.name, "") or ivar_docs(cls).get(field.alias or field.name, "")


def describe_validator(v: Any) -> list[str]:
    """Readable constraints of an attrs validator: attrs' own bounds (``>= 1``), a
    :class:`~ragen_core.validators.Constraint`'s description, or the first line of a validator function's docstring.

    Empty when it only checks a type or a choice the type column shows, and for a function without a docstring.
    """
    if v is None:
        return []
    if isinstance(v, (list, tuple)):
        return [p for x in v for p in describe_validator(x)]
    name = type(v).__name__
    if name == "_AndValidator":
        return describe_validator(list(v._validators))
    if name == "_OptionalValidator":
        return describe_validator(v.validator)
    if name == "_NumberValidator":
        return [f"{v.compare_op} {v.bound}"]
    if name == "_MinLengthValidator":
        return [f"at least {v.min_length} items"]
    if name == "_MaxLengthValidator":
        return [f"at most {v.max_length} items"]
    if name in ("_InstanceOfValidator", "_InValidator", "_IsCallableValidator", "_DeepIterable", "_DeepMapping"):
        return []
    if hasattr(v, "options"):
        return []  # a choice validator: the type column already lists the choices
    if isinstance(v, Constraint):
        return [v.description]
    doc = inspect.getdoc(v) if inspect.isfunction(v) else None
    if not doc:
        return []  # a function without a docstring: its constraint is not known (write one; see validators.py)
    line = doc.splitlines()[0].strip().rstrip(".")
    # a sentence's capital ("Known roles only") reads as a phrase in the table; an acronym ("HTTP ...") stays
    return [line[:1].lower() + line[1:] if line[1:2].islower() else line]


@attrs.frozen
class OptionRow:
    key: str
    type: str
    default: str
    allowed: str
    doc: str


def option_rows(cls: type, defaults: dict[str, Any] | None = None,
                sections: dict[Any, str] | None = None) -> list[OptionRow]:
    """One row per init field of attrs class ``cls`` (in declaration order); ``defaults`` overrides the class's
    defaults, ``sections`` maps field types documented in a section of their own to its anchor."""
    from ragen_core.config import unstructure

    attrs.resolve_types(cls)
    rows = []
    for f in attrs.fields(cls):
        if not f.init or f.metadata.get("ragen_internal"):  # bookkeeping, not a config key
            continue
        key = f.alias or f.name
        if defaults is not None and key in defaults:
            value = defaults[key]
        elif f.default is attrs.NOTHING:
            value = attrs.NOTHING
        elif isinstance(f.default, attrs.Factory):  # type: ignore[arg-type]
            value = f.default.factory() if not f.default.takes_self else attrs.NOTHING
        else:
            value = f.default
        if value is not attrs.NOTHING and f.converter is not None and callable(f.converter):
            value = f.converter(value)
        section = sections.get(f.type) if sections else None
        if section:
            default = f"[section `{section}`](#{section})"
        elif value is attrs.NOTHING:
            default = "required"
        else:
            default = code(yaml_flow(unstructure(value)))
        allowed = ", ".join(describe_validator(f.validator))
        rows.append(OptionRow(key, type_name(f.type), default, allowed, rst_to_md(field_doc(cls, f))))
    return rows


def option_table(rows: list[OptionRow], prefix: str = "") -> list[str]:
    if not rows:
        return ["No options."]
    out = ["| key | type | default | allowed | description |", "|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {code(prefix + r.key)} | {code(r.type)} | {r.default} | {cell(r.allowed)} | "
                   f"{cell(r.doc)} |")
    return out


def undocumented_options() -> list[str]:
    """``Class.field`` for every documented config field without a doc (the sync test's coverage check)."""
    missing = []
    for cls in _core_classes():
        missing += [f"{cls.__module__}:{cls.__qualname__}.{r.key}" for r in option_rows(cls) if not r.doc]
    registries = builtin_registries()
    seen: set[type] = set()
    for _kind, reg in registries.all().items():
        for spec in reg:
            if not hasattr(spec, "config_class"):
                continue
            cls = spec.config_class()
            if cls in seen:
                continue
            seen.add(cls)
            missing += [f"{cls.__module__}:{cls.__qualname__}.{r.key}" for r in option_rows(cls) if not r.doc]
    return sorted(missing)


# --------------------------------------------------------------------------------------------- config.md

def _core_classes() -> list[type]:
    from ragen_core import config as core

    return [core.RagenConfig, core.RunConfig, core.PluginsConfig, core.EnvChoice, core.RolloutConfig]


#: registry kind -> (section title, how a config selects one (a sentence), config path prefix of its options)
KINDS: dict[str, tuple[str, str, str]] = {
    "filters": ("Rollout filters", "Select one with `filter: NAME` or `filter: {name: NAME, <option>: <value>}`; "
                "override with `filter=NAME filter.<option>=<value>`.", "filter."),
    "estimators": ("Advantage estimators", "Select one with `estimator: NAME` or `estimator: {name: NAME, "
                   "<option>: <value>}`; override with `estimator=NAME estimator.<option>=<value>`.", "estimator."),
    "diagnostics": ("Diagnostics", "Select a list with `diagnostics: [NAME, {name: NAME, <option>: <value>}]`; "
                    "override with `\"diagnostics=[collapse, echo_trap]\"` or `diagnostics.0.<option>=<value>`.", ""),
    "trainers": ("Trainers", "Select one with `trainer: NAME` or `trainer: {name: NAME, <option>: <value>}`; "
                 "override with `trainer.<option>=<value>`.", "trainer."),
    "sinks": ("Metric sinks", "Select a list with `sinks: [NAME, {name: NAME, <option>: <value>}]`; every metrics "
              "record also goes to `metrics.jsonl`.", ""),
    "policies": ("Policy backends", "Used by `ragen eval` to sample from a model; `ragen eval --help` shows how a "
                 "backend is chosen and given options.", ""),
}
KIND_ORDER = ["filters", "estimators", "diagnostics", "trainers", "sinks", "policies"]

_STANDARD_DESCRIBE = {"name", "kind", "entry_point", "description", "plugin", "config", "preset",
                      "hints", "guide"}  # an env's hints and guide: in the env catalogue


def _spec_facts(spec: Any) -> list[str]:
    facts = [f"plugin `{spec.plugin}`", f"class `{spec.entry_point}`" if isinstance(spec.entry_point, str) else ""]
    for key, value in spec.describe().items():
        if key in _STANDARD_DESCRIBE or value in ("", None, [], (), {}):
            continue
        facts.append(f"{key.replace('_', ' ')}: {code(value if isinstance(value, str) else yaml_flow(value))}")
    return [f for f in facts if f]


def render_config() -> str:
    """The configuration reference (``docs/config.md``)."""
    from ragen_core import config as core

    registries = builtin_registries()
    out = [
        "# Configuration reference",
        "",
        "<!-- generated by `python scripts/gen_docs.py` (make docs) from the attrs config classes; "
        "tests/docs/test_docs_sync.py keeps it in sync -->",
        "",
        "Every key ragen reads, with its type, default and allowed range, generated from the attrs classes that "
        "validate it: the core sections and the options class of every built-in component. A run's "
        "configuration is built in this order, later wins:",
        "",
        "1. the defaults below;",
        "2. for `ragen train` (and `ragen eval` without `--model`) without a config file, the selected trainer's "
        "embedded preset (see [Trainer presets](#trainer-presets)); `ragen eval --model RUN_DIR` starts from that "
        "run's `config.yaml`;",
        "3. the **rollout hints** of the envs the config runs (training and validation), for the keys the user's "
        "file and overrides do not set: `rollout.max_turn`, `rollout.max_actions_per_turn`, `rollout.think`, and "
        "`rollout.max_new_tokens` = the env's answer tokens plus, when the run thinks, its reasoning tokens; "
        "several envs get the values that fit all of them (the most turns, actions and tokens any asks for). Each "
        "env's hints are in the [env catalogue](envs.md); a plugin's env declares its own "
        "([how](plugins.md#rollout-hints)). Likewise a config that sets no `run.name` is named after the model and "
        "envs (`tiny-bandit`; two or three envs joined by `-`, `multi` beyond; just the envs without a `model`);",
        "4. the YAML file given on the command line (`ragen train my.yaml`);",
        "5. dotted `key=value` overrides, typed as YAML (`rollout.group_size=8`, `filter=top_p`, "
        "`\"envs=[{name: sokoban, groups: 6}, {name: bandit, groups: 2}]\"`).",
        "",
        "The defaults and a preset are only what to use when nothing else says: an env's hints replace them, so "
        "`ragen train env=bandit` runs Bandit's shape (one turn, one action) under Bandit's name whatever the "
        "preset was written for. What the user's file or command line sets is never replaced, even when it equals "
        "a default. A run directory's `config.yaml` holds every key, so `--resume` and `ragen eval --model "
        "RUN_DIR` keep the run's shape. `ragen config show` prints, as comments, each key filled in from hints "
        "and where it came from.",
        "",
        "Unknown keys, wrong types and values out of range fail before anything runs, naming the full key and the "
        "nearest valid one. `ragen config show [CONFIG] [key=value ...]` prints the resolved config with every "
        "default filled in. The [quickstart](quickstart.md) shows the workflow, the [env catalogue](envs.md) the "
        "environments, the [metrics glossary](metrics.md) what a run logs, and [coming from RAGEN](from_ragen.md) "
        "the mapping from RAGEN's Hydra keys.",
        "",
        "The *allowed* column shows what the field's validator enforces, where it can be read off the code; the "
        "*type* column lists the choices of enumerated fields.",
        "",
        "## Contents",
        "",
        "- [Top level](#top-level)",
        "- [`run`](#run) · [`plugins`](#plugins) · [`envs` entries](#envs-entries) · [`variants`](#variants) · "
        "[`rollout`](#rollout)",
    ]
    kinds = [k for k in KIND_ORDER if k in registries.all()] + sorted(
        k for k in registries.all() if k not in KIND_ORDER and k != "envs")
    for kind in kinds:
        title = KINDS.get(kind, (kind.capitalize(), f"Components registered with `ragen_register_{kind}`.", ""))[0]
        out.append(f"- [{title}](#{anchor('kind', kind)}): " + " · ".join(
            f"[`{s.name}`](#{anchor(kind, s.name)})" for s in registries.all()[kind]))
    out.append("- [Env options](#env-options): " + " · ".join(
        f"[`{s.name}`](#{anchor('env', s.name)})" for s in registries.envs.envs()))
    out.append("- [Trainer presets](#trainer-presets)")
    out.append("")

    # top level
    top_defaults = core.default_config_data()
    for key, kind in core.DEFAULTED.items():  # unnamed in the core: the built-in plugins' offered default
        top_defaults[key] = {"name": getattr(registries, kind).default().name}
    out += ["## Top level", "", class_summary(core.RagenConfig), "",
            "`env: NAME` (or `env: {name: NAME, options: {...}}`) is shorthand for a one-entry `envs` list. "
            "Component sections (`filter`, `estimator`, `trainer`) take a name or a mapping with `name` and the "
            "component's options written flat beside it.", ""]
    sections = {core.RunConfig: "run", core.PluginsConfig: "plugins", core.RolloutConfig: "rollout"}
    out += option_table(option_rows(core.RagenConfig, top_defaults, sections))
    out.append("")
    for title, cls, prefix, extra in (
        ("run", core.RunConfig, "run.", ""),
        ("plugins", core.PluginsConfig, "plugins.", "Environment variables add to these: "
         "`RAGEN_DISABLE_PLUGINS=a,b`, `RAGEN_DISABLE_PLUGIN_AUTOLOAD=1` with `RAGEN_PLUGINS=a,b`, "
         "`RAGEN_TRACE_HOOKS=1`."),
        ("envs entries", core.EnvChoice, "", "Each entry of `envs:` and `val_envs:` (a plain name is "
         "`{name: NAME}`). Override one entry with `envs.0.groups=6` or `env.options.dim_room=[8,8]` when there is "
         "a single env. An env's options are listed under [Env options](#env-options)."),
        ("rollout", core.RolloutConfig, "rollout.", ""),
    ):
        out += [f"## `{title}`" if title != "envs entries" else "## `envs` entries", ""]
        summary = class_summary(cls)
        out += [summary, ""] if summary else []
        out += [extra, ""] if extra else []
        out += option_table(option_rows(cls), prefix)
        out.append("")
        if title == "plugins":
            out += ["## `variants`", "",
                    "Env variants declared in the config file, usable wherever an env name is (like the built-in "
                    "variants of the [env catalogue](envs.md)):", "",
                    *fenced("variants:\n  sokoban_big:\n    env: sokoban            # an env or another variant\n"
                            "    params: {dim_room: [10, 10], num_boxes: 3, max_actions_per_traj: 30}\n"
                            "    instruction: null       # replaces the env's instruction in the prompt when set\n"
                            "    description: a bigger room\n"
                            "    hints: {max_turn: 15}   # rollout hints over sokoban's\nenv: sokoban_big", "yaml"),
                    "",
                    "| key | type | default | description |", "|---|---|---|---|",
                    "| `env` | `str` | `required` | the env or variant it derives from |",
                    "| `params` | `dict[str, any]` | `{}` | options merged over the base's, validated by the env's "
                    "options class |",
                    "| `instruction` | `str \\| null` | `null` | replaces the env's instruction in the system prompt |",
                    "| `description` | `str` | `''` | one line shown by `ragen envs` |",
                    "| `hints` | `dict[str, any] \\| null` | `null` | rollout hints over the base's, key by key: "
                    "`max_turn`, `max_actions_per_turn`, `answer_tokens`, `think_tokens`, `think` "
                    "([what they do](#top-level)) |", ""]

    # components
    for kind in kinds:
        title, how, prefix = KINDS.get(kind, (kind.capitalize(), f"Components registered with "
                                                          f"`ragen_register_{kind}`.", ""))
        reg = registries.all()[kind]
        out += [f'<a id="{anchor("kind", kind)}"></a>', "", f"## {title}", ""]
        if how:
            out += [how, ""]
        for spec in reg:
            cls = spec.config_class()
            out += [f'<a id="{anchor(kind, spec.name)}"></a>', "", f"### `{spec.name}`", ""]
            if spec.description:
                out += [cell(spec.description) + ".", ""] if not spec.description.endswith(".") else [
                    cell(spec.description), ""]
            out += ["- " + " · ".join(_spec_facts(spec)),
                    f"- options class `{cls.__module__}:{cls.__qualname__}`", ""]
            summary = class_summary(cls)
            if summary and cls.__name__ != "NoOptions":
                out += [summary, ""]
            out += option_table(option_rows(cls), prefix if kind != "diagnostics" else "")
            out.append("")

    # envs
    out += ['<a id="env-options"></a>', "", "## Env options", "",
            "Options of each env class, set per env entry (`envs: [{name: sokoban, options: {dim_room: [8, 8]}}]`, "
            "or `env.options.dim_room=[8,8]` for a single env) or through a variant's `params`. A variant's "
            "parameters are merged over its env's defaults; the entry's `options` over both. Rules, actions, "
            "rewards and example prompts are in the [env catalogue](envs.md).", ""]
    for spec in registries.envs.envs():
        cls = spec.config_class()
        variants = sorted((v for v in registries.envs.variants()
                           if registries.envs.resolve(v.name)[0].name == spec.name), key=lambda v: v.name)
        out += [f'<a id="{anchor("env", spec.name)}"></a>', "", f"### `{spec.name}`", "",
                cell(spec.description) + ("" if spec.description.endswith(".") else "."), "",
                "- " + " · ".join(_spec_facts(spec)) + (f" · [hub adapter](hubs.md#hub-{spec.plugin})"
                                                         if spec.plugin in HUB_PLUGINS else
                                                         f" · [catalogue](envs.md#{anchor('env', spec.name)})"),
                f"- options class `{cls.__module__}:{cls.__qualname__}`"]
        if variants:
            out.append("- variants: " + ", ".join(
                f"`{v.name}` ({code(yaml_flow(registries.envs.resolve(v.name)[1]))})" for v in variants))
        out.append("")
        out += option_table(option_rows(cls))
        out.append("")

    # presets
    out += ["## Trainer presets", "",
            "`ragen train` (and `ragen eval` without `--model`) without a config file starts from the selected "
            "trainer's embedded preset instead of the bare defaults above; overrides still apply on top, and "
            "`trainer=NAME` selects whose preset. `make train` runs `ragen train` with no arguments: the `torch` "
            "preset.", ""]
    for spec in registries.trainers:
        path = spec.preset_path() if hasattr(spec, "preset_path") else None
        if path is None:
            continue
        out += [f"### `{spec.name}`: `{spec.preset}`", "", *fenced(path.read_text(), "yaml"), ""]
    return "\n".join(out).rstrip() + "\n"


# --------------------------------------------------------------------------------------------- envs.md


#: env or variant -> (options used for the example prompt, why): where the defaults need a service
EXAMPLE_OPTIONS: dict[str, tuple[dict[str, Any], str]] = {
    "lean": ({"use_double": True}, "rendered with `use_double: true` (the local Kimina protocol double), since the "
                                   "real env needs a running Kimina Lean server; the double reports the goals "
                                   "recorded for the built-in theorems"),
    "searchqa_dense": ({"retriever": "bm25"}, "rendered with `retriever: bm25`: the retriever changes only what a "
                                              "search returns, never the first prompt (the dense retriever embeds "
                                              "the whole corpus first)"),
}


def _coq_placeholders() -> dict[str, str]:
    """The coq env names the installed Coq in its instruction and state (``Coq 8.16.1``); the catalogue shows
    ``Coq <version>``. Its first prompt also shows coqtop's goals, so it needs coqtop."""
    from ragen_plugins_envs.prover.coq import coq_version

    version = coq_version()
    if not version:
        raise DocsUnavailable("the coq env's first prompt needs coqtop (apt-get install coq)")
    return {f"Coq {version}": "Coq <version>"}


#: base env -> a function returning {text the machine puts into the prompt: what the catalogue shows instead}, so
#: that the pages do not change with the machine that renders them (it raises DocsUnavailable when the machine
#: cannot render the env's prompt at all)
MACHINE_TEXT: dict[str, Any] = {"coq": _coq_placeholders}
#: the note below a prompt with such placeholders
MACHINE_NOTES: dict[str, str] = {
    "coq": "`Coq <version>` stands for the installed Coq's version (`coqtop -print-version`, e.g. `8.16.1`), which the "
           "instruction and the state name.",
}


@attrs.frozen
class Prompt:
    system: str
    user: str
    text: str
    action_names: tuple[str, ...] | None
    max_actions: int
    legend: dict[str, str]


def rollout_for(registries: Any, name: str) -> Any:
    """The rollout section of a config that only says ``env: NAME``: the defaults, shaped by the env's hints."""
    from ragen_core.config import apply_env_hints, load_config

    return apply_env_hints(load_config(None, [f"env={name}"]), registries).rollout


def hints_line(registries: Any, name: str) -> str:
    """One sentence on the rollout shape env ``name`` declares (its hints)."""
    h = registries.envs.hints(name)
    if not h.given():
        return "declares no rollout hints (the `rollout` defaults apply)"
    parts = []
    if h.max_turn is not None:
        parts.append(f"up to {h.max_turn} turn{'s' if h.max_turn != 1 else ''}")
    if h.max_actions_per_turn is not None:
        parts.append(f"{h.max_actions_per_turn} action{'s' if h.max_actions_per_turn != 1 else ''} per turn")
    if h.answer_tokens is not None:
        parts.append(f"`max_new_tokens` {h.max_new_tokens(True)} with thinking ({h.answer_tokens} answer + "
                     f"{h.max_new_tokens(True) - h.answer_tokens} reasoning), {h.max_new_tokens(False)} without")
    if h.think is not None:
        parts.append(f"`think: {str(h.think).lower()}`")
    return ", ".join(parts)


def first_prompt(registries: Any, name: str, options: dict[str, Any] | None = None) -> Prompt:
    """The first prompt of env ``name`` at seed 0, with the rollout settings ``env: NAME`` alone gets (the defaults
    shaped by the env's hints, :func:`rollout_for`), as the model sees it (text that depends on the machine
    replaced as :data:`MACHINE_TEXT` says)."""
    from ragen_core.errors import RagenError
    from ragen_core.starpo.chat import ChatCodec, TextTokenizer, system_message, user_message

    rc = rollout_for(registries, name)
    try:
        env = registries.envs.make(name, options or {})
        try:
            obs, _info = env.reset(seed=0)
            system = system_message(env, max_actions_per_turn=rc.max_actions_per_turn, action_sep=rc.action_sep)
            budget = int(env.max_actions_per_traj)
            user = user_message(1, obs, budget, max_new_tokens=rc.max_new_tokens, think=rc.think)
            names = tuple(env.action_names) if getattr(env, "action_names", None) else None
            legend = dict(getattr(env, "legend", None) or {})
        finally:
            close = getattr(env, "close", None)
            if callable(close):
                close()
    except (RagenError, ImportError, OSError) as exc:
        raise DocsUnavailable(f"env {name!r} cannot be made here: {type(exc).__name__}: {exc}") from exc
    base = registries.envs.resolve(name)[0].name
    for machine, shown in (MACHINE_TEXT[base]() if base in MACHINE_TEXT else {}).items():
        system, user = system.replace(machine, shown), user.replace(machine, shown)
    codec = ChatCodec(TextTokenizer(), think=rc.think)
    text = codec.render([{"role": "system", "content": system}, {"role": "user", "content": user}],
                        generation=True) + codec.open_tag
    return Prompt(system, user, text, names, budget, legend)


def render_envs() -> str:
    """The env catalogue (``docs/envs.md``)."""
    from ragen_core.config import RolloutConfig, unstructure
    from ragen_core.registry import GUIDE_KEYS

    registries = builtin_registries(hubs=False)
    rc = RolloutConfig()
    envs = registries.envs
    out = [
        "# Environment catalogue",
        "",
        "<!-- generated by `python scripts/gen_docs.py` (make docs) from the registered envs; "
        "tests/docs/test_docs_sync.py keeps it in sync -->",
        "",
        "Every env and variant the built-in `envs` plugin registers: its rules, actions, rewards, success "
        "criterion, default options and the first prompt of seed 0 as the model sees it. `ragen envs` lists them, "
        "`ragen play NAME --seed 0` plays one in the terminal, `env: NAME` trains on one. Every option is "
        "described in the [configuration reference](config.md#env-options); the [quickstart](quickstart.md) shows "
        "how to swap envs and the [metrics glossary](metrics.md) what a run reports per env.",
        "",
        "## How an episode is shown to the model",
        "",
        "The prompt is built by the core (`ragen_core.starpo.chat`), the same for every env and trainer:",
        "",
        "- **system message**: `You're a helpful assistant.`, the env's instruction, the legend of the symbols "
        "in the state (when the env has one) and the valid action names with how many actions one answer may "
        "hold (`rollout.max_actions_per_turn`, separated by `rollout.action_sep`);",
        "- **user message** per turn: the previous turn's reward (from turn 2), a warning when the previous answer "
        "had no valid action, `Turn n:`, the state, the actions left in the trajectory, the required format and "
        "the response budget (`rollout.max_new_tokens`);",
        "- the generation prompt is the chat template's, followed by the literal `<think>` (or `<answer>` with "
        "`rollout.think=false`), so the model continues inside the tag.",
        "",
        "The answer is parsed as `<think>…</think><answer>…</answer>`; the answer is split on `||`, unknown action "
        "names are dropped, and at most `max_actions_per_turn` actions run, in order, until the episode ends. A "
        "turn with no match, no valid action or a dropped action adds `rollout.format_penalty` (−0.1) to the "
        "score. The trajectory ends when the env ends the episode, after `rollout.max_turn` turns, or when the "
        "env's action budget (`max_actions_per_traj` below) is spent. Success is the env's `success` at "
        "termination (not truncation); `pass@k` is any success in a group.",
        "",
        "**Rollout shape.** Each env declares how its rollouts are shaped (its *rollout hints*, given at "
        "registration): how many turns a trajectory needs, how many actions one answer may hold, and how many "
        "tokens its answers and their reasoning take. A config that does not set `rollout.max_turn`, "
        "`rollout.max_actions_per_turn`, `rollout.max_new_tokens` or `rollout.think` itself gets the env's values "
        "(a mix of envs: the values that fit all); the precedence is in the "
        "[configuration reference](config.md). Each env below lists its hints.",
        "",
        f"The examples below use seed 0 and the rollout settings `env: NAME` alone gets (the defaults shaped by the "
        f"env's hints; `think={str(rc.think).lower()}`), rendered with a ChatML template "
        "(`<|im_start|>role … <|im_end|>`), the template of the built-in `tiny` model, Qwen and SmolLM2.",
        "",
        "## All envs and variants",
        "",
        "| name | base | parameters | description |",
        "|---|---|---|---|",
    ]
    for spec in envs:
        if hasattr(spec, "config_class"):
            out.append(f"| [`{spec.name}`](#{anchor('env', spec.name)}) | env | | {cell(spec.description)} |")
        else:
            base = envs.resolve(spec.name)[0].name
            out.append(f"| [`{spec.name}`](#{anchor('env', spec.name)}) | `{spec.env}` | "
                       f"{code(yaml_flow(dict(spec.params)))} | {cell(spec.description)} |")
            del base
    out.append("")
    for spec in envs.envs():
        guide = spec.guide
        cls = spec.config_class()
        opts, why = EXAMPLE_OPTIONS.get(spec.name, ({}, ""))
        prompt = first_prompt(registries, spec.name, opts)
        out += [f'<a id="{anchor("env", spec.name)}"></a>', "", f"## `{spec.name}`", "",
                cell(spec.description) + ("" if spec.description.endswith(".") else "."), ""]
        out += [f"- **{key.capitalize()}.** {guide[key]}" for key in GUIDE_KEYS if key in guide]
        names = ", ".join(f"`{n}`" for n in prompt.action_names) if prompt.action_names else "free-form text"
        out += [f"- **Valid actions at seed 0.** {names}; at most {prompt.max_actions} action(s) per trajectory "
                "(`max_actions_per_traj`).",
                f"- **Rollout shape.** {hints_line(registries, spec.name)}.",
                f"- **Code.** `{spec.entry_point}` (plugin `{spec.plugin}`)"
                + (f"; the full rules are in the docstring of `{spec.entry_point.partition(':')[0]}`." if guide and
                   isinstance(spec.entry_point, str) else "."), "",
                f"Default options ([reference](config.md#{anchor('env', spec.name)})):", "",
                *fenced("\n".join(f"{k}: {yaml_flow(v)}" for k, v in unstructure(cls()).items()), "yaml"), ""]
        variants = sorted((v for v in envs.variants() if envs.resolve(v.name)[0].name == spec.name),
                          key=lambda v: v.name)
        if variants:
            out += ["Variants:", "", "| variant | parameters | description |", "|---|---|---|"]
            out += [f"| [`{v.name}`](#{anchor('env', v.name)}) | {code(yaml_flow(envs.resolve(v.name)[1]))} | "
                    f"{cell(v.description)} |" for v in variants]
            out.append("")
        out += [f"First prompt (seed 0){', ' + why if why else ''}:", "", *fenced(prompt.text), ""]
        if spec.name in MACHINE_NOTES:
            out += [MACHINE_NOTES[spec.name], ""]
        for v in variants:
            vopts, vwhy = EXAMPLE_OPTIONS.get(v.name, ({}, ""))
            vprompt = first_prompt(registries, v.name, vopts)
            out += [f'<a id="{anchor("env", v.name)}"></a>', "", f"### `{v.name}`", "",
                    f"{cell(v.description)}" + ("" if v.description.endswith(".") else "."), "",
                    f"Variant of `{v.env}` with {code(yaml_flow(dict(v.params)))}"
                    + (f" and its own instruction: {cell(v.instruction)}" if v.instruction else "") + ".", ""]
            vnames = (", ".join(f"`{n}`" for n in vprompt.action_names) if vprompt.action_names
                      else "free-form text")
            if vprompt.action_names != prompt.action_names or vprompt.max_actions != prompt.max_actions:
                out += [f"Valid actions at seed 0: {vnames}; at most {vprompt.max_actions} action(s) per "
                        "trajectory.", ""]
            if envs.hints(v.name) != envs.hints(spec.name):
                out += [f"Rollout shape: {hints_line(registries, v.name)}.", ""]
            if vprompt.system == prompt.system:
                out += [f"First user message (seed 0{', ' + vwhy if vwhy else ''}; the system message is "
                        f"`{spec.name}`'s):", "", *fenced(vprompt.user), ""]
            else:
                out += [f"First prompt (seed 0{', ' + vwhy if vwhy else ''}):", "", *fenced(vprompt.text), ""]
    return "\n".join(out).rstrip() + "\n"


# --------------------------------------------------------------------------------------------- main

PAGES = {"config.md": render_config, "envs.md": render_envs}


def stale_pages() -> list[str]:
    """Names of the generated pages whose committed text differs from a fresh rendering."""
    stale = []
    for name, render in PAGES.items():
        path = DOCS / name
        if not path.exists() or path.read_text(encoding="utf-8") != render():
            stale.append(name)
    return stale


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when a generated page is out of date")
    parser.add_argument("pages", nargs="*", metavar="PAGE", help=f"pages to write: {', '.join(PAGES)} (default: all)")
    args = parser.parse_args(argv)
    unknown = [p for p in args.pages if p not in PAGES]
    if unknown:
        parser.error(f"unknown page {unknown[0]!r}; choose from {', '.join(PAGES)}")
    from ragen_core.log import configure_logging

    configure_logging("console", "error")
    if args.check:
        stale = stale_pages()
        if stale:
            print(f"out of date: {', '.join('docs/' + s for s in stale)}; regenerate with {REGENERATE}",
                  file=sys.stderr)
            return 1
        return 0
    for name in args.pages or list(PAGES):
        (DOCS / name).write_text(PAGES[name](), encoding="utf-8")
        print(f"wrote docs/{name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
