"""The ``console`` sink: a rich table of chosen metrics every N steps.

Each table covers the records since the previous one: per metric its latest value, and the mean, min and max over
those steps. Metrics are chosen by name or shell-style pattern (``val/*``); those absent from the window are left
out. When the run ends, the steps not yet shown get a last table. It prints to standard output (``stream: stderr``
to keep standard output clean), above the progress bar when one is shown.
"""

from __future__ import annotations

import fnmatch
import sys
from collections.abc import Mapping
from typing import Any, Literal

import attrs

__all__ = ["DEFAULT_METRICS", "ConsoleConfig", "ConsoleSink"]

DEFAULT_METRICS = ["rollout/success", "rollout/reward_mean", "train/success", "val/success", "actor/pg_loss",
                   "actor/entropy", "critic/vf_loss", "rollout/response_length_mean", "timing_s/step"]


@attrs.define
class ConsoleConfig:
    """Options of the ``console`` sink.

    :ivar every: print a table every N steps.
    :ivar metrics: metric names or shell-style patterns (``val/*``) to show, in this order.
    :ivar stream: ``stdout`` or ``stderr``.
    """

    every: int = attrs.field(default=10, validator=attrs.validators.ge(1))
    metrics: list[str] = attrs.field(factory=lambda: list(DEFAULT_METRICS))
    stream: Literal["stdout", "stderr"] = "stdout"


class ConsoleSink:
    """Prints a summary table every ``every`` steps (see the module docstring)."""

    config_cls = ConsoleConfig

    def __init__(self, config: ConsoleConfig) -> None:
        self.config = config
        self.title = "ragen"
        self.window: dict[str, list[float]] = {}
        self.latest: dict[str, float] = {}
        self.last_step: int | None = None
        self.shown_step: int | None = None

    def open(self, run: Any) -> None:
        """Remember the run's name for the table titles."""
        self.title = f"{run.run_dir.name}"

    def write(self, step: int, metrics: Mapping[str, float]) -> None:
        """Add the record to the window; print the table when ``step`` is a positive multiple of ``every``."""
        for name, value in metrics.items():
            self.window.setdefault(name, []).append(float(value))
            self.latest[name] = float(value)
        self.last_step = step
        if step > 0 and step % self.config.every == 0 and step != self.shown_step:
            self._show(step, final=False)

    def close(self, status: str) -> None:
        """Show the steps not shown yet."""
        if self.window and self.last_step is not None and self.last_step != self.shown_step:
            self._show(self.last_step, final=True, status=status)

    def rows(self) -> list[tuple[str, float, float, float, float]]:
        """(metric, latest, mean, min, max) for the chosen metrics present in the window, in the configured order."""
        out, seen = [], set()
        for pattern in self.config.metrics:
            for name in sorted(n for n in self.window if fnmatch.fnmatchcase(n, pattern) and n not in seen):
                seen.add(name)
                values = self.window[name]
                out.append((name, self.latest[name], sum(values) / len(values), min(values), max(values)))
        return out

    def _show(self, step: int, *, final: bool, status: str = "") -> None:
        from rich.console import Console
        from rich.table import Table

        from ragen_core.log import get_console

        suffix = f" · {status}" if final and status else ""
        table = Table(title=f"{self.title} · step {step}{suffix}", title_justify="left")
        table.add_column("metric")
        for col in ("last", "mean", "min", "max"):
            table.add_column(col, justify="right")
        for name, *values in self.rows():
            table.add_row(name, *(f"{v:.4g}" for v in values))
        if not table.row_count:
            table.add_row("(none of the chosen metrics)", "", "", "", "")
        # on standard error, through the logs' console: the table prints above a progress bar, never inside it
        console = Console(file=sys.stdout) if self.config.stream == "stdout" else get_console()
        console.print(table)
        self.window.clear()
        self.shown_step = step
