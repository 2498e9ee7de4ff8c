"""Configuration: attrs classes, a YAML file, dotted ``key=value`` overrides, strict validation.

The flow is ``load_config(path, overrides)`` → :class:`RagenConfig` (core sections validated, component sections
still raw) → ``resolve_config(config, registries)`` which validates each selected component's options against the
config class its plugin declared and runs the cross-field checks. Every failure is one :class:`ConfigError` naming
the full key path, with the nearest valid key suggested.

Precedence, later wins: the defaults of the attrs classes, a trainer's embedded preset, the rollout hints of the envs
the config runs (``max_turn``, ``max_actions_per_turn``, ``max_new_tokens``, ``think``) and the run name derived
from the model and envs, then the YAML file, then the overrides. The defaults and the preset only say what to use
when nothing else does; what the user's file or command line sets (:attr:`RagenConfig.explicit`) is never replaced.

Components are selected by name: ``filter: top_p`` or ``filter: {name: top_p, value: 0.9}``; envs with
``env: sokoban`` (one env for all groups) or a mix ``envs: [{name: sokoban, groups: 6}, {name: bandit, groups: 2}]``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

import attrs

from ragen_core.errors import ConfigError, RagenError, UnknownComponentError, suggest
from ragen_core.overrides import apply_overrides, load_yaml, parse_override
from ragen_core.starpo.shape import RolloutHints, apply_env_hints, derived_run_name
from ragen_core.structuring import INTERNAL, join_path, structure, unstructure
from ragen_core.validators import Constraint, constraint, integer, number

__all__ = [
    "Component",
    "EnvChoice",
    "PluginsConfig",
    "RagenConfig",
    "ResolvedConfig",
    "RolloutConfig",
    "RunConfig",
    "apply_env_hints",
    "apply_overrides",
    "derived_run_name",
    "explicit_keys",
    "load_config",
    "parse_override",
    "resolve_config",
    "structure",
    "unstructure",
    "with_default_components",
]


# --------------------------------------------------------------------------------------------- core sections

def _at_most(limit: int) -> Constraint:
    """``1 <= value <= limit``: a resource key, far above any real run and far below a typo's 10**20."""
    return integer(1, limit)


def _is_folder_name(value: Any) -> bool:
    text = str(value)  # one folder-name part: it must not reach outside run.output_dir
    return bool(text.strip()) and text not in (".", "..") and not any(c in text for c in "/\\") \
        and not any(ord(c) < 32 for c in text)


_run_name = constraint("a plain folder name (no '/', '\\', '..' or control characters; it names a folder under "
                       "run.output_dir)", _is_folder_name)
_folder_path = constraint("a folder path", lambda v: bool(str(v).strip()) and "\x00" not in str(v))


@attrs.define
class Component:
    """A component chosen by name, with its options (validated later against the plugin's config class).

    YAML: ``estimator: grpo`` or ``estimator: {name: grpo, norm_adv_by_std: false}``.

    :ivar name: the registered component's name ("": the one an installed plugin offers as the default, see
        :meth:`ragen_core.registry.Registry.default`).
    :ivar options: its options, validated by the config class its plugin declared (written flat beside ``name``).
    """

    name: str = ""
    options: dict[str, Any] = attrs.field(factory=dict)

    @classmethod
    def __ragen_structure__(cls, data: dict[str, Any]) -> dict[str, Any]:
        name = data.pop("name", None)
        if name is None:
            raise ConfigError("component section needs a 'name' key (e.g. 'filter: {name: top_p}')")
        nested = data.pop("options", None) if isinstance(data.get("options"), dict) else None
        return {"name": name, "options": {**(nested or {}), **data}}


@attrs.define
class EnvChoice:
    """One env (or variant) in the rollout mix: ``{name: sokoban, groups: 6, options: {dim_room: [8, 8]}}``.

    ``groups`` is its share of ``rollout.env_groups`` (None: the groups left over, split evenly).

    :ivar name: an env or variant name (``ragen envs`` lists them).
    :ivar groups: how many of the step's groups run this env (None: an even share of the groups left over).
    :ivar options: env options over the variant's parameters (see the env's options in docs/config.md).
    """

    name: str
    groups: int | None = attrs.field(default=None, validator=attrs.validators.optional(integer(1)))
    options: dict[str, Any] = attrs.field(factory=dict)


