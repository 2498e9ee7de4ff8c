"""Hook specifications of the ``ragen`` pluggy project.

Implement any of these in a module or class and expose it through an entry point in the group ``ragen``::

    # pyproject.toml
    [project.entry-points.ragen]
    myplugin = "my_package.plugin"

    # my_package/plugin.py
    from ragen_core import hookimpl

    @hookimpl
    def ragen_register_envs(registry):
        registry.register("maze", "my_package.maze:MazeEnv", description="a small maze")

Hooks come in three groups, in the order a run meets them:

1. **Registration** (``ragen_register_*``): called once per plugin manager, plugin by plugin in sorted name order,
   each with a typed registry. Registrations are attributed to the calling plugin; a name registered twice is an
   error naming both plugins, so results never depend on load order.
2. **Configuration** (``ragen_check_config``): cross-field checks on the resolved config, before anything starts.
3. **Lifecycle** (``ragen_on_run_start`` … ``ragen_on_run_end``): called by trainers and the rollout runner with
   context objects (:mod:`ragen_core.context`). They take at most three arguments.

Hook implementations may accept any subset of a spec's arguments (pluggy passes by name).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pluggy import HookspecMarker

if TYPE_CHECKING:  # pragma: no cover
    import click

    from ragen_core.config import ResolvedConfig
    from ragen_core.context import RunContext, StepContext
    from ragen_core.registry import (
        DiagnosticSpec,
        EnvRegistry,
        EstimatorSpec,
        FilterSpec,
        PolicySpec,
        Registries,
        Registry,
        SinkSpec,
        TrainerSpec,
    )

hookspec = HookspecMarker("ragen")


# ------------------------------------------------------------------------------------------- registration

@hookspec
def ragen_register_envs(registry: EnvRegistry) -> None:
    """Register environments and env variants.

    Called once per plugin manager when the registries are collected (:func:`ragen_core.plugins.collect_registries`),
    for each plugin in sorted name order.

    :param registry: the :class:`~ragen_core.registry.EnvRegistry`. Call
        ``registry.register(name, "pkg.module:EnvClass", description=...)`` for an env class (a gymnasium env
        following :mod:`ragen_core.env`'s contract) and ``registry.register_variant(name, env=..., params=...,
        instruction=...)`` for a named configuration (RAGEN's "tag"). Use entry-point strings so nothing is
        imported until the env is used.
    :returns: nothing; the return value is ignored. Not firstresult.
    """


@hookspec
def ragen_register_filters(registry: Registry[FilterSpec]) -> None:
    """Register rollout filters (:class:`~ragen_core.protocols.RolloutFilter`).

    Called once per plugin manager when the registries are collected, plugin by plugin.

    :param registry: the filter registry; ``registry.register("top_p", "pkg.mod:TopPFilter", config=...)``.
        The config selects a filter with ``filter: {name: top_p, ...}``.
    :returns: nothing. Not firstresult.
    """


@hookspec
def ragen_register_estimators(registry: Registry[EstimatorSpec]) -> None:
    """Register advantage estimators (:class:`~ragen_core.protocols.Estimator`).

    Called once per plugin manager when the registries are collected, plugin by plugin.

    :param registry: the estimator registry; ``registry.register("grpo", "pkg.mod:GRPO", needs_critic=False)``.
        Selected with ``estimator: grpo``.
    :returns: nothing. Not firstresult.
    """


@hookspec
def ragen_register_diagnostics(registry: Registry[DiagnosticSpec]) -> None:
    """Register diagnostics (:class:`~ragen_core.protocols.Diagnostic`).

    Called once per plugin manager when the registries are collected, plugin by plugin.

    :param registry: the diagnostic registry; ``registry.register("collapse", "pkg.mod:Collapse")``.
        Selected with ``diagnostics: [collapse]``.
    :returns: nothing. Not firstresult.
    """


@hookspec
def ragen_register_trainers(registry: Registry[TrainerSpec]) -> None:
    """Register trainers.

    Called once per plugin manager when the registries are collected, plugin by plugin.

    :param registry: the trainer registry; ``registry.register("torch", "pkg.mod:TorchTrainer",
        install_hint="pip install ragen[torch]")``. A trainer class is built from its config and offers
        ``train(run)`` and ``evaluate(run)`` taking a :class:`~ragen_core.context.RunContext`.
        Selected with ``trainer: torch``.
    :returns: nothing. Not firstresult.
    """


@hookspec
def ragen_register_policies(registry: Registry[PolicySpec]) -> None:
    """Register policy backends: what ``ragen eval --model MODEL`` samples from (a local model, an HTTP endpoint).

    Called once per plugin manager when the registries are collected, plugin by plugin.

    :param registry: the policy-backend registry; ``registry.register("hf", "pkg.mod:HFBackend",
        config="pkg.mod:HFBackendConfig", schemes=("path",))``. ``Backend(config)`` must be a
        :class:`~ragen_core.starpo.rollout.Policy` (``tokenizer`` with a chat template, ``generate(requests)``); the
        config class needs a ``model: str`` field. ``schemes`` are the URL schemes (``"http"``) or ``"path"``
        (local paths and names) it serves when ``--backend`` is not given. Constructing it should fail with a
        :class:`~ragen_core.errors.RagenError` when the model is missing or the endpoint does not answer.
    :returns: nothing. Not firstresult.
    """


@hookspec
def ragen_register_sinks(registry: Registry[SinkSpec]) -> None:
    """Register metric sinks: where metrics records go besides ``metrics.jsonl`` (TensorBoard, W&B, a console table).

    Called once per plugin manager when the registries are collected, plugin by plugin.

    :param registry: the sink registry; ``registry.register("tensorboard", "pkg.mod:TBSink", config=...,
        requires=("tensorboard",), install_hint="pip install 'ragen[tensorboard]'")``. Selected with
        ``sinks: [tensorboard, {name: console, every: 5}]``; a selected sink whose ``requires`` modules are not
        installed is a config error before the run starts. The ``sinks`` plugin shipped with ragen builds and drives
        the selected sinks (``Sink(config)`` with ``open(run)``, ``write(step, metrics)``, ``close(status)``).
    :returns: nothing. Not firstresult.
    """


@hookspec
def ragen_register_commands(cli: click.Group) -> None:
    """Add sub-commands to the ``ragen`` command line.

    Called once when the ``ragen`` CLI starts, before it parses its arguments.

    :param cli: the root :class:`click.Group`; add commands with ``@cli.command()``. Command names must not clash
        with built-in ones (``plugins``, ``envs``, ``config``, ``play``, ``rollout``, ``train``). ``eval`` is added
        by the core after this hook, as the trainer's validation, only when no plugin registered it (the ``eval``
        plugin registers a standalone one).
    :returns: nothing. Not firstresult.
    """


# ------------------------------------------------------------------------------------------- configuration

@hookspec
def ragen_check_config(config: ResolvedConfig, registries: Registries) -> list[str] | None:
    """Cross-field checks of a resolved config, run before a run starts.

    Called once by :func:`ragen_core.config.resolve_config` after every component's options were validated.

    :param config: the :class:`~ragen_core.config.ResolvedConfig` (``config.config`` is the core config;
        ``config.filter``, ``config.estimator``, ``config.trainer`` the components' validated configs).
    :param registries: all registries.
    :returns: a list of problems (one plain sentence each, naming the keys involved), or None / an empty list
        when all is well. All plugins' problems are reported together. Not firstresult.
    """


# ------------------------------------------------------------------------------------------- lifecycle

@hookspec
def ragen_on_run_start(run: RunContext) -> None:
    """A run (training, evaluation or scripted rollout) is about to start.

    Called once per run, after the run directory exists and the resolved config was written to it.

    :param run: the :class:`~ragen_core.context.RunContext` (config, registries, run directory, logger).
    :returns: nothing. Not firstresult.
    """


@hookspec
def ragen_on_rollout_end(ctx: StepContext) -> None:
    """A step's rollout finished; the batch is complete and not yet filtered.

    Called once per step, before diagnostics, filtering and the update (``ragen eval``, one step numbered 0: once per
    batch of groups). Implementations may read ``ctx.batch``; they must not change it (record what you need
    instead).

    :param ctx: the :class:`~ragen_core.context.StepContext` of the step.
    :returns: nothing. Not firstresult.
    """


@hookspec
def ragen_collect_metrics(ctx: StepContext) -> dict[str, float] | None:
    """Contribute metrics for the step.

    Called once per step after the update (or after the rollout when there is no update), before
    ``ragen_on_step_end``. All plugins' dicts are merged into ``ctx.metrics``; a name that a plugin reports and
    that is already set is an error (metrics are never silently overwritten).

    :param ctx: the :class:`~ragen_core.context.StepContext`; ``ctx.metrics`` holds the metrics so far
        (``ctx.batch`` is None at the end of ``ragen eval``: its trajectories are in ``trajectories.jsonl``).
    :returns: a dict of metric name (``family/name``) to a finite number, or None. Not firstresult.
    """


@hookspec
def ragen_on_step_end(ctx: StepContext) -> None:
    """A step finished and its metrics are final (e.g. for sinks, early stopping, checkpoint triggers).

    Called once per step after ``ragen_collect_metrics``.

    :param ctx: the :class:`~ragen_core.context.StepContext`; ``ctx.metrics`` is complete. Setting
        ``ctx.stop_reason`` to a sentence asks the run to stop after this step.
    :returns: nothing. Not firstresult.
    """


@hookspec
def ragen_on_metrics(run: RunContext, step: int, metrics: dict[str, float]) -> None:
    """A metrics record was appended to ``metrics.jsonl`` (metric sinks forward it).

    Called by :meth:`~ragen_core.context.RunContext.write_metrics` right after the line is written: once per step
    (after ``ragen_on_step_end``) and for records outside the step loop (warm-start and the initial validation at
    step 0, evaluation results).

    :param run: the :class:`~ragen_core.context.RunContext`.
    :param step: the step of the record (0 before the first step; several records may share a step).
    :param metrics: the record, metric name to finite float (a copy: changing it changes nothing).
    :returns: nothing. Not firstresult. An exception fails the run, so an implementation that may fail should
        catch its own errors (the ``sinks`` plugin warns once and switches the failing sink off).
    """


@hookspec
def ragen_on_error(ctx: StepContext | RunContext, error: BaseException) -> None:
    """Something failed during a run: an env raised (the trajectory is marked and excluded, the run goes on) or the
    run itself is aborting.

    Called once per failure, before the run continues (env errors) or re-raises (run errors).

    :param ctx: the :class:`~ragen_core.context.StepContext` of the failing step, or the
        :class:`~ragen_core.context.RunContext` when the failure is outside a step.
    :param error: the exception.
    :returns: nothing; errors are never swallowed by this hook. Not firstresult.
    """


@hookspec
def ragen_on_run_end(run: RunContext, result: dict[str, Any]) -> None:
    """A run ended (normally, early-stopped, or after an error).

    Called once per run, last.

    :param run: the :class:`~ragen_core.context.RunContext`.
    :param result: a summary: ``status`` (``"completed"``, ``"stopped"`` or ``"failed"``), ``steps``, and the final
        metrics under ``metrics``.
    :returns: nothing. Not firstresult.
    """
