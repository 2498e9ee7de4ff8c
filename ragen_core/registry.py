"""Typed registries of components and their lazy specs.

Plugins add components from their registration hooks (``ragen_register_envs(registry)`` and friends) by calling
``registry.register(name, "package.module:Object", ...)``. Nothing is imported until a component is used: the spec
holds the entry-point string and :meth:`ComponentSpec.load` imports it on demand (gymnasium's style).

Every component class is constructed with one argument, its validated attrs config instance. Its config class is
given to ``register(config=...)`` (a class or a lazy ``"pkg.mod:Class"`` string), or else read from the loaded
object's ``config_cls`` attribute; a component without either takes no options.

An env may also say how rollouts of it should be shaped (:class:`RolloutHints`: turns, actions per turn, the
tokens its answers and their reasoning take, thinking), given as ``register(..., hints=...)`` or, when the registration gives none, read
from the env class's ``rollout_hints`` attribute the first time a config using it is resolved; a variant's hints
override its base's key by key. :func:`ragen_core.config.resolve_config` uses them for the rollout keys a config does
not set explicitly.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import math
import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any, ClassVar, Generic, TypeVar

import attrs

from ragen_core.errors import (
    ConfigError,
    DuplicateComponentError,
    PluginError,
    RagenError,
    UnknownComponentError,
    suggest,
)
from ragen_core.starpo.shape import DEFAULT_THINK_TOKENS, RolloutHints, _to_hints

__all__ = [
    "ComponentSpec",
    "DiagnosticSpec",
    "EnvNamespace",
    "EnvRegistry",
    "EnvSpec",
    "EnvVariant",
    "EstimatorSpec",
    "FilterSpec",
    "NoOptions",
    "PolicySpec",
    "Registries",
    "DEFAULT_THINK_TOKENS",
    "Registry",
    "RolloutHints",
    "SinkSpec",
    "TrainerSpec",
    "load_object",
    "suggest",
    "with_filter_metrics",
]

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")


@attrs.frozen
class NoOptions:
    """Config class of a component that takes no options."""


def load_object(ref: str) -> Any:
    """Import ``"package.module:attr.path"`` and return the object (raises ``ImportError``/``AttributeError``)."""
    module_name, sep, attr_path = ref.partition(":")
    if not sep or not module_name or not attr_path:
        raise ValueError(f"entry point {ref!r} is not of the form 'package.module:Object'")
    obj: Any = importlib.import_module(module_name)
    for part in attr_path.split("."):
        obj = getattr(obj, part)
    return obj


@attrs.frozen(kw_only=True)
class ComponentSpec:
    """A named, lazily loaded component.

    :ivar name: the name config files use to select it.
    :ivar entry_point: ``"package.module:Object"`` (imported on first use) or the object itself.
    :ivar description: one line shown by ``ragen envs`` / ``ragen plugins``.
    :ivar config: the attrs config class, or a lazy string for it; None to use ``Object.config_cls``.
    :ivar plugin: the name of the plugin that registered it (filled in by the registry).
    :ivar default: offered as the one to use when a config names no component of this kind (the filters plugin's
        ``none``, the torch plugin's trainer); see :meth:`Registry.default`.
    """

    kind: ClassVar[str] = "component"

    name: str
    entry_point: Any
    description: str = ""
    config: Any = None
    plugin: str = ""
    default: bool = attrs.field(default=False, validator=attrs.validators.instance_of(bool))

    def load(self) -> Any:
        """Import and return the component object; a failure raises :class:`PluginError` naming the plugin."""
        if not isinstance(self.entry_point, str):
            return self.entry_point
        try:
            return load_object(self.entry_point)
        except Exception as exc:
            raise PluginError(
                f"{self.kind} {self.name!r} (from plugin {self.plugin or '?'}) could not be loaded from "
                f"{self.entry_point!r}: {type(exc).__name__}: {exc}",
                hint="the plugin is installed but broken; reinstall it or disable it with "
                f"RAGEN_DISABLE_PLUGINS={self.plugin or 'NAME'}",
            ) from exc

    def config_class(self) -> type:
        """Return the attrs class validating this component's options."""
        cfg = self.config
        if cfg is None:
            cfg = getattr(self.load(), "config_cls", None) or NoOptions
        elif isinstance(cfg, str):
            try:
                cfg = load_object(cfg)
            except Exception as exc:
                raise PluginError(
                    f"config class {cfg!r} of {self.kind} {self.name!r} (plugin {self.plugin or '?'}) "
                    f"could not be loaded: {exc}"
                ) from exc
        if not attrs.has(cfg):
            raise PluginError(f"config class of {self.kind} {self.name!r} (plugin {self.plugin}) is not an attrs class")
        return cfg

    def make_config(self, data: Mapping[str, Any] | None = None, *, path: str = "") -> Any:
        """Validate ``data`` against the config class; errors name ``path`` (e.g. ``filter``)."""
        from ragen_core.config import structure

        return structure(self.config_class(), dict(data or {}), path or self.name)

    def create(self, config: Any = None, /, **options: Any) -> Any:
        """Instantiate the component with a validated config (from ``config`` or ``options``)."""
        if config is None:
            config = self.make_config(options)
        elif options:
            config = attrs.evolve(config, **options)
        return self.load()(config)

    def describe(self) -> dict[str, Any]:
        """JSON-friendly summary (used by ``ragen plugins --json``)."""
        ep = self.entry_point if isinstance(self.entry_point, str) else _qualname(self.entry_point)
        return {"name": self.name, "kind": self.kind, "entry_point": ep, "description": self.description,
                "plugin": self.plugin, **({"default": True} if self.default else {})}


def _qualname(obj: Any) -> str:
    return f"{getattr(obj, '__module__', '?')}:{getattr(obj, '__qualname__', repr(obj))}"


#: the parts of an env's catalogue entry (:attr:`EnvSpec.guide`), in the order they are shown
GUIDE_KEYS = ("rules", "actions", "rewards", "success")


@attrs.frozen(kw_only=True)
class EnvSpec(ComponentSpec):
    """An environment class (a :class:`ragen_core.env.TextEnv` or any gymnasium env of the text contract).

    :ivar hints: how rollouts of this env should be shaped (a :class:`RolloutHints` or a mapping of its fields);
        None: the env class's ``rollout_hints`` attribute, if any, read when a config using the env is resolved.
    :ivar guide: the env's catalogue entry, a few sentences for each of ``rules``, ``actions``, ``rewards`` and
        ``success`` (any subset): ``ragen envs --long`` and the docs' env catalogue show it, for any plugin's env.
    """

    kind: ClassVar[str] = "env"
    hints: RolloutHints | None = attrs.field(default=None, converter=_to_hints)
    guide: Mapping[str, str] = attrs.field(factory=dict, converter=dict, validator=attrs.validators.deep_mapping(
        attrs.validators.in_(GUIDE_KEYS), attrs.validators.instance_of(str)))

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "guide": dict(self.guide)}

    def rollout_hints(self) -> RolloutHints:
        """The registration's hints, else the env class's ``rollout_hints`` (loads the class), else none."""
        return self.hints or _to_hints(getattr(self.load(), "rollout_hints", None)) or RolloutHints()