@attrs.define
class RolloutConfig:
    """How rollouts are shaped (RAGEN's defaults).

    ``context_mode``: ``full`` (one growing conversation per trajectory), ``limited_multi_turn`` (one sample per turn
    holding the last ``window`` turns) or ``single_turn`` (one sample per turn, earlier turns summarised in the user
    message). ``max_context_tokens`` caps a prompt: the oldest whole turns are dropped (counted in
    ``rollout/context_truncated``). ``reward_norm``/``reward_norm_by`` normalise trajectory scores before the
    estimator (identity, mean, mean_std, asym_clip; by group, variant or batch).

    :ivar env_groups: env groups per training step (RAGEN's ``es_manager.train.env_groups``).
    :ivar group_size: trajectories per group; all of a group reset with the same seed, so start from the same state.
    :ivar max_turn: most assistant turns per trajectory.
    :ivar max_actions_per_turn: most actions executed per turn; further ones in the answer are ignored.
    :ivar action_sep: separator between the actions of one answer.
    :ivar seed_train: base of the training reset seeds: group ``i`` of step ``s`` resets with
        ``seed_train + (s - 1) * env_groups + i``.
    :ivar seed_val: base of the validation seeds: group ``i`` resets with ``seed_val + i`` at every validation.
    :ivar val_env_groups: env groups per validation.
    :ivar val_group_size: trajectories per validation group (pass@k uses k = this size).
    :ivar context_mode: ``full``, ``limited_multi_turn`` or ``single_turn`` (see above).
    :ivar window: turns held in each ``limited_multi_turn`` sample, the current one included.
    :ivar max_context_tokens: cap on prompt plus response budget, in tokens; the oldest whole turns are dropped to
        fit (None: no cap).
    :ivar max_new_tokens: response budget per turn, in tokens (also stated to the model in every user message).
    :ivar think: ask for ``<think>…</think>`` before ``<answer>…</answer>`` (False: the answer only).
    :ivar temperature: sampling temperature of training rollouts (0: greedy).
    :ivar top_p: nucleus sampling mass of training rollouts (1: off).
    :ivar top_k: top-k sampling of training rollouts (0: off).
    :ivar val_temperature: sampling temperature of validation rollouts (0: greedy).
    :ivar format_penalty: added to a turn's score when the response does not match the format, has no valid
        action, or names an unknown action (RAGEN: -0.1).
    :ivar use_turn_scores: place each turn's reward on the last token of that turn instead of the trajectory score
        on the last generated token.
    :ivar reward_norm: score normalisation before the estimator: ``identity``, ``mean`` (x - mean), ``mean_std``
        ((x - mean) / (std + 1e-6), 0 when std is 0) or ``asym_clip`` (mean_std clipped to [-1, 3]).
    :ivar reward_norm_by: the buckets ``reward_norm`` works in: ``group``, env ``variant`` or the whole ``batch``.
    :ivar env_workers: threads running env calls in parallel (1: in the rollout thread).
    """

    env_groups: int = attrs.field(default=8, validator=_at_most(65_536))
    group_size: int = attrs.field(default=16, validator=_at_most(4_096))
    max_turn: int = attrs.field(default=5, validator=_at_most(10_000))
    max_actions_per_turn: int = attrs.field(default=2, validator=_at_most(1_000))
    action_sep: str = "||"
    seed_train: int = 0
    seed_val: int = 123
    val_env_groups: int = attrs.field(default=8, validator=_at_most(65_536))
    val_group_size: int = attrs.field(default=4, validator=_at_most(4_096))
    context_mode: Literal["full", "limited_multi_turn", "single_turn"] = "full"
    window: int = attrs.field(default=2, validator=_at_most(10_000))
    max_context_tokens: int | None = attrs.field(default=None, validator=attrs.validators.optional(integer(1)))
    max_new_tokens: int = attrs.field(default=128, validator=_at_most(1_048_576))
    think: bool = True
    temperature: float = attrs.field(default=1.0, validator=attrs.validators.ge(0))
    top_p: float = attrs.field(default=1.0, validator=number(0, 1))
    top_k: int = attrs.field(default=0, validator=attrs.validators.ge(0))
    val_temperature: float = attrs.field(default=1.0, validator=attrs.validators.ge(0))
    format_penalty: float = -0.1
    use_turn_scores: bool = False
    reward_norm: Literal["identity", "mean", "mean_std", "asym_clip"] = "identity"
    reward_norm_by: Literal["group", "variant", "batch"] = "group"
    env_workers: int = attrs.field(default=1, validator=_at_most(1_024))


