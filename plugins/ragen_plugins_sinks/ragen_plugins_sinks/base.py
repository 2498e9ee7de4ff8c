"""The sink protocol and the set of a run's open sinks (failure isolation: one warning, then the sink is off)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

__all__ = ["Sink", "SinkSet", "due"]


@runtime_checkable
class Sink(Protocol):
    """A metric sink, built as ``Sink(config)`` from its validated config (like every ragen component).

    ``open`` is called once when the run starts, ``write`` for each metrics record, ``close`` once when the run ends
    or fails. Any of them may raise: the sink is then reported once and switched off for the rest of the run
    (``metrics.jsonl`` holds everything regardless).
    """

    def open(self, run: Any) -> None:
        """Start: create files, connect; ``run`` is the :class:`~ragen_core.context.RunContext`."""

    def write(self, step: int, metrics: Mapping[str, float]) -> None:
        """Record one metrics record (the metrics of ``step``; several records may share a step)."""

    def close(self, status: str) -> None:
        """Flush everything and release; ``status`` is the run's: ``completed``, ``stopped`` or ``failed``."""


def due(step: int, every: int) -> bool:
    """Whether a record of ``step`` is logged by a sink that logs every ``every`` steps (step 0 always is)."""
    return step % every == 0


class SinkSet:
    """The open sinks of one run, each labelled ``sinks[i] (name)`` for messages.

    A sink that raises while being built, opened or written to is logged once as a ``sink_failed`` warning (with the
    error and what was lost) and dropped; it is still closed at the end, quietly.
    """

    def __init__(self, run: Any, sinks: list[tuple[str, Any]]) -> None:
        self.run = run
        self.live: dict[str, Any] = dict(sinks)
        self.failed: dict[str, Any] = {}
        self.closed = False

    @classmethod
    def open_for(cls, run: Any) -> SinkSet:
        """Build and open the sinks of ``run.resolved.sinks`` (pairs of name and validated config)."""
        made: list[tuple[str, Any]] = []
        broken: list[tuple[str, BaseException]] = []
        for i, (name, config) in enumerate(run.resolved.sinks):
            label = f"sinks[{i}] ({name})"
            try:
                made.append((label, run.registries.sinks.get(name).create(config)))
            except Exception as exc:  # noqa: BLE001 - a sink that cannot be built must not stop the run
                broken.append((label, exc))
        sinks = cls(run, made)
        for label, error in broken:
            sinks._warn(label, "create", error)
        for label in list(sinks.live):
            sinks._call(label, "open", lambda s: s.open(run))
        return sinks

    def write(self, step: int, metrics: Mapping[str, float]) -> None:
        """Hand one record to every live sink."""
        if self.closed:
            return
        for label in list(self.live):
            self._call(label, "write", lambda s: s.write(step, metrics))

    def close(self, status: str) -> None:
        """Close every sink once (failed ones quietly); later calls do nothing."""
        if self.closed:
            return
        self.closed = True
        for label in list(self.live):
            self._call(label, "close", lambda s: s.close(status))
        for label, sink in self.failed.items():
            try:
                sink.close(status)
            except Exception as exc:  # noqa: BLE001 - already reported once
                self.run.log.debug("sink_close_failed", sink=label, error=f"{type(exc).__name__}: {exc}")

    def _call(self, label: str, action: str, fn: Any) -> None:
        sink = self.live[label]
        try:
            fn(sink)
        except Exception as exc:  # noqa: BLE001 - a sink must never fail the run
            del self.live[label]
            if action != "close":
                self.failed[label] = sink
            self._warn(label, action, exc)

    def _warn(self, label: str, action: str, exc: BaseException) -> None:
        self.run.log.warning("sink_failed", sink=label, action=action, error=f"{type(exc).__name__}: {exc}",
                             note="this sink is off for the rest of the run; metrics.jsonl still has every metric")