@attrs.frozen(kw_only=True)
class EnvVariant:
    """A named env configuration (RAGEN's "tag"): a base env or variant, parameters, optional instruction.

    :ivar name: the name config files use (shares the namespace of env names).
    :ivar env: the env (or another variant) it derives from.
    :ivar params: options merged over the base's (validated against the env's config class when made).
    :ivar instruction: replaces the env's instruction in the prompt when set.
    :ivar hints: rollout hints over the base's, key by key (:class:`RolloutHints`, a mapping, or None).
    """

    kind: ClassVar[str] = "env variant"

    name: str
    env: str
    params: Mapping[str, Any] = attrs.field(factory=dict)
    instruction: str | None = None
    description: str = ""
    plugin: str = ""
    hints: RolloutHints | None = attrs.field(default=None, converter=_to_hints)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "env": self.env, "params": dict(self.params),
                "instruction": self.instruction, "description": self.description, "plugin": self.plugin}


@attrs.frozen(kw_only=True)
class EnvNamespace:
    """A family of env names ``<prefix>.<member>`` (gymnasium's ``namespace/name``, for the envs of another hub):
    the name ``rg.leg_counting`` is env ``env`` with option ``option`` set to ``"leg_counting"``.

    Members are not registered one by one: the env's own option validation decides which exist (so a hub's envs
    are usable without importing the hub when plugins load), and ``names`` lists them on demand.

    :ivar name: the prefix (letters, digits, ``_ -``; no dot).
    :ivar env: the env (or variant) each member is made from.
    :ivar option: the env option the member sets.
    :ivar names: a zero-argument function returning the member names, or its lazy ``"pkg.mod:function"`` string;
        None when the members cannot be listed.
    """

    kind: ClassVar[str] = "env namespace"

    name: str
    env: str
    option: str
    names: Any = None
    description: str = ""
    plugin: str = ""

    def member(self, member: str) -> EnvVariant:
        """The variant ``<prefix>.<member>`` stands for."""
        return EnvVariant(name=f"{self.name}.{member}", env=self.env, params={self.option: member},
                          description=f"{self.description} ({self.option}={member})".strip(), plugin=self.plugin)

    def members(self) -> list[str]:
        """The member names, sorted (imports the hub); a failure raises :class:`PluginError` naming the plugin."""
        if self.names is None:
            return []
        try:
            listed = load_object(self.names) if isinstance(self.names, str) else self.names
            return sorted(str(n) for n in listed())
        except Exception as exc:
            raise PluginError(f"env namespace {self.name!r} (plugin {self.plugin or '?'}) could not list its "
                              f"members: {type(exc).__name__}: {exc}") from exc

    def describe(self) -> dict[str, Any]:
        return {"name": f"{self.name}.*", "kind": self.kind, "env": self.env, "option": self.option,
                "description": self.description, "plugin": self.plugin}