@attrs.define
class PluginsConfig:
    """Plugin selection. ``disable``: plugin names to block; ``required``: ``name`` or ``name>=1.2`` (plugin or
    distribution name with a PEP 440 specifier) that must be present; ``trace``: log every hook call.

    :ivar disable: plugin (entry-point) names to block; ``RAGEN_DISABLE_PLUGINS=a,b`` adds to them.
    :ivar required: plugins or distributions that must be loaded, optionally with a version (``my-dist>=1.2``).
    :ivar trace: log every hook call and result at debug level (also ``RAGEN_TRACE_HOOKS=1``).
    """

    disable: list[str] = attrs.field(factory=list)
    required: list[str] = attrs.field(factory=list)
    trace: bool = False


@attrs.define
class RunConfig:
    """Run bookkeeping: name, output directory, global seed, logging.

    :ivar name: run name, a plain folder name (no ``/``, ``\\`` or ``..``); the run directory is
        ``<output_dir>/<name>-<mode>-<YYYYmmdd-HHMMSS>`` (``-2``, ``-3``, ... appended when that folder exists: a new
        run never shares a folder) unless ``--run-dir`` is given.
    :ivar output_dir: folder that holds the run directories.
    :ivar seed: global seed (model initialisation and sampling, scripted policies, warm-start demonstrations).
    :ivar log_format: ``console`` (readable lines), ``json`` (one JSON object per line) or ``auto`` (console on a
        terminal, JSON otherwise).
    :ivar log_level: the lowest level logged: ``debug``, ``info``, ``warning`` or ``error``.
    :ivar trajectory_samples: trajectories of each step kept in ``samples.jsonl`` for ``ragen report``'s viewer:
        this many best, worst and random ones (0: none).
    """

    name: str = attrs.field(default="ragen", validator=_run_name)
    output_dir: str = attrs.field(default="runs", validator=_folder_path)
    seed: int = 0
    log_format: Literal["auto", "console", "json"] = "auto"
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    trajectory_samples: int = attrs.field(default=2, validator=integer(0, 1_000))


