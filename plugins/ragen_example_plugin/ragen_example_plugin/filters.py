"""A filter that keeps the groups in which some trajectory succeeded."""

from __future__ import annotations

from typing import Any

import attrs

from ragen_core.protocols import FilterResult
from ragen_core.validators import integer


@attrs.define
class AnySuccessConfig:
    """``min_successes``: how many successes a group needs to be kept."""

    min_successes: int = attrs.field(default=1, validator=integer(1))


class AnySuccessFilter:
    config_cls = AnySuccessConfig

    def __init__(self, config: AnySuccessConfig) -> None:
        self.config = config

    def select(self, batch: Any) -> FilterResult:
        groups = batch.groups()
        kept = tuple(g for g, trajs in groups.items() if sum(t.success for t in trajs) >= self.config.min_successes)
        ratio = len(kept) / len(groups) if groups else 0.0
        return FilterResult(kept, {"rollout/filter_kept_count": float(len(kept)), "rollout/filter_kept_ratio": ratio})