@attrs.frozen(kw_only=True)
class FilterSpec(ComponentSpec):
    """A rollout filter: selects which groups of a rollout batch train."""

    kind: ClassVar[str] = "filter"


def with_filter_metrics(batch: Any, result: Any) -> Any:
    """``result``, a filter's :class:`~ragen_core.protocols.FilterResult` for ``batch``, with the metrics that
    docs/metrics.md promises for every filter added where the filter did not report them (its own values win:
    dynamic sampling's cover all its rollout rounds). Whoever calls a filter's ``select`` applies it (the trainers,
    ``ragen rollout``), so a third party's filter reports them as the built-ins compute them:

    - ``rollout/in_group_reward_std|max|mean``: over the groups holding a trajectory without an env error, the mean
      of each group's unbiased std, max and mean trajectory score (those trajectories only);
      ``rollout/chosen_in_group_reward_*``: the same over the kept groups (0 when none is kept);
    - ``rollout/filter_kept_count``, ``rollout/filter_kept_ratio`` (of the batch's groups),
      ``rollout/filter_failed_groups`` (groups whose every trajectory had an env error) and
      ``rollout/filter_loss_scale`` 1 (what a trainer uses when the filter gives none).
    """
    kept, groups = set(result.kept_groups), batch.groups()
    usable = {g: [float(t.score) for t in ts if t.env_error is None] for g, ts in groups.items()}
    scored = {g: scores for g, scores in usable.items() if scores}
    out = {"rollout/filter_kept_count": float(len(kept)),
           "rollout/filter_kept_ratio": len(kept) / len(groups) if groups else 0.0,
           "rollout/filter_loss_scale": 1.0, "rollout/filter_failed_groups": float(len(groups) - len(scored))}
    for prefix, ids in (("rollout/in_group_reward", list(scored)),
                        ("rollout/chosen_in_group_reward", [g for g in scored if g in kept])):
        for name, stat in (("std", _unbiased_std), ("max", max), ("mean", _mean)):
            values = [stat(scored[g]) for g in ids]
            out[f"{prefix}_{name}"] = math.fsum(v / len(values) for v in values) if values else 0.0
    return attrs.evolve(result, metrics={**result.metrics, **{k: v for k, v in out.items() if k not in result.metrics}})


def _mean(values: list[float]) -> float:
    return math.fsum(values) / len(values)


def _unbiased_std(values: list[float]) -> float:
    """The ``n - 1`` standard deviation (0 for one value), as the filters plugin ranks by."""
    m = _mean(values)
    return math.sqrt(math.fsum((v - m) * (v - m) for v in values) / (len(values) - 1)) if len(values) > 1 else 0.0


@attrs.frozen(kw_only=True)
class EstimatorSpec(ComponentSpec):
    """An advantage estimator. ``needs_critic`` tells the trainer to build a value model."""

    kind: ClassVar[str] = "estimator"
    needs_critic: bool = False

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "needs_critic": self.needs_critic}


