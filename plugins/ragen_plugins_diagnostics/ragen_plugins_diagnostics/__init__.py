"""ragen's diagnostics and run health report, a plugin like any other (entry point ``diagnostics`` in the group
``ragen``).

Diagnostics (``diagnostics: [collapse, echo_trap]``; computed by the trainer on the unfiltered batch at step 1 and
every ``trainer.diagnostics_every`` steps):

- ``collapse`` — RAGEN-2's mutual-information family: how much the reasoning between ``<think>`` and ``</think>``
  depends on the input, by cross-scoring reasoning against other prompts with the policy
  (:mod:`ragen_plugins_diagnostics.collapse`; options in :class:`~ragen_plugins_diagnostics.collapse.CollapseConfig`);
- ``echo_trap`` — repetitiveness of the reasoning: duplicate rates across trajectories and groups, distinct-1/2
  (:mod:`ragen_plugins_diagnostics.echo`).

Command: ``ragen report RUN_DIR [--out DIR]`` writes ``report.md`` with plots and advice, and ``report.html`` (one
self-contained page: the same with a trajectory viewer over the run's ``samples.jsonl``)
(:mod:`ragen_plugins_diagnostics.report`, also :func:`ragen_plugins_diagnostics.report.write_report`). Early-stop
rules for trainers: :class:`ragen_plugins_diagnostics.early_stop.EarlyStop`.

Registration is lazy: this module imports nothing but the hook marker.
"""

from ragen_core import hookimpl

_PKG = "ragen_plugins_diagnostics"

@hookimpl
def ragen_register_diagnostics(registry):  # noqa: ANN001, ANN201 - the hookspec documents the types
    """Register the built-in diagnostics."""
    registry.register("collapse", f"{_PKG}.collapse:Collapse", config=f"{_PKG}.collapse:CollapseConfig",
                      description="RAGEN-2 reasoning collapse: MI between input and reasoning, retrieval accuracy, "
                                  "regimes")
    registry.register("echo_trap", f"{_PKG}.echo:EchoTrap",
                      description="echo trap: duplicate reasoning across trajectories and groups, distinct-1/2")


@hookimpl
def ragen_register_commands(cli):  # noqa: ANN001, ANN201 - the hookspec documents the types
    """Add ``ragen report``."""
    import click

    @cli.command("report")
    @click.argument("run_dir", type=click.Path(exists=True, file_okay=False))
    @click.option("--out", type=click.Path(file_okay=False), default=None,
                  help="Directory for report.md, report.html and the plots (default: RUN_DIR).")
    def report_cmd(run_dir: str, out: str | None) -> None:
        """Write a health report (report.md and report.html: plots, advice, trajectories) for the run in RUN_DIR."""
        from ragen_plugins_diagnostics.report import write_report

        path = write_report(run_dir, out)
        click.echo(str(path))
        click.echo(str(path.with_name("report.html")))


@hookimpl
def ragen_on_step_end(ctx):  # noqa: ANN001, ANN201 - the hookspec documents the types
    """RAGEN's early stops for training runs (reward-variance collapse; validation success below 1%).

    Off with ``trainer.early_stop=false`` where the trainer offers that option.
    """
    run = ctx.run
    if run.mode != "train" or not getattr(run.resolved.trainer, "early_stop", True):
        return
    from ragen_plugins_diagnostics.early_stop import EarlyStop

    stop = run.state.setdefault("ragen_plugins_diagnostics.early_stop", EarlyStop())
    reason = stop.update(ctx.metrics)
    if reason and not ctx.stop_reason:
        ctx.stop_reason = reason


@hookimpl
def ragen_on_run_end(run, result):  # noqa: ANN001, ANN201 - the hookspec documents the types
    """Write the health report (``report.md``, ``report.html`` and plots) at the end of every training run; a failure to write it
    is logged, never raised (the run's results are already on disk)."""
    if run.mode != "train":
        return
    try:
        from ragen_plugins_diagnostics.report import write_report

        path = write_report(run.run_dir)
        run.log.info("report", path=str(path), html=str(path.with_name("report.html")))
    except Exception as exc:  # noqa: BLE001 - a report must not turn a finished run into a failed one
        run.log.warning("report_failed", error=f"{type(exc).__name__}: {exc}")
