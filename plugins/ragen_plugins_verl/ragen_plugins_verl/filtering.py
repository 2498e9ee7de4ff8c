"""ragen's rollout filters between veRL's rollout and update (veRL 0.9.1).

:func:`filter_dataproto` applies any core filter (:class:`~ragen_core.protocols.RolloutFilter`) to a ``DataProto``:
rows are grouped by ``uid``, the filter ranks the groups exactly as in the native trainer and whole groups are kept,
rows in their original order. :class:`FilteringReplayBuffer` is the same selection at veRL's extension point for it:
the V1 replay buffer (``trainer.v1.sampler.custom_sampler``). It samples a finished batch like veRL's, filters it and
drops the other groups from TransferQueue; veRL then pads the smaller batch to its divisibility constraints
(``upsample_batch_to_divisible_size``: no-op rows with zero reward and mask).

An empty selection cannot become an empty veRL batch: the batch is kept and the trainer mode zeroes its advantages
(no policy-gradient signal; ``rollout/empty_after_filter`` = 1), RAGEN's "skip the step" as close as a fixed-shape
pipeline allows.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ragen_core.protocols import FilterResult
from ragen_core.registry import with_filter_metrics

from .dataproto import from_dataproto_rows, to_rollout_batch

__all__ = ["FilteringReplayBuffer", "filter_dataproto", "kept_rows"]


def kept_rows(data: Any, filt: Any) -> tuple[list[int], FilterResult, list[Any]]:
    """Rows of ``data`` in the groups ``filt`` keeps, the filter's result, and the kept ``uid`` values."""
    batch, uids = to_rollout_batch(data)
    result = with_filter_metrics(batch, filt.select(batch))  # a third party's filter too (docs/metrics.md)
    keep = {uids[g] for g in result.kept_groups}
    rows = [i for i, u in enumerate(data.non_tensor_batch["uid"]) if u in keep]
    return rows, result, sorted(keep, key=str)


def filter_dataproto(data: Any, filt: Any) -> tuple[Any, FilterResult]:
    """The ``DataProto`` of the kept groups (whole groups, original row order) and the filter's result."""
    rows, result, _ = kept_rows(data, filt)
    return from_dataproto_rows(data, rows), result


def _replay_buffer_base() -> type:
    from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer

    return ReplayBuffer


class FilteringReplayBuffer(_replay_buffer_base()):  # type: ignore[misc]
    """veRL's synchronous replay buffer followed by the ragen filter named in the run's config."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.filter: Any = None
        self.last_result: FilterResult | None = None
        self.last_empty = False

    def set_filter(self, filt: Any) -> None:
        """Use ``filt`` (a core filter) on training batches; None keeps everything (the trainer mode sets it)."""
        self.filter = filt

    def sample(self, global_steps: int, partition_id: str, batch_size: int) -> tuple[Any, dict]:
        """veRL's sample, then the filter on the ``train`` partition (validation batches are never filtered)."""
        import transfer_queue as tq
        from transfer_queue import KVBatchMeta

        from .verl_trainer import fetch_dataproto

        batch, metrics = super().sample(global_steps=global_steps, partition_id=partition_id, batch_size=batch_size)
        self.last_result, self.last_empty = None, False
        if partition_id != "train" or self.filter is None or len(batch) == 0:
            return batch, metrics
        data = fetch_dataproto(batch)
        rows, result, _ = kept_rows(data, self.filter)
        self.last_result = result
        metrics = {**metrics, **result.metrics, "rollout/empty_after_filter": float(not rows)}
        if not rows:
            self.last_empty = True
            return batch, metrics
        keep = set(rows)
        dropped = [k for i, k in enumerate(batch.keys) if i not in keep]
        if dropped:
            tq.kv_clear(keys=dropped, partition_id=batch.partition_id)
        idx = np.asarray(rows)
        kept = KVBatchMeta(partition_id=batch.partition_id, keys=[batch.keys[i] for i in idx],
                           tags=[batch.tags[i] for i in idx])
        return kept, metrics