@attrs.frozen(kw_only=True)
class DiagnosticSpec(ComponentSpec):
    """A diagnostic computed on rollout batches (e.g. the collapse / mutual-information family)."""

    kind: ClassVar[str] = "diagnostic"


@attrs.frozen(kw_only=True)
class TrainerSpec(ComponentSpec):
    """A trainer. ``install_hint`` is shown when its optional dependencies are missing."""

    kind: ClassVar[str] = "trainer"
    install_hint: str = ""
    preset: str = ""

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "install_hint": self.install_hint, "preset": self.preset}

    def preset_path(self) -> Any:
        """The default config file shipped with the trainer (``"package:relative/path.yaml"``), or None."""
        if not self.preset:
            return None
        import importlib.resources

        package, _, rel = self.preset.partition(":")
        return importlib.resources.files(package).joinpath(rel)


@attrs.frozen(kw_only=True)
class PolicySpec(ComponentSpec):
    """A policy backend for ``ragen eval``: ``Backend(config)`` is a :class:`~ragen_core.starpo.rollout.Policy` (a
    ``tokenizer`` and ``generate(requests)``); its config class has a ``model`` field (a path, name or URL).

    :ivar schemes: the model strings it serves when ``--backend`` is not given: URL schemes (``"http"``) or
        ``"path"`` for local paths and model names.
    """

    kind: ClassVar[str] = "policy backend"
    schemes: tuple[str, ...] = ()
    install_hint: str = ""

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "schemes": list(self.schemes), "install_hint": self.install_hint}


@attrs.frozen(kw_only=True)
class SinkSpec(ComponentSpec):
    """A metric sink. ``requires``: modules it imports, checked (not imported) before a run starts; a missing one
    is a config error showing ``install_hint``."""

    kind: ClassVar[str] = "sink"
    requires: tuple[str, ...] = attrs.field(default=(), converter=tuple)
    install_hint: str = ""

    def missing(self) -> list[str]:
        """The ``requires`` modules that are not installed."""
        import importlib.util

        return [m for m in self.requires if importlib.util.find_spec(m) is None]

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "requires": list(self.requires), "install_hint": self.install_hint}


S = TypeVar("S", bound=ComponentSpec)