@attrs.define
class RagenConfig:
    """The whole configuration. Component sections hold raw options until :func:`resolve_config`.

    :ivar run: run bookkeeping (name, output folder, seed, logging).
    :ivar plugins: which plugins load.
    :ivar envs: the training env mix, each with its share of ``rollout.env_groups``; ``env: NAME`` is shorthand for
        a mix of one. Required: the core names no env (a trainer's embedded preset may).
    :ivar val_envs: the validation env mix, its ``groups`` shares of ``rollout.val_env_groups`` (None: the envs of
        ``envs``, ``val_env_groups`` split evenly among them).
    :ivar variants: env variants declared in the config, by name: ``{env: BASE, params: {...}, instruction: ...,
        description: ...}``; usable wherever an env name is.
    :ivar rollout: shape of the rollouts, prompts, sampling and score normalisation.
    :ivar filter: the rollout filter: ``filter: top_p`` or ``filter: {name: top_p, value: 0.9}`` (unnamed: the
        one an installed plugin offers as the default, the filters plugin's ``none``).
    :ivar estimator: the advantage estimator and its options (unnamed: the installed default, the estimators
        plugin's ``gae``).
    :ivar diagnostics: diagnostics computed on the unfiltered batch: names or ``{name: ..., option: ...}``.
    :ivar trainer: the trainer and its options (unnamed: the installed default, the torch plugin's ``torch``).
    :ivar sinks: metric sinks besides ``metrics.jsonl``: names or ``{name: tensorboard, option: ...}`` (the sinks
        plugin's ``tensorboard``, ``wandb``, ``console``; see docs/training.md).
    """

    run: RunConfig = attrs.field(factory=RunConfig)
    plugins: PluginsConfig = attrs.field(factory=PluginsConfig)
    envs: list[EnvChoice] = attrs.field(factory=list)
    val_envs: list[EnvChoice] | None = None
    variants: dict[str, dict[str, Any]] = attrs.field(factory=dict)
    rollout: RolloutConfig = attrs.field(factory=RolloutConfig)
    filter: Component = attrs.field(factory=Component)
    estimator: Component = attrs.field(factory=Component)
    diagnostics: list[Component] = attrs.field(factory=list)
    trainer: Component = attrs.field(factory=Component)
    sinks: list[Component] = attrs.field(factory=list)
    #: the dotted keys the user's config file and overrides set (:func:`load_config` fills it in); they are never
    #: replaced by env hints or the derived run name. None (a config built in code): every key counts as set.
    explicit: frozenset[str] | None = attrs.field(default=None, eq=False, repr=False, metadata={INTERNAL: True})

    def is_explicit(self, key: str) -> bool:
        """Whether dotted ``key`` (``rollout.max_turn``) was set by the user, not taken from a default or preset."""
        parts = key.split(".")
        return self.explicit is None or any(".".join(parts[:i]) in self.explicit for i in range(1, len(parts) + 1))

    @classmethod
    def __ragen_structure__(cls, data: dict[str, Any]) -> dict[str, Any]:
        if "env" in data:
            if "envs" in data:
                raise ConfigError("both 'env' and 'envs' are set", hint="use 'env' for one env or 'envs' for a mix")
            env = data.pop("env")
            data["envs"] = [env]
        for key in ("envs", "val_envs"):
            if isinstance(data.get(key), (str, dict)):
                data[key] = [data[key]]
            if isinstance(data.get(key), list):
                data[key] = [{"name": e} if isinstance(e, str) else e for e in data[key]]
        for key in ("filter", "estimator", "trainer"):
            if isinstance(data.get(key), str):
                data[key] = {"name": data[key]}
        for key in ("diagnostics", "sinks"):
            if isinstance(data.get(key), list):
                data[key] = [{"name": d} if isinstance(d, str) else d for d in data[key]]
        return data


def default_config_data() -> dict[str, Any]:
    """The defaults as plain data (component sections flat: ``{name: ..., option: ...}``)."""
    data: dict[str, Any] = unstructure(RagenConfig())
    for key in ("filter", "estimator", "trainer"):
        data[key] = {"name": data[key]["name"], **data[key]["options"]}
    return data


# --------------------------------------------------------------------------------------------- loading

def load_config_data(path: str | Path | None = None, overrides: list[str] | None = None, *,
                     preset: Any = None) -> dict[str, Any]:
    """Defaults, then the ``preset`` file (a trainer's embedded default), then the YAML file, then the overrides, as
    plain data (not yet validated)."""
    data = default_config_data()
    for source in (preset, path):
        if source is not None:
            data = _merge(data, _normalise(_read_yaml(source)))
    return apply_overrides(data, list(overrides or []))


def _read_yaml(path: Any) -> dict[str, Any]:
    """The mapping a YAML config file holds (``path``: a path or an ``importlib.resources`` traversable)."""
    import yaml

    p = path if hasattr(path, "read_text") else Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read config file {str(p)!r}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"config file {str(p)!r} is not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset "
                          f"{exc.start})", hint="save it as UTF-8") from None
    try:
        loaded = load_yaml(text) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"config file {str(p)!r} is not valid YAML: {exc}") from None
    if not isinstance(loaded, dict):
        raise ConfigError(f"config file {str(p)!r} must hold a mapping at the top level")
    return loaded


