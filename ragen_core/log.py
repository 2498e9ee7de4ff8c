"""Structured logging (structlog) and the terminal's one console.

On a terminal, log lines (readable key=value lines) and progress displays go through one rich console, so a log line
prints above a live progress bar, never inside it; otherwise (a pipe, a file, CI) logs are JSON lines and no
progress display is drawn.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Callable, Iterator
from typing import Any, TextIO, cast

import structlog

__all__ = ["configure_logging", "get_console", "get_logger", "live_display", "progress", "stage"]

_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}
#: the console that configure_logging set up, and whether progress displays are drawn on it
_STATE: dict[str, Any] = {"console": None, "live": False}


class _ConsoleWriter:
    """A file for structlog's PrintLogger that prints whole lines through the rich console (above any live
    display); ANSI colours of the renderer become rich styles."""

    def __init__(self, console: Any) -> None:
        self.console, self._pending = console, ""

    def write(self, text: str) -> int:
        from rich.text import Text

        self._pending += text
        *lines, self._pending = self._pending.split("\n")
        for line in lines:
            self.console.print(Text.from_ansi(line), soft_wrap=True, highlight=False)
        return len(text)

    def flush(self) -> None:
        self.console.file.flush()


class _Stderr:
    """Standard error as it is when a line is written (a test runner, a notebook may swap ``sys.stderr`` after
    logging was configured; the object that was current then may be closed since)."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


def configure_logging(fmt: str = "auto", level: str = "info", stream: TextIO | None = None) -> None:
    """Configure structlog for this process.

    :param fmt: ``"console"`` (coloured key=value lines), ``"json"`` (one JSON object per line) or ``"auto"``
        (console when ``stream`` is a terminal, else JSON).
    :param level: ``debug``, ``info``, ``warning`` or ``error``.
    :param stream: where logs go (default: standard error, so standard output stays clean for data).

    With console lines the logs go through :func:`get_console`, and on a terminal progress displays
    (:func:`progress`, :func:`stage`) are drawn below them.
    """
    from rich.console import Console

    # without a stream the console writes to whatever sys.stderr is at the time (a test runner may swap it)
    console = Console(file=stream, soft_wrap=True) if stream is not None else Console(stderr=True, soft_wrap=True)
    tty = bool(getattr(stream or sys.stderr, "isatty", lambda: False)())
    if fmt == "auto":
        fmt = "console" if tty else "json"
    _STATE.update(console=console, live=fmt == "console" and console.is_terminal)
    renderer: Any = (structlog.dev.ConsoleRenderer(colors=tty) if fmt == "console"
                     else structlog.processors.JSONRenderer(sort_keys=True))
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.StackInfoRenderer(),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(_LEVELS[level]),
        logger_factory=structlog.PrintLoggerFactory(
            file=cast(TextIO, _ConsoleWriter(console) if fmt == "console" else stream or _Stderr())),
        cache_logger_on_first_use=False,
    )


def get_logger(name: str = "ragen", **bound: Any) -> Any:
    """A structlog logger named ``name`` with ``bound`` context."""
    return structlog.get_logger(name).bind(logger=name, **bound)


def get_console() -> Any:
    """The rich console the logs go through (standard error before :func:`configure_logging` ran): draw progress
    and tables on it so that they and the log lines never share a line."""
    if _STATE["console"] is None:
        from rich.console import Console

        _STATE["console"] = Console(stderr=True, soft_wrap=True)
    return _STATE["console"]


def live_display() -> bool:
    """Whether progress displays are drawn: logs are console lines on a terminal (JSON logs get none)."""
    return bool(_STATE["live"])


def progress(*columns: Any, transient: bool = False, enabled: bool = True) -> Any:
    """A rich ``Progress`` with ``columns`` on :func:`get_console`, disabled unless ``enabled`` and
    :func:`live_display`."""
    from rich.progress import Progress

    return Progress(*columns, console=get_console(), disable=not (enabled and live_display()), transient=transient)


@contextlib.contextmanager
def stage(description: str, total: float | None = None, unit: str = "") -> Iterator[Callable[[float], None]]:
    """A transient progress line for a long stage (loading a model, a warm-start, embedding a corpus): the
    description, a bar with ``done/total unit`` when ``total`` is known (a spinner otherwise), the elapsed and
    remaining time. Yields ``advance(n)``. Draws nothing unless :func:`live_display`; the stage's own log lines say
    when it starts and ends."""
    from rich import progress as rp

    columns: list[Any] = [rp.SpinnerColumn(), rp.TextColumn("{task.description}")]
    if total is not None:
        columns += [rp.BarColumn(), rp.MofNCompleteColumn(), rp.TextColumn(unit)]
    columns += [rp.TimeElapsedColumn()] + ([rp.TimeRemainingColumn()] if total is not None else [])
    with progress(*columns, transient=True) as bar:
        task = bar.add_task(description, total=total)

        def advance(n: float = 1.0) -> None:
            bar.advance(task, n)

        yield advance
