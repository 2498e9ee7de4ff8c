"""The ``wandb`` sink: a Weights & Biases run, offline unless configured otherwise.

Offline (the default) needs no account and no network: the run is written under ``RUN_DIR/wandb/offline-run-*``
and can be uploaded later with ``wandb sync RUN_DIR/wandb/offline-run-*``. ``mode: online`` logs live (after
``wandb login``); ``mode: disabled`` turns W&B off without editing the sink list. The project defaults to
``run.name``, the W&B run name to the run directory's name; the resolved config becomes the W&B run config and
``run.mode`` (train, eval, rollout) its job type. Each metrics record is one ``log(metrics, step=step)``; the run is
finished at the end with exit code 0, or 1 when the run failed. ``pip install 'ragen[wandb]'``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import attrs

from ragen_plugins_sinks.base import due

__all__ = ["WandbConfig", "WandbSink"]


@attrs.define
class WandbConfig:
    """Options of the ``wandb`` sink.

    :ivar project: the W&B project (default: ``run.name``).
    :ivar run_name: the W&B run name (default: the run directory's name; ``name`` is the sink's own key).
    :ivar entity: the W&B team or user (default: yours).
    :ivar group: a W&B group, e.g. to compare seeds.
    :ivar tags: W&B tags.
    :ivar mode: ``offline`` (default), ``online`` or ``disabled``.
    :ivar dir: where W&B writes its files; relative to the run directory (default: the run directory itself, so
        the W&B run is under ``RUN_DIR/wandb``).
    :ivar every: log the records of every N-th step (records of step 0 always).
    :ivar system_stats: let W&B sample CPU/GPU/memory use in the background (off: it costs CPU on small boxes).
    """

    project: str | None = None
    run_name: str | None = None
    entity: str | None = None
    group: str | None = None
    tags: list[str] = attrs.field(factory=list)
    mode: Literal["offline", "online", "disabled"] = "offline"
    dir: str = "."
    every: int = attrs.field(default=1, validator=attrs.validators.ge(1))
    system_stats: bool = False


class WandbSink:
    """Logs each record to a W&B run (see the module docstring)."""

    config_cls = WandbConfig

    def __init__(self, config: WandbConfig) -> None:
        self.config = config
        self.wb_run: Any = None

    def open(self, run: Any) -> None:
        """Start the W&B run."""
        import wandb

        c = self.config
        wandb_dir = Path(run.run_dir) / c.dir
        wandb_dir.mkdir(parents=True, exist_ok=True)
        wanted: dict[str, Any] = {"silent": True, "console": "off", "save_code": False, "disable_git": True,
                  "x_disable_stats": not c.system_stats}
        known = getattr(wandb.Settings, "model_fields", wanted)
        settings = wandb.Settings(**{k: v for k, v in wanted.items() if k in known})
        self.wb_run = wandb.init(project=c.project or run.config.run.name, name=c.run_name or Path(run.run_dir).name,
                                 entity=c.entity, group=c.group, tags=list(c.tags) or None, mode=c.mode,
                                 dir=str(wandb_dir), job_type=run.mode, config=run.resolved.to_data(),
                                 reinit="create_new", settings=settings)

    def write(self, step: int, metrics: Mapping[str, float]) -> None:
        """``log(metrics, step=step)`` (skipped unless the step is due)."""
        if due(step, self.config.every) and metrics:
            self.wb_run.log(dict(metrics), step=int(step))

    def close(self, status: str) -> None:
        """Finish the W&B run: exit code 1 when the run failed, else 0."""
        if self.wb_run is not None:
            wb_run, self.wb_run = self.wb_run, None
            wb_run.finish(exit_code=1 if status == "failed" else 0)