def _normalise(data: dict[str, Any]) -> dict[str, Any]:
    data = dict(data)
    if "env" in data:
        data["envs"] = [data.pop("env")]
    for key in ("filter", "estimator", "trainer"):
        if isinstance(data.get(key), str):
            data[key] = {"name": data[key]}
        elif isinstance(data.get(key), dict) and "name" in data[key]:
            data[key] = {"__replace__": True, **data[key]}
    return data


def _merge(base: Any, new: Any) -> Any:
    """Deep-merge mappings; lists and scalars replace. A component section naming a new component replaces."""
    if isinstance(base, dict) and isinstance(new, dict):
        if new.pop("__replace__", False) and new.get("name") != base.get("name", new.get("name")):
            return {k: v for k, v in new.items()}
        out = dict(base)
        for k, v in new.items():
            out[k] = _merge(base[k], v) if k in base else v
        return out
    return new


def _leaves(data: Any, prefix: str) -> set[str]:
    """The dotted keys of the values a (nested) mapping sets: ``{rollout: {max_turn: 3}}`` -> ``{rollout.max_turn}``."""
    if not isinstance(data, dict):
        return {prefix}
    return set().union(*(_leaves(value, join_path(prefix, key)) for key, value in data.items()))


def explicit_keys(path: str | Path | None = None, overrides: list[str] | None = None) -> frozenset[str]:
    """The dotted keys the user sets: those of the YAML file ``path`` and of the ``key=value`` overrides (a
    mapping value counts for every key under it). A trainer's preset is not the user's: its keys are defaults."""
    keys = _leaves(_normalise(_read_yaml(path)), "") if path is not None else set()
    for text in overrides or []:
        parts, value = parse_override(text)  # env=NAME / env.options.x=1: the one entry of envs
        parts = ["envs", *(["0"] if len(parts) > 1 else []), *parts[1:]] if parts[0] == "env" else parts
        keys |= _leaves(value, ".".join(parts))
    return frozenset(keys)


def load_config(path: str | Path | None = None, overrides: list[str] | None = None, *,
                preset: Any = None) -> RagenConfig:
    """Load and validate the core sections: defaults ← ``preset`` ← YAML file ← ``key=value`` overrides.

    The keys the file and the overrides set are recorded in :attr:`RagenConfig.explicit`: :func:`resolve_config`
    never replaces them, while the defaults and the preset's values give way to the envs' rollout hints and to the
    run name derived from the model and envs.
    """
    data = load_config_data(path, overrides, preset=preset)
    config: RagenConfig = structure(RagenConfig, data, "")
    config.explicit = explicit_keys(path, overrides)
    return config


# --------------------------------------------------------------------------------------------- resolution

@attrs.define
class ResolvedConfig:
    """A validated config with every selected component's options validated by its plugin's config class."""

    config: RagenConfig
    env_plan: list[tuple[str, int, dict[str, Any]]]
    val_env_plan: list[tuple[str, int, dict[str, Any]]]
    filter: Any = None
    estimator: Any = None
    trainer: Any = None
    diagnostics: list[tuple[str, Any]] = attrs.field(factory=list)
    problems: list[str] = attrs.field(factory=list)
    sinks: list[tuple[str, Any]] = attrs.field(factory=list)
    #: the keys that resolution filled in (env hints, the derived run name), each with where its value came from
    derived: dict[str, str] = attrs.field(factory=dict)

    def to_data(self) -> dict[str, Any]:
        """The resolved config with every default filled in, as plain data."""
        data: dict[str, Any] = unstructure(self.config)
        for key in ("filter", "estimator", "trainer"):
            comp = getattr(self.config, key)
            resolved = getattr(self, key)
            data[key] = {"name": comp.name, **(unstructure(resolved) if resolved is not None else comp.options)}
        data["diagnostics"] = [{"name": n, **unstructure(c)} for n, c in self.diagnostics]
        data["sinks"] = [{"name": n, **unstructure(c)} for n, c in self.sinks]
        data["envs"] = [{"name": n, "groups": g, "options": _fresh(o)} for n, g, o in self.env_plan]
        data["val_envs"] = [{"name": n, "groups": g, "options": _fresh(o)} for n, g, o in self.val_env_plan]
        return data


