"""ragen's metric sinks, a plugin like any other (entry point ``sinks`` in the group ``ragen``).

Every metrics record a run writes to ``metrics.jsonl`` (one per training step, plus the step-0 records of warm-start
and the initial validation, and evaluation results) is also handed to the sinks selected in the config::

    sinks:
      - tensorboard                      # event files under RUN_DIR/tensorboard
      - {name: wandb, project: sokoban}  # Weights & Biases, offline unless mode: online
      - {name: console, every: 10}       # a table of chosen metrics every 10 steps

- ``tensorboard`` (:class:`~ragen_plugins_sinks.tensorboard_sink.TensorBoardSink`, needs ``ragen[tensorboard]``);
- ``wandb`` (:class:`~ragen_plugins_sinks.wandb_sink.WandbSink`, needs ``ragen[wandb]``);
- ``console`` (:class:`~ragen_plugins_sinks.console.ConsoleSink`, needs nothing more).

A selected sink whose package is missing is a config error before the run starts (with the ``pip install`` line).
While the run goes on, a sink that raises is reported once as a warning and switched off; the run continues and
``metrics.jsonl`` still holds every metric. Sinks are flushed and closed when the run ends, and when it fails.

Other plugins add sinks with ``ragen_register_sinks``; this plugin drives every selected sink, whoever registered it
(the protocol is :class:`~ragen_plugins_sinks.base.Sink`). Registration is lazy: this module imports nothing but
the hook marker.
"""

from ragen_core import hookimpl

_PKG = "ragen_plugins_sinks"
_STATE = "ragen_plugins_sinks.sinks"

@hookimpl
def ragen_register_sinks(registry):  # noqa: ANN001, ANN201 - the hookspec documents the types
    """Register the built-in sinks."""
    registry.register("tensorboard", f"{_PKG}.tensorboard_sink:TensorBoardSink",
                      config=f"{_PKG}.tensorboard_sink:TensorBoardConfig", requires=("tensorboard",),
                      install_hint="pip install 'ragen[tensorboard]'",
                      description="TensorBoard event files: every metric as a scalar, the resolved config as text")
    registry.register("wandb", f"{_PKG}.wandb_sink:WandbSink", config=f"{_PKG}.wandb_sink:WandbConfig",
                      requires=("wandb",), install_hint="pip install 'ragen[wandb]'",
                      description="Weights & Biases run (offline by default), the config as run config")
    registry.register("console", f"{_PKG}.console:ConsoleSink", config=f"{_PKG}.console:ConsoleConfig",
                      description="a table of chosen metrics (last value, mean, min, max) every N steps")


@hookimpl
def ragen_on_run_start(run):  # noqa: ANN001, ANN201 - the hookspec documents the types
    """Create and open the sinks selected under ``sinks:`` (none selected: nothing happens)."""
    if not getattr(run.resolved, "sinks", None):
        return
    from ragen_plugins_sinks.base import SinkSet

    run.state[_STATE] = SinkSet.open_for(run)


@hookimpl
def ragen_on_metrics(run, step, metrics):  # noqa: ANN001, ANN201 - the hookspec documents the types
    """Hand the record to every open sink."""
    sinks = run.state.get(_STATE)
    if sinks is not None:
        sinks.write(step, metrics)


@hookimpl
def ragen_on_error(ctx, error):  # noqa: ANN001, ANN201 - the hookspec documents the types
    """On a run failure (not an env error inside a step), close the sinks now with status ``failed`` so that what
    they hold reaches the disk even if a later hook fails."""
    from ragen_core.context import RunContext

    if isinstance(ctx, RunContext) and ctx.state.get(_STATE) is not None:
        ctx.state[_STATE].close("failed")


@hookimpl
def ragen_on_run_end(run, result):  # noqa: ANN001, ANN201 - the hookspec documents the types
    """Flush and close the sinks with the run's status (closing twice is harmless)."""
    sinks = run.state.get(_STATE)
    if sinks is not None:
        sinks.close(str(result.get("status", "completed")))