class Registry(Generic[S]):
    """Components of one kind, by name.

    Plugins call :meth:`register` from their registration hook. Names are unique: a second registration under a
    taken name raises :class:`DuplicateComponentError` naming both plugins, whatever order they loaded in.
    """

    def __init__(self, spec_cls: type[S]) -> None:
        self.spec_cls = spec_cls
        self.kind = spec_cls.kind
        self._specs: dict[str, S] = {}
        self._owner = ""
        #: ``[(plugin, why it is disabled, the specs of this kind it would register or None when unknown)]`` of the
        #: disabled plugins (:func:`ragen_core.plugins.collect_registries` sets it); called only to word an error
        self.disabled: Callable[[], list[tuple[str, str, list[Any] | None]]] = list

    @contextlib.contextmanager
    def owned_by(self, plugin: str) -> Iterator[None]:
        """Attribute registrations made inside the block to ``plugin`` (used by the plugin manager)."""
        previous, self._owner = self._owner, plugin
        try:
            yield
        finally:
            self._owner = previous

    def register(self, name: str, entry_point: Any, **fields: Any) -> S:
        """Register a component.

        :param name: the name configs select it by (letters, digits, ``_ . -``).
        :param entry_point: ``"package.module:Object"`` (preferred: nothing is imported now) or the object.
        :param fields: the spec's other fields (``description``, ``config``, kind-specific ones).
        :returns: the spec that was added.
        """
        fields.setdefault("plugin", self._owner)
        try:
            spec = self.spec_cls(name=name, entry_point=entry_point, **fields)
        except (TypeError, ValueError) as exc:
            raise PluginError(f"plugin {self._owner or '?'} registered {self.kind} {name!r} with bad fields: {exc}") from exc
        self._add(spec)
        return spec

    def _add(self, spec: Any) -> None:
        if not isinstance(spec.name, str) or not _NAME_RE.match(spec.name):
            raise PluginError(
                f"plugin {spec.plugin or '?'} registered a {self.kind} with the invalid name {spec.name!r}",
                hint="names are letters, digits, '_', '.', '-' and start with a letter or digit",
            )
        if isinstance(getattr(spec, "entry_point", None), str) and ":" not in spec.entry_point:
            raise PluginError(
                f"plugin {spec.plugin or '?'} registered {self.kind} {spec.name!r} with entry point "
                f"{spec.entry_point!r}", hint="use the form 'package.module:Object'")
        if spec.name in self._specs:
            other = self._specs[spec.name]
            a, b = sorted([other.plugin or "?", spec.plugin or "?"])
            raise DuplicateComponentError(
                f"{self.kind} {spec.name!r} is registered twice: by plugin {a!r} and by plugin {b!r}",
                hint=f"disable one of them (plugins.disable=[{b}] or RAGEN_DISABLE_PLUGINS={b})",
            )
        self._specs[spec.name] = spec

    def get(self, name: str) -> S:
        """Return the spec named ``name``; an unknown name raises with a did-you-mean and the known names."""
        try:
            return self._specs[name]
        except KeyError:
            raise self._unknown(name) from None

    def _unknown(self, name: str) -> UnknownComponentError:
        found, unread = self._disabled(lambda spec: spec.name == name)
        if found:
            _, plugin, why = found
            return UnknownComponentError(f"{self.kind} {name!r} is provided by the plugin {plugin!r}, which is "
                                         f"disabled ({why})", hint=f"enable it: remove {plugin!r} from {why}")
        known = sorted(self._specs)
        close = suggest(str(name), known)
        msg = f"unknown {self.kind} {name!r}"
        if close:
            msg += f"; did you mean {close!r}?"
        hint = f"known {self.kind}s: {', '.join(known)}" if known else (
            f"no {self.kind} is registered: is the plugin providing it installed and not disabled? (ragen plugins)")
        return UnknownComponentError(msg, hint=hint + unread)

    def _disabled(self, wanted: Callable[[Any], bool]) -> tuple[tuple[Any, str, str] | None, str]:
        """``((spec, plugin, why), "")`` for the first disabled plugin that would register a component ``wanted``
        accepts, else ``(None, "; disabled plugins: ...")`` naming those whose components are unknown (or "")."""
        unread = []
        for plugin, why, specs in self.disabled():
            spec = next((s for s in specs or [] if wanted(s)), None)
            if spec is not None:
                return (spec, plugin, why), ""
            unread += [f"{plugin} ({why})"] if specs is None else []
        return None, f"; disabled plugins: {', '.join(unread)}" if unread else ""

    def default(self) -> S:
        """The component a config that names none of this kind gets: the one a plugin registered with
        ``default=True``. None offered (even when only one is installed: a plugin disabled by the user must not
        hand its role to whatever is left), or several, raise :class:`ConfigError` asking the config to name one."""
        offered = [spec for spec in self if spec.default]
        if len(offered) == 1:
            return offered[0]
        if offered:
            both = ", ".join(f"{s.name!r} (plugin {s.plugin or '?'})" for s in offered)
            raise ConfigError(f"the config names no {self.kind}, and several plugins offer a default one: {both}",
                              hint=f"name one: {self.kind}: {offered[0].name}")
        known = self.names()
        found, unread = self._disabled(lambda spec: spec.default)
        if found:
            spec, plugin, why = found
            raise ConfigError(f"the config names no {self.kind}, and the plugin {plugin!r} that offers the default "
                              f"one ({spec.name!r}) is disabled ({why})", hint=f"enable it (remove {plugin!r} from "
                              f"{why}), or name one: {self.kind}: NAME (known: {', '.join(known) or 'none'})")
        raise ConfigError(f"the config names no {self.kind}, and no installed plugin offers a default one",
                          hint=(f"name one: {self.kind}: NAME (known: {', '.join(known)})" if known else
                          f"no {self.kind} is registered: is the plugin providing one installed and not disabled? "
                          "(ragen plugins)") + unread)

    def names(self) -> list[str]:
        """Sorted names of all registered components."""
        return sorted(self._specs)

    def __contains__(self, name: object) -> bool:
        return name in self._specs

    def __iter__(self) -> Iterator[S]:
        return iter([self._specs[n] for n in sorted(self._specs)])

    def __len__(self) -> int:
        return len(self._specs)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.kind}: {', '.join(self.names())}>"