def _fresh(value: Any) -> Any:
    """``value`` with fresh containers, so that data shared between the train and validation plans is written out
    twice, not as a YAML anchor and alias (``&id001``)."""
    if isinstance(value, dict):
        return {k: _fresh(v) for k, v in value.items()}
    return [_fresh(v) for v in value] if isinstance(value, list) else value


def plan_env_groups(choices: list[EnvChoice], total: int, path: str) -> list[tuple[str, int, dict[str, Any]]]:
    """Split ``total`` groups over the env choices (fixed counts first, the rest evenly, earlier ones first)."""
    fixed = sum(c.groups or 0 for c in choices)
    free = [c for c in choices if c.groups is None]
    if fixed > total or (fixed == total and free) or (not free and fixed != total):
        counts = ", ".join(f"{c.name}={c.groups}" for c in choices)
        key = "val_env_groups" if path.startswith("val") else "env_groups"
        raise ConfigError(f"{path}: group counts ({counts}) do not add up to rollout.{key}={total}",
                          hint=f"give every env a 'groups' count summing to {key}, or leave some unset")
    left = total - fixed
    plan = []
    for i, c in enumerate(choices):
        if c.groups is not None:
            n = c.groups
        else:
            k = free.index(c)
            n = left // len(free) + (1 if k < left % len(free) else 0)
            if n == 0:
                raise ConfigError(f"{path}[{i}] ({c.name}) gets 0 of {total} groups", hint="raise rollout.env_groups")
        plan.append((c.name, n, dict(c.options)))
    return plan


def _component(reg: Any, comp: Component, path: str, config: RagenConfig, strict: bool,
               problems: list[str]) -> Any:
    """``comp``'s options made from ``reg``; with ``strict=False`` a missing component is added to ``problems``
    (None is returned), unless the config names it and it looks like a typo (see :func:`resolve_config`)."""
    try:
        return reg.get(comp.name).make_config(comp.options, path=path)
    except ConfigError:
        raise
    except RagenError as exc:
        # a name the user wrote that no plugin registers is a typo on every command (exit 2); a trainer only
        # when a registered one is close (a config for another machine's trainer still rolls out here)
        typo = isinstance(exc, UnknownComponentError) and config.is_explicit(path.split("[")[0]) and (
            path != "trainer" or "did you mean" in exc.message)
        if strict or typo:
            raise ConfigError(f"{path}: {exc.message}", hint=exc.hint) from None
        problems.append(f"{path}: {exc.message}")
        return None


#: the component sections a config may leave unnamed, with their registries' attribute names
DEFAULTED = {"filter": "filters", "estimator": "estimators", "trainer": "trainers"}


def with_default_components(config: RagenConfig, registries: Any, derived: dict[str, str] | None = None,
                            problems: list[tuple[str, ConfigError]] | None = None) -> RagenConfig:
    """``config`` with each unnamed component section (``filter``, ``estimator``, ``trainer``) naming the one an
    installed plugin offers as the default (:meth:`~ragen_core.registry.Registry.default`); its options stay.

    ``derived`` records each filled-in key and its source. With ``problems`` given, a kind without a default is
    added there as ``(key, error)`` and left unnamed instead of raising."""
    changes: dict[str, Any] = {}  # section -> Component
    for key, kind in DEFAULTED.items():
        comp: Component = getattr(config, key)
        if comp.name:
            continue
        try:
            spec = getattr(registries, kind).default()
        except ConfigError as exc:
            if problems is None:
                raise
            problems.append((key, exc))
            continue
        changes[key] = attrs.evolve(comp, name=spec.name)
        if derived is not None:
            derived[f"{key}.name"] = f"the default of plugin {spec.plugin or '?'}"
    return attrs.evolve(config, **changes) if changes else config


