"""The ``tensorboard`` sink: TensorBoard event files written with the ``tensorboard`` package's own writer.

Every metric of a record becomes a scalar (tag = metric name, e.g. ``rollout/success``) at the record's step; the
resolved config is written once as text (tag ``config``, step 0) and shows in TensorBoard's Text tab. No torch and
no TensorFlow are needed: ``pip install 'ragen[tensorboard]'``, then ``tensorboard --logdir runs``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from ragen_plugins_sinks.base import due

__all__ = ["TensorBoardConfig", "TensorBoardSink"]


@attrs.define
class TensorBoardConfig:
    """Options of the ``tensorboard`` sink.

    :ivar log_dir: where the event files go; relative to the run directory (default ``RUN_DIR/tensorboard``, so
        ``tensorboard --logdir runs`` shows every run).
    :ivar every: log the records of every N-th step (records of step 0 always).
    :ivar flush_secs: flush buffered events at least this often (they are always flushed at the end).
    """

    log_dir: str = "tensorboard"
    every: int = attrs.field(default=1, validator=attrs.validators.ge(1))
    flush_secs: int = attrs.field(default=30, validator=attrs.validators.ge(1))


class TensorBoardSink:
    """Writes scalars per step and the config as text (see the module docstring)."""

    config_cls = TensorBoardConfig

    def __init__(self, config: TensorBoardConfig) -> None:
        self.config = config
        self.writer: Any = None
        self.log_dir: Path | None = None

    def open(self, run: Any) -> None:
        """Create the log directory and the event file; write the resolved config as text."""
        import yaml
        from tensorboard.summary.writer.event_file_writer import EventFileWriter

        self.log_dir = Path(run.run_dir) / self.config.log_dir
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.writer = EventFileWriter(str(self.log_dir), flush_secs=self.config.flush_secs)
        text = yaml.safe_dump(run.resolved.to_data(), sort_keys=False, allow_unicode=True)
        self._event(0, [self._text_value("config", f"```yaml\n{text}```")])

    def write(self, step: int, metrics: Mapping[str, float]) -> None:
        """One event holding a scalar per metric (skipped unless the step is due)."""
        if not due(step, self.config.every) or not metrics:
            return
        from tensorboard.compat.proto import summary_pb2

        self._event(step, [summary_pb2.Summary.Value(tag=name, simple_value=float(value))
                           for name, value in metrics.items()])

    def close(self, status: str) -> None:
        """Flush and close the event file."""
        if self.writer is not None:
            self.writer.close()
            self.writer = None

    def _event(self, step: int, values: list[Any]) -> None:
        from tensorboard.compat.proto import event_pb2, summary_pb2

        self.writer.add_event(event_pb2.Event(wall_time=time.time(), step=int(step),
                                              summary=summary_pb2.Summary(value=values)))

    @staticmethod
    def _text_value(tag: str, text: str) -> Any:
        from tensorboard.compat.proto import summary_pb2, tensor_pb2, tensor_shape_pb2, types_pb2
        from tensorboard.plugins.text import metadata

        tensor = tensor_pb2.TensorProto(
            dtype=types_pb2.DT_STRING, string_val=[text.encode("utf-8")],
            tensor_shape=tensor_shape_pb2.TensorShapeProto(dim=[tensor_shape_pb2.TensorShapeProto.Dim(size=1)]))
        return summary_pb2.Summary.Value(tag=tag, tensor=tensor,
                                         metadata=metadata.create_summary_metadata(display_name=tag, description=""))