class EnvRegistry(Registry[EnvSpec]):
    """Envs and env variants (one namespace).

    ``register(name, entry_point, ...)`` adds an env class; ``register_variant(name, env=..., params=...)`` adds a
    named configuration of one. :meth:`resolve` follows a variant chain to its env and merged parameters.
    """

    def __init__(self) -> None:
        super().__init__(EnvSpec)
        self._namespaces: dict[str, EnvNamespace] = {}

    def register_variant(self, name: str, *, env: str, params: Mapping[str, Any] | None = None,
                         instruction: str | None = None, description: str = "",
                         hints: RolloutHints | Mapping[str, Any] | None = None) -> EnvVariant:
        """Register a named variant of ``env`` (an env or another variant) with ``params`` merged over it and
        ``hints`` over its rollout hints."""
        try:
            variant = EnvVariant(name=name, env=env, params=dict(params or {}), instruction=instruction,
                                 description=description, plugin=self._owner, hints=hints)
        except (TypeError, ValueError) as exc:
            raise PluginError(f"plugin {self._owner or '?'} registered env variant {name!r} with bad fields: {exc}") from exc
        self._add(variant)
        return variant

    def register_namespace(self, prefix: str, *, env: str, option: str, names: Any = None,
                           description: str = "") -> EnvNamespace:
        """Make every name ``<prefix>.<member>`` stand for env ``env`` with ``option=<member>`` (see
        :class:`EnvNamespace`); ``names`` lists the members for ``ragen envs --members PREFIX``."""
        if not isinstance(prefix, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_-]*", prefix):
            raise PluginError(f"plugin {self._owner or '?'} registered the invalid env namespace {prefix!r}",
                              hint="a namespace is letters, digits, '_' and '-', starting with a letter or digit")
        if prefix in self._namespaces:
            a, b = sorted([self._namespaces[prefix].plugin or "?", self._owner or "?"])
            raise DuplicateComponentError(f"env namespace {prefix!r} is registered twice: by plugin {a!r} and by "
                                          f"plugin {b!r}", hint=f"disable one of them (RAGEN_DISABLE_PLUGINS={b})")
        space = EnvNamespace(name=prefix, env=env, option=option, names=names, description=description,
                             plugin=self._owner)
        self._namespaces[prefix] = space
        return space

    def namespaces(self) -> list[EnvNamespace]:
        """All registered namespaces, sorted by prefix."""
        return [self._namespaces[p] for p in sorted(self._namespaces)]

    def namespace(self, prefix: str) -> EnvNamespace:
        """The namespace ``prefix`` (a trailing ``.`` or ``.*`` is ignored); unknown raises with a did-you-mean."""
        prefix = prefix.removesuffix("*").removesuffix(".")
        if prefix in self._namespaces:
            return self._namespaces[prefix]
        close = suggest(prefix, list(self._namespaces))
        raise UnknownComponentError(f"unknown env namespace {prefix!r}" + (f"; did you mean {close!r}?" if close else ""),
                                    hint=f"known namespaces: {', '.join(sorted(self._namespaces)) or 'none'}")

    def _member(self, name: str) -> EnvVariant | None:
        prefix, dot, member = name.partition(".") if isinstance(name, str) else ("", "", "")
        space = self._namespaces.get(prefix) if dot and member else None
        return space.member(member) if space is not None else None

    def get(self, name: str) -> Any:
        """The env, variant, or namespace member (a variant made on the fly) named ``name``."""
        if name not in self._specs:
            member = self._member(name)
            if member is not None:
                return member
        return super().get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._specs or (isinstance(name, str) and self._member(name) is not None)

    def _unknown(self, name: str) -> UnknownComponentError:
        error = super()._unknown(name)
        if self._namespaces and error.hint and error.hint.startswith(f"known {self.kind}s: "):
            error.hint += "; namespaces: " + ", ".join(f"{p}.<name>" for p in sorted(self._namespaces))
        return error

    def variants(self) -> list[EnvVariant]:
        """All registered variants, sorted by name."""
        return [s for s in self._specs.values() if isinstance(s, EnvVariant)]

    def envs(self) -> list[EnvSpec]:
        """All registered env classes, sorted by name."""
        return [s for s in self if isinstance(s, EnvSpec)]

    def _chain(self, name: str) -> tuple[list[EnvVariant], EnvSpec]:
        """The variants from ``name`` down (nearest first) and the env they end at."""
        variants, spec = list[EnvVariant](), self.get(name)
        while isinstance(spec, EnvVariant):
            if spec in variants:
                raise RagenError(f"env variant cycle: {' -> '.join([*(v.name for v in variants), spec.name])}")
            variants.append(spec)
            spec = self.get(spec.env)
        return variants, spec

    def resolve(self, name: str) -> tuple[EnvSpec, dict[str, Any], str | None]:
        """Follow ``name`` through variants to ``(env spec, merged params, instruction)``."""
        variants, spec = self._chain(name)
        params: dict[str, Any] = {}
        for variant in reversed(variants):
            params.update(variant.params)
        return spec, params, next((v.instruction for v in variants if v.instruction is not None), None)

    def hints(self, name: str) -> RolloutHints:
        """The rollout hints of env or variant ``name``: each variant's over its base's, down to the env's
        (:meth:`EnvSpec.rollout_hints`)."""
        variants, spec = self._chain(name)
        given: dict[str, Any] = {}
        for variant in reversed(variants):
            given.update(variant.hints.given() if variant.hints else {})
        return attrs.evolve(spec.rollout_hints(), **given)

    def make(self, name: str, options: Mapping[str, Any] | None = None) -> Any:
        """Create env ``name`` (env or variant) with ``options`` over the variant's params.

        The instruction of a variant, if any, replaces the env's ``instruction`` attribute.
        """
        spec, params, instruction = self.resolve(name)
        config = spec.make_config({**params, **dict(options or {})}, path=f"env {name}")
        cls = spec.load()
        try:
            env = cls(config)
        except TypeError as exc:
            if _takes_config(cls):
                raise
            raise PluginError(f"env {spec.name!r} (plugin {spec.plugin or '?'}) cannot be made as "
                              f"{getattr(cls, '__name__', cls)}(config): {exc}",
                              hint="an env's __init__ takes one positional argument, its options as an instance "
                              "of an attrs config class (the class's config_cls or register(config=...)), not "
                              "keyword options: see docs/plugins.md#a-complete-env") from exc
        if instruction is not None:
            env.instruction = instruction
        return env