def _register_variants(config: RagenConfig, registries: Any) -> None:
    """Add the variants declared under ``variants:`` to ``registries.envs`` (owned by plugin ``config``)."""
    for name, spec in config.variants.items():
        spec = dict(spec)
        base = spec.pop("env", None)
        if not isinstance(base, str):
            raise ConfigError(f"variants.{name}: needs 'env: <env or variant name>'")
        instruction = spec.pop("instruction", None)
        description = spec.pop("description", "")
        params = spec.pop("params", {})
        try:
            hints = RolloutHints(**(spec.pop("hints", None) or {}))
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"variants.{name}.hints: {exc}") from None
        if spec:
            key = next(iter(spec))
            close = suggest(key, ["env", "params", "instruction", "description", "hints"])
            raise ConfigError(f"unknown config key 'variants.{name}.{key}'",
                              hint=f"did you mean 'variants.{name}.{close}'?" if close else
                              f"the env's options go under 'variants.{name}.params'")
        existing = registries.envs.get(name) if name in registries.envs else None
        if (existing is not None and existing.plugin == "config" and existing.env == base
                and dict(existing.params) == dict(params) and existing.instruction == instruction
                and existing.hints == hints):
            continue  # the same config resolved again
        with registries.envs.owned_by("config"):
            registries.envs.register_variant(name, env=base, params=params, instruction=instruction,
                                             description=description, hints=hints)


def _check_envs(plan: list[tuple[str, int, dict[str, Any]]], path: str, registries: Any) -> None:
    """Each planned env exists and takes its options (one :class:`ConfigError` naming ``path[i]`` otherwise). A bad
    option that a variant of the config's ``variants:`` sets is named where the user wrote it,
    ``variants.NAME.params.KEY``, not under ``path[i].options``."""
    for i, (name, _n, options) in enumerate(plan):
        try:
            spec, params, _ = registries.envs.resolve(name)
            try:
                spec.make_config({**params, **options}, path=f"{path}[{i}].options")
            except ConfigError as exc:
                found = re.search(re.escape(f"{path}[{i}].options.") + r"([^.\[':\s]+)", exc.message)
                owner = _variant_setting(registries.envs, name, found.group(1)) if found and \
                    found.group(1) not in options else None
                if owner is None:
                    raise
                spec.make_config({**params, **options}, path=f"variants.{owner}.params")  # the same error, there
        except ConfigError:
            raise
        except RagenError as exc:
            raise ConfigError(f"{path}[{i}]: {exc.message}", hint=exc.hint) from None


def _variant_setting(envs: Any, name: str, key: str) -> str | None:
    """The variant declared in the config (``variants:``) whose params give env ``name`` its ``key`` option, nearest
    first; None when a plugin's variant (or none) sets it."""
    spec = envs.get(name)
    while hasattr(spec, "params"):  # an env variant
        if key in spec.params:
            return str(spec.name) if spec.plugin == "config" else None
        spec = envs.get(spec.env)
    return None


def _resolve_sinks(sinks: list[Component], registries: Any) -> list[tuple[str, Any]]:
    """Each sink's validated options; an unknown sink, or one whose packages are missing, raises."""
    made = []
    for i, comp in enumerate(sinks):
        try:
            spec = registries.sinks.get(comp.name)
        except RagenError as exc:
            raise ConfigError(f"sinks[{i}]: {exc.message}", hint=exc.hint) from None
        if spec.missing():
            raise ConfigError(f"sinks[{i}]: sink {comp.name!r} needs {', '.join(spec.missing())}, which is not "
                              f"installed", hint=spec.install_hint or None)
        made.append((comp.name, spec.make_config(comp.options, path=f"sinks[{i}]")))
    return made