@attrs.define
class Registries:
    """All component registries of one plugin manager (see :func:`ragen_core.plugins.collect_registries`)."""

    envs: EnvRegistry = attrs.field(factory=EnvRegistry)
    filters: Registry[FilterSpec] = attrs.field(factory=lambda: Registry(FilterSpec))
    estimators: Registry[EstimatorSpec] = attrs.field(factory=lambda: Registry(EstimatorSpec))
    diagnostics: Registry[DiagnosticSpec] = attrs.field(factory=lambda: Registry(DiagnosticSpec))
    trainers: Registry[TrainerSpec] = attrs.field(factory=lambda: Registry(TrainerSpec))
    sinks: Registry[SinkSpec] = attrs.field(factory=lambda: Registry(SinkSpec))
    policies: Registry[PolicySpec] = attrs.field(factory=lambda: Registry(PolicySpec))

    def all(self) -> dict[str, Registry[Any]]:
        """The registries by kind name (``envs``, ``filters``, ...)."""
        return {"envs": self.envs, "filters": self.filters, "estimators": self.estimators,
                "diagnostics": self.diagnostics, "trainers": self.trainers, "sinks": self.sinks,
                "policies": self.policies}

    def by_plugin(self) -> dict[str, list[Any]]:
        """Specs grouped by owning plugin name."""
        out: dict[str, list[Any]] = {}
        for reg in self.all().values():
            for spec in reg:
                out.setdefault(spec.plugin, []).append(spec)
        for space in self.envs.namespaces():
            out.setdefault(space.plugin, []).append(space)
        return out


def _takes_config(cls: Any) -> bool:
    """Whether ``cls(config)`` binds ``config`` to a first positional parameter meant for it: one without a default
    or defaulting to None (``def __init__(self, size=3)`` would take the config as its size)."""
    try:
        sig = inspect.signature(cls)
    except (TypeError, ValueError):
        return True  # no signature to read: the error stands as raised
    try:
        sig.bind(None)
    except TypeError:
        return False
    first = next(iter(sig.parameters.values()))
    return first.kind is inspect.Parameter.VAR_POSITIONAL or first.default is None or first.default is first.empty