def resolve_config(config: RagenConfig, registries: Any, pm: Any = None, *, strict: bool = True) -> ResolvedConfig:
    """Validate the component sections against the registries and run the cross-field checks.

    The rollout keys the config does not set explicitly come from the envs' rollout hints
    (:func:`apply_env_hints`), and a config that sets no ``run.name`` is named after its model and envs
    (:func:`derived_run_name`); :attr:`ResolvedConfig.derived` says which keys were filled in. The returned
    ``config`` is a new object when anything changed; ``config`` itself is not modified.

    Variants declared under ``variants:`` are added to ``registries.envs`` first. Envs are always checked. With
    ``strict=False``, a component that is not installed is left unresolved and reported in ``problems`` instead of
    raising, unless the config names it and it looks like a typo (a filter, estimator or diagnostic no plugin
    registers; a trainer with a registered one close to it); invalid options still raise, and failed cross-field
    checks are reported in ``problems`` too. Sinks are always checked: an unknown sink, or one whose packages are missing, raises.
    """
    problems: list[str] = []
    _register_variants(config, registries)

    def component(reg: Any, comp: Component, path: str) -> Any:
        if not comp.name:
            return None  # no default is installed: already in problems
        return _component(reg, comp, path, config, strict, problems)

    if not config.envs:  # no preset was read: a misspelt or missing trainer is the better message
        if config.trainer.name:
            component(registries.trainers, config.trainer, "trainer")
        elif strict:
            registries.trainers.default()
        raise ConfigError("the config names no env", hint="set one: env: NAME (or envs: [...]); ragen envs lists "
                          "them, e.g. ragen train env=sokoban")
    derived: dict[str, str] = {}
    undefaulted: list[tuple[str, ConfigError]] = []
    config = with_default_components(config, registries, derived, undefaulted)
    plan, val_plan = _env_plans(config, registries)
    config = apply_env_hints(config, registries, derived)
    resolved = ResolvedConfig(config=config, env_plan=plan, val_env_plan=val_plan, problems=problems,
                              derived=derived)
    resolved.filter = component(registries.filters, config.filter, "filter")
    resolved.estimator = component(registries.estimators, config.estimator, "estimator")
    resolved.trainer = component(registries.trainers, config.trainer, "trainer")
    if undefaulted and strict:  # after the named components: a misspelt name is the better message
        raise undefaulted[0][1]
    problems.extend(f"{key}: {exc.message}" for key, exc in undefaulted)
    if not config.is_explicit("run.name"):
        name = derived_run_name(config, resolved.trainer)
        if name != config.run.name:
            config = resolved.config = attrs.evolve(config, run=attrs.evolve(config.run, name=name))
        derived["run.name"] = "the model and envs"
    for i, comp in enumerate(config.diagnostics):
        made = component(registries.diagnostics, comp, f"diagnostics[{i}]")
        if made is not None:
            resolved.diagnostics.append((comp.name, made))
    resolved.sinks = _resolve_sinks(config.sinks, registries)
    if pm is not None and not problems:
        _plugin_checks(resolved, registries, pm, strict)
    return resolved


def _env_plans(config: RagenConfig, registries: Any) -> tuple[list[tuple[str, int, dict[str, Any]]],
                                                               list[tuple[str, int, dict[str, Any]]]]:
    """The training and validation env plans (groups per env), each env checked with its options."""
    plan = plan_env_groups(config.envs, config.rollout.env_groups, "envs")
    val_choices = config.val_envs or [attrs.evolve(c, groups=None) for c in config.envs]
    val_plan = plan_env_groups(val_choices, config.rollout.val_env_groups, "val_envs")
    _check_envs(plan, "envs", registries)
    _check_envs(val_plan, "val_envs", registries)
    return plan, val_plan


def _plugin_checks(resolved: ResolvedConfig, registries: Any, pm: Any, strict: bool) -> None:
    """The plugins' cross-field checks (``ragen_check_config``): raised when strict, else added to ``problems``."""
    found = [p for result in pm.hook.ragen_check_config(config=resolved, registries=registries)
             for p in (result or [])]
    if found and strict:
        raise ConfigError("config check failed:\n  - " + "\n  - ".join(found))
    resolved.problems.extend(found)
